"""Sorting by title the way a person reads it: letters first, then case and accents ignored."""

import pytest
from bson import ObjectId

from desk.app import ensure_indexes

ORDERS = "/api/v1/work-orders"
TITLES = ["PUMP broken", "Zebra pump", "apple pump", "Éclair oven", "banana printer", "eclair fryer", "Ångström lab"]
A_TO_Z = ["Ångström lab", "apple pump", "banana printer", "eclair fryer", "Éclair oven", "PUMP broken", "Zebra pump"]


async def titles(client, **params) -> list[str]:
    response = await client.get(ORDERS, params=params)
    assert response.status_code == 200
    return [order["title"] for order in response.json()["items"]]


@pytest.mark.parametrize("role", ["user", "admin"])
async def test_title_sort_ignores_case_and_accents(role, make_user, client_for, make_order):
    person = await make_user(role)
    for title in TITLES:
        await make_order(person, title)
    client = await client_for(person)

    assert await titles(client, sort="title") == A_TO_Z
    assert await titles(client, sort="-title") == A_TO_Z[::-1]
    assert await titles(client, sort="title", q="pump") == ["apple pump", "PUMP broken", "Zebra pump"]
    assert await titles(client, sort="title", limit=2, offset=2) == ["banana printer", "eclair fryer"]


async def test_same_titles_in_other_case_keep_the_order_they_were_created_in(make_user, client_for, make_order):
    sam = await make_user("user")
    for title in ["door lock", "Door lock", "DOOR LOCK", "Door lock"]:
        await make_order(sam, title)
    client = await client_for(sam)

    assert await titles(client, sort="title") == ["door lock", "Door lock", "DOOR LOCK", "Door lock"]
    assert await titles(client, sort="-title") == ["Door lock", "DOOR LOCK", "Door lock", "door lock"]


async def test_a_renamed_order_moves_to_its_new_place(make_user, client_for, make_order):
    sam = await make_user("user")
    client = await client_for(sam)
    await make_order(sam, "banana printer")
    order = await make_order(sam, "Zebra pump")

    await client.patch(f"{ORDERS}/{order.id}", json={"version": 1, "title": "ábaco repair"})

    assert await titles(client, sort="title") == ["ábaco repair", "banana printer"]
    assert await titles(client, sort="title", q="repair") == ["ábaco repair"]


async def test_orders_stored_before_the_sort_key_are_sorted_after_a_restart(make_user, client_for, make_order, db):
    sam = await make_user("user")
    made = [await make_order(sam, title) for title in TITLES]
    # As a desk that stored these before the sort key existed has them: no key on orders or postings.
    ids = [ObjectId(order.id) for order in made]
    await db["work_orders"].update_many({"_id": {"$in": ids}}, {"$unset": {"titleKey": ""}})
    await db["search_postings"].update_many({"orderId": {"$in": ids}}, {"$unset": {"titleKey": ""}})

    await ensure_indexes(db)
    await ensure_indexes(db)  # a second start finds nothing left to do

    client = await client_for(sam)
    assert await titles(client, sort="title") == A_TO_Z
    assert await titles(client, sort="title", q="pump") == ["apple pump", "PUMP broken", "Zebra pump"]
    assert await db["work_orders"].count_documents({"titleKey": {"$exists": False}}) == 0
