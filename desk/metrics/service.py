"""Desk metrics, read from the counters the work-order repository keeps (no scans, no date aggregation).

Reading counters rather than aggregating is also what makes the numbers the same on the embedded
engine, whose date aggregations are wrong (DESIGN §4), and on a real MongoDB. They describe the
work orders that exist now: deleting one takes it out of every figure. For one owner, counts by
status and priority are counters too; their days and time to done are read from that person's
orders only (counted here, not by a date aggregation), so the cost follows one person's orders.
Overdue orders by owner move with the clock, so no counter keeps them: they are read from the due
index (`open_due`), so the cost follows the overdue orders, not the desk.
"""

from collections import Counter

from bson import ObjectId
from pymongo.asynchronous.database import AsyncDatabase

from desk import state
from desk.access import require_admin
from desk.actors import Actor
from desk.metrics.models import DAYS, DayCount, Metrics, MetricsQuery
from desk.schema import after, midnight
from desk.work_orders import repository as orders_repo
from desk.work_orders.counters import day_key, read, total_key
from desk.work_orders.models import PRIORITIES, STATUSES

__all__ = ["DAYS", "desk_metrics"]


async def desk_metrics(*, db: AsyncDatabase, actor: Actor, query: MetricsQuery | None = None) -> Metrics:
    """Counts by status and priority, opened and closed per day, mean time to done; for one owner if asked."""
    require_admin(actor, "see desk metrics")
    query = query or MetricsQuery()
    days, owner = query.days(), query.owner_id
    midnights = {day: midnight(day) for day in days}
    keys = [total_key(owner), *(total_key(owner, status=s) for s in STATUSES)]
    keys += [total_key(owner, priority=p) for p in PRIORITIES]
    if owner is None:
        keys += ["done:count", "done:seconds"]
        keys += [day_key(kind, midnights[day]) for day in days for kind in ("opened", "closed")]
    values = await read(db, keys)
    if owner is None:
        opened = {day: values[day_key("opened", midnights[day])] for day in days}
        closed = {day: values[day_key("closed", midnights[day])] for day in days}
        done, seconds = values["done:count"], values["done:seconds"]
    elif not days:  # `until` before `since`: no days to read, nor an end to read them to
        opened = closed = Counter()
        done, seconds = 0, 0
    else:
        history = await orders_repo.owner_history(db, ObjectId(owner), start=midnights[days[0]], end=after(days[-1]))
        opened, closed = Counter(m.date() for m in history["opened"]), Counter(m.date() for m in history["closed"])
        done, seconds = len(history["done"]), sum(history["done"])
    return Metrics(
        total=values[total_key(owner)],
        by_status={s: values[total_key(owner, status=s)] for s in STATUSES},
        by_priority={p: values[total_key(owner, priority=p)] for p in PRIORITIES},
        per_day=[DayCount(day=d, opened=opened.get(d, 0), closed=closed.get(d, 0)) for d in days],
        mean_hours_to_done=round(seconds / done / 3600, 2) if done else None,
        overdue_by_owner=await orders_repo.overdue_by_owner(db, now=state.current().clock.now(), owner=owner),
    )
