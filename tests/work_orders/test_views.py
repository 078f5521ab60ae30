"""Lists for views that stay put: several statuses at once (the "Open" view), one day's orders, totals to match."""

from datetime import UTC, datetime

from bson import ObjectId


async def test_status_may_repeat_and_the_total_counts_every_status_named(make_user, client_for, make_order):
    sam = await make_user("user")
    client = await client_for(sam)
    started, finished = await make_order(sam, "Started"), await make_order(sam, "Finished")
    await make_order(sam, "Waiting")
    await client.patch(f"/api/v1/work-orders/{started.id}", json={"version": 1, "status": "in_progress"})
    await client.patch(f"/api/v1/work-orders/{finished.id}", json={"version": 1, "status": "done"})

    open_ = (await client.get("/api/v1/work-orders", params=[("status", "pending"), ("status", "in_progress")])).json()
    assert sorted(o["title"] for o in open_["items"]) == ["Started", "Waiting"] and open_["total"] == 2
    searched = await client.get("/api/v1/work-orders", params=[("q", "fin"), ("status", "done"), ("status", "pending")])
    assert [o["title"] for o in searched.json()["items"]] == ["Finished"] and searched.json()["total"] == 1
    one = (await client.get("/api/v1/work-orders", params={"status": "done"})).json()
    assert [o["title"] for o in one["items"]] == ["Finished"] and one["total"] == 1
    wrong = await client.get("/api/v1/work-orders", params=[("status", "pending"), ("status", "open")])
    assert wrong.status_code == 400


async def test_the_open_view_of_a_person_holds_the_shared_queue_and_its_total_counts_what_it_shows(
    make_user, client_for, make_order
):
    # found by a QA pass: the queue's orders were counted in the total but missing from the pages
    sam, priya = await make_user("user"), await make_user("user")
    await make_order(sam, "Sam's own tap")
    await make_order(priya, "Queued chair", ownerId=None)
    started = await make_order(priya, "Queued lamp", ownerId=None)
    await make_order(priya, "Priya's own desk")
    priyas = await client_for(priya)
    await priyas.patch(f"/api/v1/work-orders/{started.id}", json={"version": 1, "status": "in_progress"})
    client = await client_for(sam)

    open_ = (await client.get("/api/v1/work-orders", params=[("status", "pending"), ("status", "in_progress")])).json()

    assert sorted(o["title"] for o in open_["items"]) == ["Queued chair", "Queued lamp", "Sam's own tap"]
    assert open_["total"] == 3


async def test_orders_opened_on_a_day(make_user, client_for, make_order, db):
    sam = await make_user("user")
    client = await client_for(sam)
    old, new = await make_order(sam, "Old radiator"), await make_order(sam, "New radiator")
    await make_order(sam, "New window")
    moved = datetime(2026, 3, 14, 23, 30, tzinfo=UTC)
    await db["work_orders"].update_one({"_id": ObjectId(old.id)}, {"$set": {"createdAt": moved}})
    await db["search_postings"].update_many({"orderId": ObjectId(old.id)}, {"$set": {"createdAt": moved}})

    that_day = (await client.get("/api/v1/work-orders", params={"opened": "2026-03-14"})).json()
    assert [o["title"] for o in that_day["items"]] == ["Old radiator"] and that_day["total"] == 1
    today = new.created_at.date().isoformat()
    searched = (await client.get("/api/v1/work-orders", params={"opened": today, "q": "radi"})).json()
    assert [o["title"] for o in searched["items"]] == ["New radiator"] and searched["total"] == 1
    assert (await client.get("/api/v1/work-orders", params={"opened": "14/03/2026"})).status_code == 400
