"""Search as people type: the last word as a prefix, punctuation and accents folded, every word must match."""

from datetime import UTC, datetime

from bson import ObjectId

from desk.work_orders import search


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
