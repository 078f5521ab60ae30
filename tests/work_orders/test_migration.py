"""Start-up on a desk from before requesters (every order gets its owner as requester) and before `handedBy` (an
order someone else works on is marked with its requester, postings too): once, whoever starts."""

import asyncio

from bson import ObjectId

from desk.app import ensure_indexes
from desk.schema import now
from desk.work_orders import counters, search


async def _orders_in_todays_shape(db, owners: list[dict], count: int) -> list[ObjectId]:
    """Orders as the desk stored them before this change: an owner, no requester; postings and counters too."""
    await ensure_indexes(db)  # the desk as it last started (its other start-up work done)
    ids = []
    for n in range(count):
        moment = now()
        doc = {
            "title": f"Leaking tap {n}",
            "description": "Under the sink",
            "priority": "medium",
            "status": "pending",
            "ownerId": ObjectId(owners[n % len(owners)]["id"]),
            "version": 1,
            "createdAt": moment,
            "updatedAt": moment,
            "closedAt": None,
            "priorityRank": 1,
            "titleKey": f"leaking tap {n}",
        }
        doc["_id"] = (await db["work_orders"].insert_one(doc)).inserted_id
        await counters.apply(db, None, doc)
        await search.reindex(db, doc["_id"], None, doc)
        ids.append(doc["_id"])
    return ids


async def test_two_desks_starting_at_once_give_every_old_order_its_owner_as_requester(make_user, client_for, db):
    sam, priya = await make_user("user"), await make_user("user")
    ids = await _orders_in_todays_shape(db, [sam, priya], 7)
    assert await db["work_orders"].count_documents({"requesterId": {"$exists": True}}) == 0

    await asyncio.gather(ensure_indexes(db), ensure_indexes(db))  # two processes starting together
    await ensure_indexes(db)  # and a later start: nothing left to do

    for doc in await db["work_orders"].find({"_id": {"$in": ids}}).to_list():
        assert doc["requesterId"] == doc["ownerId"] and doc["version"] == 1
    client = await client_for(sam)
    listed = (await client.get("/api/v1/work-orders")).json()
    assert (listed["total"], len(listed["items"])) == (4, 4)
    assert {o["requesterId"] for o in listed["items"]} == {sam["id"]}
    found = (await client.get("/api/v1/work-orders", params={"q": "tap"})).json()
    assert found["total"] == 4
    asked = (await client.get("/api/v1/work-orders", params={"q": "tap", "requesterId": sam["id"]})).json()
    assert asked["total"] == 4  # their search postings know the requester too


async def test_an_old_order_reassigned_after_the_migration_stays_with_its_requester(make_user, client_for, db):
    sam, priya, admin = await make_user("user"), await make_user("user"), await make_user("admin")
    (order_id,) = await _orders_in_todays_shape(db, [sam], 1)
    await ensure_indexes(db)

    moved = await (await client_for(admin)).patch(
        f"/api/v1/work-orders/{order_id}", json={"version": 1, "ownerId": priya["id"]}
    )

    assert moved.status_code == 200 and moved.json()["requesterId"] == sam["id"]
    client = await client_for(sam)
    for params in ({}, {"q": "tap"}):  # the list and the search (postings) both still show it to Sam
        page = (await client.get("/api/v1/work-orders", params=params)).json()
        assert [o["id"] for o in page["items"]] == [str(order_id)] and page["total"] == 1


async def test_orders_handed_on_before_handed_by_existed_are_marked_once_and_found_by_their_requester(
    make_user, client_for, db
):
    sam, priya = await make_user("user"), await make_user("user")
    (handed, own) = await _orders_in_todays_shape(db, [priya, sam], 2)
    await db["work_orders"].update_many({}, {"$set": {"requesterId": ObjectId(sam["id"])}})  # Sam asked for both
    await db["work_orders"].update_many({}, {"$unset": {"handedBy": ""}})
    await db["search_postings"].update_many({}, {"$unset": {"handedBy": ""}})
    await db["search_meta"].delete_one({"_id": "handedBy"})  # as the desk was before the change

    await asyncio.gather(ensure_indexes(db), ensure_indexes(db))  # two processes starting together

    orders = {doc["_id"]: doc for doc in await db["work_orders"].find().to_list()}
    assert orders[handed].get("handedBy") == ObjectId(sam["id"]) and orders[own].get("handedBy") is None
    postings = await db["search_postings"].find({"orderId": handed}).to_list()
    assert postings and {p.get("handedBy") for p in postings} == {ObjectId(sam["id"])}
    found = (await (await client_for(sam)).get("/api/v1/work-orders", params={"q": "tap"})).json()
    assert (found["total"], {o["id"] for o in found["items"]}) == (2, {str(handed), str(own)})
