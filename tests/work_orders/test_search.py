"""Search as people type: the last word as a prefix, punctuation and accents folded, every word must match."""

from datetime import UTC, datetime

from bson import ObjectId

from desk.work_orders import search, service
from desk.work_orders.models import WorkOrderUpdate
from tests.helpers import actor


async def _titles(client, q: str, **params) -> list[str]:
    response = await client.get("/api/v1/work-orders", params={"q": q, **params})
    assert response.status_code == 200, response.text
    return sorted(order["title"] for order in response.json()["items"])


async def test_the_last_word_matches_as_a_prefix_of_any_length(make_user, client_for, make_order):
    sam = await make_user("user")
    client = await client_for(sam)
    await make_order(sam, "Leaking tap in the kitchen")
    await make_order(sam, "Kitchenette fridge")
    await make_order(sam, "Projector broken", description="in meeting room B")

    for typed in ("k", "ki", "kit", "kitc", "kitch", "KITCHEN"):
        assert await _titles(client, typed) == ["Kitchenette fridge", "Leaking tap in the kitchen"], typed
    assert await _titles(client, "kitchenettes") == []
    assert await _titles(client, "proj") == ["Projector broken"]


async def test_several_words_must_all_match_and_only_the_last_is_a_prefix(make_user, client_for, make_order):
    sam = await make_user("user")
    client = await client_for(sam)
    await make_order(sam, "Leaking tap in the kitchen")
    await make_order(sam, "Leaking roof", description="over the kitchenette")
    await make_order(sam, "Kitchen light out")

    assert await _titles(client, "leaking kit") == ["Leaking roof", "Leaking tap in the kitchen"]
    assert await _titles(client, "leaking kitchenet") == ["Leaking roof"]
    assert await _titles(client, "kit leaking") == []  # "kit" is not a word of any
    assert await _titles(client, "leak kitchen") == []  # a word before the last is whole


async def test_punctuation_inside_words_and_accents_are_folded(make_user, client_for, make_order):
    sam = await make_user("user")
    client = await client_for(sam)
    await make_order(sam, "Wi-Fi drops in the lobby")
    await make_order(sam, "Café machine", description="O'Neil's espresso")

    assert await _titles(client, "wifi") == ["Wi-Fi drops in the lobby"]
    assert await _titles(client, "wi-fi") == ["Wi-Fi drops in the lobby"]
    assert await _titles(client, "fi") == ["Wi-Fi drops in the lobby"]  # its parts are words too
    assert await _titles(client, "cafe") == ["Café machine"]
    assert await _titles(client, "oneils") == ["Café machine"]


async def test_a_prefix_search_counts_and_pages_like_a_list(make_user, client_for, make_order):
    sam = await make_user("user")
    client = await client_for(sam)
    for n in range(5):
        await make_order(sam, f"Radiator {n} cold")
    await make_order(sam, "Roof")

    page = (await client.get("/api/v1/work-orders", params={"q": "rad", "limit": 2, "offset": 2})).json()
    assert page["total"] == 5 and [o["title"] for o in page["items"]] == ["Radiator 2 cold", "Radiator 1 cold"]
    page = (await client.get("/api/v1/work-orders", params={"q": "radi", "limit": 2, "offset": 2})).json()
    assert page["total"] == 5 and [o["title"] for o in page["items"]] == ["Radiator 2 cold", "Radiator 1 cold"]


async def test_postings_of_an_older_desk_are_rebuilt_once_at_start_up(db):
    moment = datetime.now(UTC)
    order = {"_id": ObjectId(), "title": "Wi-Fi in the kitchen", "description": "", "ownerId": ObjectId()}
    order |= {"status": "pending", "priority": "low", "priorityRank": 0, "titleKey": "wi-fi in the kitchen"}
    await db["work_orders"].insert_one(order | {"createdAt": moment, "updatedAt": moment})
    await db["search_postings"].insert_one({"_id": f"{order['_id']}:kitchen", "term": "kitchen"})  # the old format
    await db["search_meta"].delete_many({})

    await search.ensure_indexes(db)

    for q in ("kit", "wifi", "kitchen"):
        ids, total, _ = await search.search(db, q, {}, [("createdAt", -1)], offset=0, limit=25)
        assert (ids, total) == ([order["_id"]], 1), q
    assert (await db["search_meta"].find_one({"_id": "format"}))["v"] == search.FORMAT


async def test_a_person_searches_exactly_what_they_see(make_user, client_for, make_order, db):
    """The queue, what they work on and what they asked others for: each searched on its own, counted exactly."""
    sam, kim, admin = await make_user(name="Sam"), await make_user(name="Kim"), await make_user("admin")
    await make_order(sam, "Boiler Sam asked and works on")
    await make_order(sam, "Boiler Sam asked for the queue", ownerId=None)
    for asker, worker in ((sam, kim), (kim, sam)):
        order = await make_order(asker, f"Boiler {asker['name']} asked, {worker['name']} works on", ownerId=None)
        handed = WorkOrderUpdate(version=1, ownerId=worker["id"])
        await service.update(db=db, actor=actor(admin), order_id=order.id, data=handed)
    await make_order(kim, "Boiler in the queue", ownerId=None)
    await make_order(kim, "Boiler of Kim's own")
    client = await client_for(sam)

    seen = [
        "Boiler Kim asked, Sam works on",
        "Boiler Sam asked and works on",
        "Boiler Sam asked for the queue",
        "Boiler Sam asked, Kim works on",
        "Boiler in the queue",
    ]
    for typed in ("boiler", "boi", "boile", "b"):
        page = (await client.get("/api/v1/work-orders", params={"q": typed})).json()
        assert sorted(o["title"] for o in page["items"]) == seen, typed
        assert (page["total"], page["totalExact"]) == (5, True), typed
    every = (await (await client_for(admin)).get("/api/v1/work-orders", params={"q": "boile"})).json()
    assert every["total"] == 6


async def test_a_prefix_several_words_begin_merges_them_in_order_and_counts_each_order_once(
    make_user, client_for, make_order
):
    sam = await make_user("user")
    client = await client_for(sam)
    for title in ("Kitchen tap", "Kitchens painted", "Kitchen and kitchens", "Kitchenette fridge", "Roof"):
        await make_order(sam, title)

    pages = [
        (await client.get("/api/v1/work-orders", params={"q": "kitch", "limit": 2, "offset": n})).json() for n in (0, 2)
    ]
    assert [[o["title"] for o in page["items"]] for page in pages] == [
        ["Kitchenette fridge", "Kitchen and kitchens"],  # newest first, across the three words
        ["Kitchens painted", "Kitchen tap"],
    ]
    assert [(page["total"], page["totalExact"]) for page in pages] == [(4, True), (4, True)]

    more = ("Kitchenware shelf", "Kitchener visit", "Kitchenless flat")  # more words than are walked one by one
    for title in more:
        await make_order(sam, title)
    page = (await client.get("/api/v1/work-orders", params={"q": "kitche"})).json()
    assert (page["total"], page["totalExact"]) == (7, True)
    assert [o["title"] for o in page["items"]][:3] == list(reversed(more))
