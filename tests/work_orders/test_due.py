"""Due dates: set, changed and cleared on an order; the overdue, today and week views and the soonest-first sort."""

from datetime import UTC, datetime, timedelta

import pytest
from bson import ObjectId

from desk import state
from desk.agent.core import budget
from desk.app import ensure_indexes
from tests.clock import ManualClock

ORDERS = "/api/v1/work-orders"


async def titles(client, **params) -> list[str]:
    response = await client.get(ORDERS, params=params)
    assert response.status_code == 200, response.text
    return [order["title"] for order in response.json()["items"]]


def iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


async def test_a_due_moment_is_kept_in_utc_changed_and_cleared_and_the_timeline_says_so(make_user, client_for):
    sam = await make_user("user")
    client = await client_for(sam)

    created = await client.post(ORDERS, json={"title": "Boiler service", "dueAt": "2026-12-10T17:00:00+01:00"})
    assert created.status_code == 201, created.text
    order = created.json()
    assert order["dueAt"] == "2026-12-10T16:00:00Z"
    assert (await client.get(f"{ORDERS}/{order['id']}")).json()["dueAt"] == "2026-12-10T16:00:00Z"

    moved = await client.patch(f"{ORDERS}/{order['id']}", json={"version": 1, "dueAt": "2026-12-11T09:30:00Z"})
    assert (moved.status_code, moved.json()["dueAt"], moved.json()["version"]) == (200, "2026-12-11T09:30:00Z", 2)
    stale = await client.patch(f"{ORDERS}/{order['id']}", json={"version": 1, "dueAt": None})
    assert stale.status_code == 409 and stale.json()["error"]["details"]["current"]["dueAt"] == "2026-12-11T09:30:00Z"
    cleared = await client.patch(f"{ORDERS}/{order['id']}", json={"version": 2, "dueAt": None})
    assert (cleared.status_code, cleared.json()["dueAt"], cleared.json()["version"]) == (200, None, 3)
    none_yet = await client.post(ORDERS, json={"title": "No hurry"})
    assert none_yet.json()["dueAt"] is None

    timeline = (await client.get(f"{ORDERS}/{order['id']}/activity")).json()
    changes = [(entry["before"], entry["after"]) for entry in timeline if entry["action"] == "updated"]
    assert changes == [
        ({"dueAt": "2026-12-11T09:30:00Z"}, {"dueAt": None}),
        ({"dueAt": "2026-12-10T16:00:00Z"}, {"dueAt": "2026-12-11T09:30:00Z"}),
    ]


@pytest.mark.parametrize("bad", ["2026-12-10", "tomorrow", 1765382400, "2026-12-10T17:00:00", "2026-02-30T10:00:00Z"])
async def test_a_due_moment_without_its_offset_or_not_a_moment_is_refused_naming_the_field(
    bad, make_user, client_for, db
):
    sam = await make_user("user")
    client = await client_for(sam)
    kept = (await client.post(ORDERS, json={"title": "Boiler service"})).json()

    refused = [
        await client.post(ORDERS, json={"title": "Boiler", "dueAt": bad}),
        await client.patch(f"{ORDERS}/{kept['id']}", json={"version": 1, "dueAt": bad}),
    ]

    for response in refused:
        assert response.status_code == 400
        error = response.json()["error"]
        assert error["code"] == "VALIDATION_ERROR"
        assert [problem["field"] for problem in error["details"]["fields"]] == ["dueAt"]
    assert await db["work_orders"].count_documents({}) == 1
    assert (await client.get(f"{ORDERS}/{kept['id']}")).json()["version"] == 1


async def test_overdue_holds_open_orders_past_their_moment_whoever_lists_them(make_user, client_for, make_order, clock):
    sam, admin = await make_user("user"), await make_user("admin")
    client = await client_for(sam)
    now = clock.now()
    late = now - timedelta(hours=2)
    await make_order(sam, "Late boiler", dueAt=late)
    started = await make_order(sam, "Late started pump", dueAt=now - timedelta(days=3))
    done = await make_order(sam, "Late but done", dueAt=late)
    cancelled = await make_order(sam, "Late but cancelled", dueAt=late)
    await make_order(sam, "Due later", dueAt=now + timedelta(hours=1))
    await make_order(sam, "Never due")
    await make_order(sam, "Queued late lamp", dueAt=late, ownerId=None)
    for order, status in [(started, "in_progress"), (done, "done"), (cancelled, "cancelled")]:
        await client.patch(f"{ORDERS}/{order.id}", json={"version": 1, "status": status})

    overdue = (await client.get(ORDERS, params={"due": "overdue", "sort": "dueAt"})).json()
    assert [o["title"] for o in overdue["items"]] == ["Late started pump", "Late boiler", "Queued late lamp"]
    assert overdue["total"] == 3
    assert await titles(await client_for(admin), due="overdue", sort="title") == [
        "Late boiler",
        "Late started pump",
        "Queued late lamp",
    ]
    assert await titles(client, due="overdue", q="boil") == ["Late boiler"]
    assert await titles(client, due="overdue", ownerId="none") == ["Queued late lamp"]

    clock.move(timedelta(hours=1, minutes=1))  # "Due later" is past its moment now
    assert "Due later" in await titles(client, due="overdue")
    reopened = await client.patch(f"{ORDERS}/{done.id}", json={"version": 2, "status": "pending"})
    assert reopened.status_code == 200 and "Late but done" in await titles(client, due="overdue")
    assert (await client.get(ORDERS, params={"due": "late"})).status_code == 400


async def test_the_due_sort_puts_the_soonest_first_and_orders_due_by_no_day_last(make_user, client_for, make_order):
    sam = await make_user("user")
    client = await client_for(sam)
    base = datetime(2027, 1, 10, 12, tzinfo=UTC)
    await make_order(sam, "No day pump")
    await make_order(sam, "Later pump", dueAt=base + timedelta(days=2))
    await make_order(sam, "Sooner pump", dueAt=base)
    done = await make_order(sam, "Done pump", dueAt=base + timedelta(days=1))
    await client.patch(f"{ORDERS}/{done.id}", json={"version": 1, "status": "done"})

    expected = ["Sooner pump", "Done pump", "Later pump", "No day pump"]
    assert await titles(client, sort="dueAt") == expected
    assert await titles(client, sort="dueAt", q="pump") == expected
    assert await titles(client, sort="dueAt", limit=2, offset=2) == expected[2:]


async def test_today_and_the_week_are_the_desks_days(make_user, client_for, make_order, db):
    # Auckland is UTC+13 in December: its day began at 11:00 UTC the day before
    await budget.set_desk_zone(db, "Pacific/Auckland")
    state.current().clock = ManualClock(datetime(2026, 12, 9, 20, 0, tzinfo=UTC))  # 10 Dec, 09:00 in Auckland
    sam = await make_user("user")
    client = await client_for(sam)
    day_start = datetime(2026, 12, 9, 11, 0, tzinfo=UTC)
    await make_order(sam, "Due at its first moment", dueAt=day_start)
    await make_order(sam, "Due yesterday evening there", dueAt=day_start - timedelta(milliseconds=1))
    await make_order(sam, "Due at its last moment", dueAt=day_start + timedelta(days=1, milliseconds=-1))
    await make_order(sam, "Due tomorrow there", dueAt=day_start + timedelta(days=1))
    await make_order(sam, "Due on the seventh day", dueAt=day_start + timedelta(days=7, milliseconds=-1))
    await make_order(sam, "Due on the eighth day", dueAt=day_start + timedelta(days=7))

    assert await titles(client, due="today", sort="dueAt") == ["Due at its first moment", "Due at its last moment"]
    assert await titles(client, due="week", sort="dueAt") == [
        "Due at its first moment",
        "Due at its last moment",
        "Due tomorrow there",
        "Due on the seventh day",
    ]
    assert await titles(client, due="overdue", sort="dueAt") == [
        "Due yesterday evening there",
        "Due at its first moment",
    ]


async def test_orders_from_before_due_dates_sort_last_in_lists_and_searches_after_start_up(
    make_user, client_for, make_order, db
):
    sam = await make_user("user")
    client = await client_for(sam)
    old = await make_order(sam, "Old pump")
    await make_order(sam, "Due pump", dueAt=datetime(2027, 1, 10, tzinfo=UTC))
    # as a desk from before due dates stored it: no due keys on the order nor on its postings
    await db["work_orders"].update_one(
        {"_id": ObjectId(old.id)}, {"$unset": {"dueAt": "", "dueKey": "", "openDue": ""}}
    )
    await db["search_postings"].delete_many({})
    await db["search_meta"].delete_many({})  # the marks: the backfill and the postings' format

    await ensure_indexes(db)

    assert await titles(client, sort="dueAt") == ["Due pump", "Old pump"]
    assert await titles(client, sort="dueAt", q="pump") == ["Due pump", "Old pump"]
    assert (await client.get(f"{ORDERS}/{old.id}")).json()["dueAt"] is None
