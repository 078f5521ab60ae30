"""Metrics: counts by status and priority, opened and closed per day, mean time to done."""

from datetime import timedelta

from bson import ObjectId

from desk.metrics.service import desk_metrics
from desk.schema import now
from desk.work_orders import counters, service
from desk.work_orders import repository as orders_repo
from desk.work_orders.models import WorkOrderUpdate
from tests.helpers import actor


def _order(owner_id, *, status="pending", priority="medium", created_days_ago=0.0, closed_hours_later=None):
    created = now() - timedelta(days=created_days_ago)
    closed = created + timedelta(hours=closed_hours_later) if closed_hours_later is not None else None
    return {
        "title": "t",
        "description": "",
        "priority": priority,
        "status": status,
        "ownerId": owner_id,
        "version": 1,
        "createdAt": created,
        "updatedAt": created,
        "closedAt": closed,
    }


async def test_metrics_describe_the_work_orders(make_user, client_for, db):
    admin = await make_user("admin")
    owner = ObjectId(admin["id"])
    await orders_repo.insert(db, _order(owner, priority="urgent", created_days_ago=2))
    await orders_repo.insert(db, _order(owner, status="done", created_days_ago=3, closed_hours_later=10))
    await orders_repo.insert(db, _order(owner, status="done", created_days_ago=1, closed_hours_later=20))
    await orders_repo.insert(
        db, _order(owner, status="cancelled", priority="low", created_days_ago=40, closed_hours_later=1)
    )

    metrics = (await (await client_for(admin)).get("/api/v1/admin/metrics")).json()

    assert metrics["total"] == 4
    assert metrics["byStatus"] == {"pending": 1, "in_progress": 0, "done": 2, "cancelled": 1}
    assert metrics["byPriority"] == {"low": 1, "medium": 2, "high": 0, "urgent": 1}
    assert metrics["meanHoursToDone"] == 15.0
    days = metrics["perDay"]
    assert len(days) == 30 and days[-1]["day"] == now().date().isoformat()
    assert sum(d["opened"] for d in days) == 3  # the 40-day-old order is outside the window
    assert sum(d["closed"] for d in days) == 2
    three_days_ago = (now() - timedelta(days=3)).date().isoformat()
    assert next(d for d in days if d["day"] == three_days_ago)["opened"] == 1


async def test_metrics_follow_updates_and_deletes(make_user, make_order, db):
    admin = await make_user("admin")
    order = await make_order(admin)

    await service.update(db=db, actor=actor(admin), order_id=order.id, data=WorkOrderUpdate(version=1, status="done"))
    after_done = await desk_metrics(db=db, actor=actor(admin))
    await service.update(
        db=db, actor=actor(admin), order_id=order.id, data=WorkOrderUpdate(version=2, status="pending")
    )
    reopened = await desk_metrics(db=db, actor=actor(admin))
    await service.delete(db=db, actor=actor(admin), order_id=order.id, version=3)
    deleted = await desk_metrics(db=db, actor=actor(admin))

    assert (after_done.by_status["done"], after_done.per_day[-1].closed, after_done.mean_hours_to_done) == (1, 1, 0.0)
    assert (reopened.by_status["done"], reopened.per_day[-1].closed, reopened.mean_hours_to_done) == (0, 0, None)
    assert (deleted.total, deleted.per_day[-1].opened) == (0, 0)


async def test_rebuilding_the_counters_gives_the_same_numbers(make_user, make_order, db):
    admin = await make_user("admin")
    for title in ["a", "b", "c"]:
        await make_order(admin, title, priority="high")
    before = await desk_metrics(db=db, actor=actor(admin))

    await db["counters"].update_many({}, {"$set": {"n": 999}})
    await counters.rebuild(db)

    assert await desk_metrics(db=db, actor=actor(admin)) == before


async def test_metrics_are_for_admins(make_user, client_for):
    response = await (await client_for(await make_user("user"))).get("/api/v1/admin/metrics")
    assert response.status_code == 403


async def test_overdue_orders_are_counted_by_owner_and_follow_the_clock(make_user, make_order, client_for, clock, db):
    admin, sam, lee = await make_user("admin"), await make_user("user"), await make_user("user")
    moment = clock.now()
    for person, hours in [(sam, -1), (sam, -30), (lee, -2), (lee, 1)]:
        await make_order(person, dueAt=moment + timedelta(hours=hours))
    await make_order(sam, ownerId=None, dueAt=moment - timedelta(days=2))  # the queue's
    finished = await make_order(lee, dueAt=moment - timedelta(days=1))
    await make_order(lee)  # due by no day
    await service.update(db=db, actor=actor(lee), order_id=finished.id, data=WorkOrderUpdate(version=1, status="done"))
    client = await client_for(admin)

    metrics = (await client.get("/api/v1/admin/metrics")).json()
    assert metrics["overdueByOwner"] == {sam["id"]: 2, lee["id"]: 1, "none": 1}
    theirs = (await client.get("/api/v1/admin/metrics", params={"ownerId": lee["id"]})).json()
    assert theirs["overdueByOwner"] == {lee["id"]: 1}

    clock.move(timedelta(hours=1, minutes=1))  # Lee's next one is past its moment now
    assert (await client.get("/api/v1/admin/metrics")).json()["overdueByOwner"][lee["id"]] == 2
    assert (await (await client_for(sam)).get("/api/v1/admin/metrics")).status_code == 403
