"""Metrics for one owner and a range of days, through the API an admin calls."""

from datetime import UTC, datetime, time, timedelta

from bson import ObjectId

from desk.schema import now
from desk.work_orders import repository as orders_repo
from tests.metrics.test_service import _order


async def test_one_owners_figures_and_a_range_of_days(make_user, client_for, db):
    admin, sam, priya = await make_user("admin"), await make_user("user"), await make_user("user")
    sams, priyas = ObjectId(sam["id"]), ObjectId(priya["id"])
    forty = (now() - timedelta(days=40)).date()
    morning = datetime.combine(forty, time(6), tzinfo=UTC)  # opened and closed that day, whatever the hour now
    opened_and_closed = {"createdAt": morning, "updatedAt": morning, "closedAt": morning + timedelta(hours=6)}
    await orders_repo.insert(db, _order(sams, status="done") | opened_and_closed)
    await orders_repo.insert(db, _order(sams, priority="urgent", created_days_ago=2))
    await orders_repo.insert(db, _order(priyas, status="done", created_days_ago=1, closed_hours_later=2))
    client = await client_for(admin)

    mine = (await client.get("/api/v1/admin/metrics", params={"ownerId": sam["id"]})).json()
    assert mine["total"] == 2 and mine["byStatus"]["done"] == 1 and mine["byPriority"]["urgent"] == 1
    shouted = await client.get("/api/v1/admin/metrics", params={"ownerId": sam["id"].upper()})
    assert shouted.json() == mine  # an id in capitals is the same id
    assert mine["meanHoursToDone"] == 6.0
    assert len(mine["perDay"]) == 30 and sum(d["opened"] for d in mine["perDay"]) == 1  # the 40-day-old is outside

    params = {"ownerId": sam["id"], "since": (forty - timedelta(days=1)).isoformat(), "until": forty.isoformat()}
    ranged = (await client.get("/api/v1/admin/metrics", params=params)).json()
    assert [(d["day"], d["opened"], d["closed"]) for d in ranged["perDay"]][-1] == (forty.isoformat(), 1, 1)
    assert len(ranged["perDay"]) == 2

    everyone = (await client.get("/api/v1/admin/metrics", params={"since": forty.isoformat()})).json()
    assert everyone["total"] == 3 and sum(d["opened"] for d in everyone["perDay"]) == 3

    backwards = await client.get("/api/v1/admin/metrics", params={"since": "2026-03-02", "until": "2026-03-01"})
    assert backwards.status_code == 200 and backwards.json()["perDay"] == []  # no day is in that range
    params = {"ownerId": sam["id"], "since": "2026-03-02", "until": "2026-03-01"}
    backwards_for_sam = await client.get("/api/v1/admin/metrics", params=params)  # was a 500
    assert backwards_for_sam.status_code == 200 and backwards_for_sam.json()["perDay"] == []
    assert backwards_for_sam.json()["total"] == 2  # the counts of what exists now stay
    as_a_number = await client.get("/api/v1/admin/metrics", params={"until": "0"})  # the fuzzer's 1970-01-01
    assert as_a_number.status_code == 400
    first_day = await client.get("/api/v1/admin/metrics", params={"until": "0001-01-01"})  # was a 500
    assert first_day.status_code == 200 and [d["day"] for d in first_day.json()["perDay"]] == ["0001-01-01"]
    last_day = await client.get("/api/v1/admin/metrics", params={"ownerId": sam["id"], "until": "9999-12-31"})
    assert last_day.status_code == 200 and last_day.json()["perDay"][-1]["day"] == "9999-12-31"
