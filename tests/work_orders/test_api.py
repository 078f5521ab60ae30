"""Work orders over HTTP: create, read, change with versions, delete, timeline, lists."""

import asyncio

from bson import ObjectId

from desk.work_orders import service as work_orders_service
from desk.work_orders.models import WorkOrderUpdate
from tests.helpers import actor


async def test_create_returns_a_pending_order_owned_by_the_creator(make_user, client_for):
    sam = await make_user("user")
    client = await client_for(sam)

    response = await client.post("/api/v1/work-orders", json={"title": "Leaking tap", "priority": "high"})

    assert response.status_code == 201
    order = response.json()
    assert order["title"] == "Leaking tap"
    assert order["status"] == "pending"
    assert order["priority"] == "high"
    assert order["ownerId"] == sam["id"]
    assert order["version"] == 1
    assert order["description"] == ""
    fetched = await client.get(response.headers["Location"])  # where the new order is, as HTTP says it
    assert fetched.json() == order


async def test_update_bumps_the_version_and_records_who_changed_what(make_user, client_for, make_order):
    sam = await make_user("user")
    client = await client_for(sam)
    order = await make_order(sam, "Broken door handle")

    response = await client.patch(
        f"/api/v1/work-orders/{order.id}", json={"version": 1, "status": "in_progress", "priority": "urgent"}
    )

    assert response.status_code == 200
    assert response.json()["version"] == 2
    assert response.json()["status"] == "in_progress"
    timeline = (await client.get(f"/api/v1/work-orders/{order.id}/activity")).json()
    assert [entry["action"] for entry in timeline] == ["updated", "created"]
    assert timeline[0]["before"] == {"priority": "medium", "status": "pending"}
    assert timeline[0]["after"] == {"priority": "urgent", "status": "in_progress"}
    assert timeline[0]["actorId"] == sam["id"]
    assert timeline[0]["actorKind"] == "human"


async def test_a_stale_version_is_a_conflict_and_writes_nothing(make_user, client_for, make_order, db):
    sam = await make_user("user")
    client = await client_for(sam)
    order = await make_order(sam, "Flickering lights")
    await client.patch(f"/api/v1/work-orders/{order.id}", json={"version": 1, "title": "Flickering lights, room 2"})

    stale = await client.patch(f"/api/v1/work-orders/{order.id}", json={"version": 1, "priority": "low"})

    assert stale.status_code == 409
    error = stale.json()["error"]
    assert error["code"] == "CONFLICT"
    assert error["details"]["current"]["title"] == "Flickering lights, room 2"
    stored = await db["work_orders"].find_one({"_id": ObjectId(order.id)})
    assert stored["priority"] == "medium"
    assert stored["version"] == 2
    assert await db["activity"].count_documents({}) == 2


async def test_concurrent_saves_at_the_same_version_let_exactly_one_win(make_user, make_order, db):
    sam = await make_user("user")
    order = await make_order(sam, "Heating not working")

    async def save(priority: str):
        data = WorkOrderUpdate(version=1, priority=priority)
        try:
            return await work_orders_service.update(db=db, actor=actor(sam), order_id=order.id, data=data)
        except Exception as error:
            return error

    results = await asyncio.gather(*(save(p) for p in ["low", "high", "urgent"] * 4))

    winners = [r for r in results if not isinstance(r, Exception)]
    assert len(winners) == 1
    assert all(getattr(r, "code", None) == "CONFLICT" for r in results if isinstance(r, Exception))
    stored = await db["work_orders"].find_one({})
    assert stored["version"] == 2
    assert stored["priority"] == winners[0].priority


async def test_delete_needs_the_current_version(make_user, client_for, make_order, db):
    sam = await make_user("user")
    client = await client_for(sam)
    order = await make_order(sam, "Blocked sink")

    stale = await client.delete(f"/api/v1/work-orders/{order.id}", params={"version": 7})
    assert stale.status_code == 409
    assert await db["work_orders"].count_documents({}) == 1

    gone = await client.delete(f"/api/v1/work-orders/{order.id}", params={"version": 1})
    assert gone.status_code == 204
    assert gone.content == b"" and "content-type" not in gone.headers  # no content, and no type for none
    assert (await client.get(f"/api/v1/work-orders/{order.id}")).status_code == 404
    deleted = await db["activity"].find_one({"action": "deleted"})
    assert deleted["before"]["title"] == "Blocked sink"


async def test_closing_and_reopening_sets_and_clears_closed_at(make_user, client_for, make_order):
    sam = await make_user("user")
    client = await client_for(sam)
    order = await make_order(sam)

    done = (await client.patch(f"/api/v1/work-orders/{order.id}", json={"version": 1, "status": "done"})).json()
    assert done["closedAt"] is not None
    reopened = (await client.patch(f"/api/v1/work-orders/{order.id}", json={"version": 2, "status": "pending"})).json()
    assert reopened["closedAt"] is None


async def test_saving_without_a_change_keeps_the_version(make_user, client_for, make_order, db):
    sam = await make_user("user")
    client = await client_for(sam)
    order = await make_order(sam, "Window won't close")

    same = await client.patch(f"/api/v1/work-orders/{order.id}", json={"version": 1, "title": "Window won't close"})

    assert same.status_code == 200
    assert same.json()["version"] == 1
    assert await db["activity"].count_documents({}) == 1


async def test_list_filters_sorts_and_counts(make_user, client_for, make_order):
    sam = await make_user("user")
    client = await client_for(sam)
    await make_order(sam, "Leaking tap in the kitchen", priority="low")
    await make_order(sam, "Projector broken", priority="urgent")
    await make_order(sam, "Kitchen light out", priority="high")

    everything = (await client.get("/api/v1/work-orders")).json()
    assert [o["title"] for o in everything["items"]] == [
        "Kitchen light out",
        "Projector broken",
        "Leaking tap in the kitchen",
    ]
    assert everything["total"] == 3 and everything["totalExact"] is True

    by_priority = (await client.get("/api/v1/work-orders", params={"sort": "-priority"})).json()
    assert [o["priority"] for o in by_priority["items"]] == ["urgent", "high", "low"]

    urgent = (await client.get("/api/v1/work-orders", params={"priority": "urgent"})).json()
    assert [o["title"] for o in urgent["items"]] == ["Projector broken"] and urgent["total"] == 1

    page = (await client.get("/api/v1/work-orders", params={"limit": 2, "offset": 2})).json()
    assert [o["title"] for o in page["items"]] == ["Leaking tap in the kitchen"]
    assert (page["total"], page["offset"], page["limit"]) == (3, 2, 2)


async def test_search_matches_whole_words_in_title_and_description_ignoring_case(make_user, client_for, make_order):
    sam = await make_user("user")
    client = await client_for(sam)
    await make_order(sam, "Leaking tap", description="Water everywhere in the KITCHEN")
    await make_order(sam, "Kitchen light out")
    await make_order(sam, "Projector broken", description="meeting room")

    kitchen = (await client.get("/api/v1/work-orders", params={"q": "kitchen"})).json()
    assert sorted(o["title"] for o in kitchen["items"]) == ["Kitchen light out", "Leaking tap"]
    assert kitchen["total"] == 2

    both = (await client.get("/api/v1/work-orders", params={"q": "Water kitchen"})).json()
    assert [o["title"] for o in both["items"]] == ["Leaking tap"]

    nothing = (await client.get("/api/v1/work-orders", params={"q": "!!!"})).json()
    assert nothing["items"] == [] and nothing["total"] == 0


async def test_totals_follow_every_change(make_user, client_for, make_order):
    sam = await make_user("user")
    client = await client_for(sam)
    first = await make_order(sam, "One")
    await make_order(sam, "Two")

    await client.patch(f"/api/v1/work-orders/{first.id}", json={"version": 1, "status": "done"})
    done = (await client.get("/api/v1/work-orders", params={"status": "done"})).json()
    pending = (await client.get("/api/v1/work-orders", params={"status": "pending"})).json()
    assert (done["total"], pending["total"]) == (1, 1)

    await client.delete(f"/api/v1/work-orders/{first.id}", params={"version": 2})
    done = (await client.get("/api/v1/work-orders", params={"status": "done"})).json()
    assert done["total"] == 0
    assert (await client.get("/api/v1/work-orders")).json()["total"] == 1


async def test_admin_creates_for_someone_else_and_reassigns(make_user, client_for):
    admin, sam, priya = await make_user("admin"), await make_user("user"), await make_user("user")
    client = await client_for(admin)

    created = await client.post("/api/v1/work-orders", json={"title": "Badge reader", "ownerId": sam["id"]})
    assert created.status_code == 201 and created.json()["ownerId"] == sam["id"]

    moved = await client.patch(
        f"/api/v1/work-orders/{created.json()['id']}", json={"version": 1, "ownerId": priya["id"]}
    )
    assert moved.status_code == 200 and moved.json()["ownerId"] == priya["id"]
    priya_list = (await (await client_for(priya)).get("/api/v1/work-orders")).json()
    assert [o["title"] for o in priya_list["items"]] == ["Badge reader"]

    nobody = await client.post("/api/v1/work-orders", json={"title": "x", "ownerId": "5f0000000000000000000000"})
    # a well-formed id that names nobody: the request is valid, the owner is not there
    assert nobody.status_code == 404 and nobody.json()["error"]["details"]["fields"][0]["field"] == "ownerId"


async def test_search_follows_edits_and_deletes(make_user, client_for, make_order):
    sam = await make_user("user")
    client = await client_for(sam)
    order = await make_order(sam, "Leaking tap", description="in the kitchen")

    await client.patch(f"/api/v1/work-orders/{order.id}", json={"version": 1, "title": "Dripping faucet"})
    old = (await client.get("/api/v1/work-orders", params={"q": "leaking"})).json()
    new = (await client.get("/api/v1/work-orders", params={"q": "faucet kitchen"})).json()
    assert (old["total"], new["total"]) == (0, 1)

    await client.delete(f"/api/v1/work-orders/{order.id}", params={"version": 2})
    assert (await client.get("/api/v1/work-orders", params={"q": "faucet"})).json()["total"] == 0


async def test_a_delete_without_its_version_is_told_it_goes_in_the_query(make_user, client_for, make_order):
    # found by an API client: "version: required" sent them to put it in a JSON body, which a DELETE has none of
    sam = await make_user("user")
    order = await make_order(sam, "Blocked sink")

    refused = await (await client_for(sam)).delete(f"/api/v1/work-orders/{order.id}")

    assert refused.status_code == 400
    error = refused.json()["error"]
    assert error["message"] == "The request is not valid: version: required, in the query string (?version=...)."
    assert error["details"]["fields"] == [
        {"field": "version", "message": "required, in the query string (?version=...)", "type": "missing"}
    ]
