"""Desk metrics, read from the counters the work-order repository keeps (no scans, no date aggregation).

Reading counters rather than aggregating is also what makes the numbers the same on the embedded
engine, whose date aggregations are wrong (DESIGN §4), and on a real MongoDB. They describe the
work orders that exist now: deleting one takes it out of every figure.
"""

from datetime import timedelta

from pymongo.asynchronous.database import AsyncDatabase

from desk.actors import Actor
from desk.errors import Forbidden
from desk.metrics.models import DayCount, Metrics
from desk.schema import now
from desk.work_orders.counters import day_key, read, total_key
from desk.work_orders.models import PRIORITIES, STATUSES

DAYS = 30


async def desk_metrics(*, db: AsyncDatabase, actor: Actor) -> Metrics:
    """Counts by status and priority, opened and closed per day over 30 days, mean time to done."""
    if not actor.is_admin:
        raise Forbidden("Only admins can see desk metrics.")
    today = now()
    days = [today - timedelta(days=back) for back in range(DAYS - 1, -1, -1)]
    keys = [total_key(), "done:count", "done:seconds"]
    keys += [total_key(status=s) for s in STATUSES] + [total_key(priority=p) for p in PRIORITIES]
    keys += [day_key(kind, day) for day in days for kind in ("opened", "closed")]
    values = await read(db, keys)
    done = values["done:count"]
    return Metrics(
        total=values[total_key()],
        by_status={s: values[total_key(status=s)] for s in STATUSES},
        by_priority={p: values[total_key(priority=p)] for p in PRIORITIES},
        per_day=[
            DayCount(day=d.date(), opened=values[day_key("opened", d)], closed=values[day_key("closed", d)])
            for d in days
        ],
        mean_hours_to_done=round(values["done:seconds"] / done / 3600, 2) if done else None,
    )
