"""How much work the embedded engine does for the queries the desk runs, with the launcher's patches.

Which index SQLite walks cannot be seen over the wire, so these tests apply the launcher's patches
(`patch_engine`, exactly what the server child runs) to neosqlite in this process and count the
SQLite virtual-machine steps each call takes: a query that uses its index costs a few steps per
matching entry, one that walks every candidate costs steps for each of them. Steps are counted,
not timed, so the tests are deterministic. What the queries answer is pinned over the wire by
test_conformance.py.
"""

import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import neosqlite
import pytest
from neosqlite.objectid import ObjectId

from desk.db.embedded import TTL_MONITOR_SECONDS, patch_engine

OWNERS = 20
ORDERS = 2000  # each holds "the"; "kitchen" is in one in ten
START = datetime(2026, 1, 1, tzinfo=UTC)
COUNT = {"$group": {"_id": 1, "n": {"$sum": 1}}}  # how pymongo's count_documents ends its pipeline


@pytest.fixture
def engine() -> Iterator[neosqlite.Connection]:
    patch_engine()
    connection = neosqlite.Connection(":memory:")
    yield connection
    connection.close()


@pytest.fixture
def postings(engine: neosqlite.Connection) -> tuple[Any, list[ObjectId]]:
    """Search postings as desk/work_orders/search.py stores and indexes them."""
    owners = [ObjectId() for _ in range(OWNERS)]
    coll = engine["postings"]
    coll.create_index([("term", 1), ("createdAt", -1)])
    coll.create_index([("term", 1), ("ownerId", 1), ("createdAt", -1)])
    coll.create_index([("term", 1), ("handedBy", 1), ("createdAt", -1)])
    coll.insert_many(
        [
            {
                "_id": f"{i}:{term}",
                "term": term,
                "ownerId": owners[i % OWNERS],
                "requesterId": owners[(i + 1) % OWNERS],  # everyone asks their neighbour, who works on it
                "handedBy": owners[(i + 1) % OWNERS],
                "createdAt": START + timedelta(hours=i),
            }
            for i in range(ORDERS)
            for term in (["the", "kitchen"] if i % 10 == 0 else ["the"])
        ]
    )
    return coll, owners


def steps(engine: neosqlite.Connection, call: Callable[[], Any]) -> tuple[Any, int]:
    """What `call` returns and how many SQLite VM steps (in hundreds) it took."""
    counted = 0

    def tick() -> int:
        nonlocal counted
        counted += 1
        return 0  # 0: carry on

    engine.db.set_progress_handler(tick, 100)
    try:
        return call(), counted
    finally:
        engine.db.set_progress_handler(None, 0)


def test_an_equality_on_the_second_key_of_an_index_narrows_the_search(engine, postings) -> None:
    coll, owners = postings
    mine = {"term": "the", "ownerId": owners[3]}  # 100 of the 2,000 postings of "the"

    every, walk_all = steps(engine, lambda: coll.count_documents({"term": "the"}))
    page, page_cost = steps(engine, lambda: list(coll.find(mine).sort([("createdAt", -1)]).limit(25)))
    count, count_cost = steps(engine, lambda: coll.count_documents(mine))
    moved, update_cost = steps(engine, lambda: coll.update_many(mine, {"$set": {"status": "done"}}).modified_count)

    assert (every, len(page), count, moved) == (ORDERS, 25, ORDERS // OWNERS, ORDERS // OWNERS)
    assert page[0]["createdAt"] == START + timedelta(hours=ORDERS - OWNERS + 3)
    # The owner's 100 entries, not the word's 2,000: without the patch each costs about as much as walk_all.
    assert page_cost < walk_all / 5
    assert count_cost < walk_all / 5
    assert update_cost < walk_all * 1.5  # it also rewrites 100 documents, and their entries in three indexes


def test_each_part_of_what_a_person_sees_is_an_index_range(engine, postings) -> None:
    """A person's search walks and counts what they asked of others apart from the rest (search.py), on the
    `handedBy` index: one filter with an `$or` would read every posting of the word."""
    coll, owners = postings
    me = owners[4]
    asked = {"term": "the", "handedBy": me}  # 100 of the 2,000

    either = {"$and": [{"term": "the"}, {"$or": [{"ownerId": me}, {"ownerId": None}, {"requesterId": me}]}]}
    seen, walk_all = steps(engine, lambda: coll.count_documents(either))
    page, page_cost = steps(engine, lambda: list(coll.find(asked).sort([("createdAt", -1)]).limit(25)))
    count, count_cost = steps(engine, lambda: coll.count_documents(asked))

    assert (seen, len(page), count) == (2 * ORDERS // OWNERS, 25, ORDERS // OWNERS)
    assert {doc["requesterId"] for doc in page} == {me} and me not in {doc["ownerId"] for doc in page}
    assert page_cost < walk_all / 5
    assert count_cost < walk_all / 5


def test_a_capped_count_stops_at_the_cap(engine, postings) -> None:
    coll, owners = postings

    everything, walk_all = steps(engine, lambda: coll.count_documents({"term": "the"}))
    capped, capped_cost = steps(
        engine, lambda: list(coll.aggregate([{"$match": {"term": "the"}}, {"$limit": 101}, COUNT]))
    )
    skipped = list(coll.aggregate([{"$match": {"term": "kitchen"}}, {"$skip": 150}, {"$limit": 101}, COUNT]))
    mine = list(coll.aggregate([{"$match": {"term": "the", "ownerId": owners[0]}}, {"$limit": 1001}, COUNT]))

    assert everything == ORDERS
    assert (capped, skipped, mine) == ([{"_id": 1, "n": 101}], [{"_id": 1, "n": 50}], [{"_id": 1, "n": 100}])
    assert capped_cost < walk_all / 5


def test_a_join_by_id_reads_only_the_joined_document(engine) -> None:
    users = engine["users"]
    users.insert_many([{"_id": ObjectId(), "name": f"user {i}"} for i in range(ORDERS)])
    sam = users.find_one({"name": "user 7"})
    engine["sessions"].insert_one({"_id": "hash", "userId": sam["_id"]})
    lookup = {"from": "users", "localField": "userId", "foreignField": "_id", "as": "user"}

    joined, join_cost = steps(
        engine,
        lambda: list(engine["sessions"].aggregate([{"$match": {"_id": "hash"}}, {"$limit": 1}, {"$lookup": lookup}])),
    )
    _, one_user = steps(engine, lambda: users.find_one({"_id": sam["_id"]}))
    _, all_users = steps(engine, lambda: list(users.find({})))

    assert joined == [{"_id": "hash", "userId": sam["_id"], "user": [sam]}]
    assert join_cost < 10 * one_user < all_users


def test_the_ttl_purge_searches_its_index_and_runs_once_a_minute(engine, monkeypatch) -> None:
    changes = engine["changes"]
    changes.create_index([("seq", 1)], unique=True)
    changes.create_index([("at", 1)], expireAfterSeconds=3600)
    now = datetime.now(UTC)
    changes.insert_many([{"seq": i, "at": now - timedelta(minutes=30)} for i in range(ORDERS)])
    changes.insert_many([{"seq": -1, "at": now - timedelta(hours=2)}, {"seq": -2, "at": 5}, {"seq": -3, "at": "old"}])
    plain = engine["plain"]
    plain.create_index([("seq", 1)], unique=True)
    plain.insert_many([{"seq": i} for i in range(ORDERS)])

    found, purge_and_read = steps(engine, lambda: changes.find_one({"seq": 5}))
    _, read_only = steps(engine, lambda: plain.find_one({"seq": 5}))

    assert found is not None
    assert purge_and_read < 5 * read_only + 10  # the purge is a seek, not a walk over 2,000 entries
    # Like MongoDB, only dates expire: the number and the string stay.
    assert sorted(doc["seq"] for doc in changes.find({"seq": {"$lt": 0}})) == [-3, -2]

    changes.insert_one({"seq": -4, "at": now - timedelta(hours=2)})
    assert changes.find_one({"seq": -4}) is not None  # purged at most once a minute, as MongoDB's monitor does
    a_minute_later = time.monotonic() + TTL_MONITOR_SECONDS
    monkeypatch.setattr(time, "monotonic", lambda: a_minute_later)
    assert changes.find_one({"seq": -4}) is None


@pytest.fixture
def orders(engine: neosqlite.Connection) -> Any:
    """Work orders as the list page reads them: newest first, on a createdAt index."""
    coll = engine["orders"]
    coll.create_index([("createdAt", -1)])
    coll.insert_many([{"_id": ObjectId(), "n": i, "createdAt": START + timedelta(hours=i)} for i in range(ORDERS)])
    return coll


def test_a_page_of_a_date_range_reads_only_that_page(engine, orders) -> None:
    since = {"createdAt": {"$gte": START + timedelta(hours=100)}}  # all but 100 of the orders

    _, read_all = steps(engine, lambda: list(orders.find({})))
    page, page_cost = steps(engine, lambda: list(orders.find(since).sort([("createdAt", -1)]).limit(25)))

    assert [doc["n"] for doc in page] == list(range(ORDERS - 1, ORDERS - 26, -1))
    # Sorted and limited in SQL on the index, not every match read and sorted in Python.
    assert page_cost < read_all / 5


def test_comparing_id_with_an_object_id_seeks_instead_of_scanning(engine, orders) -> None:
    ids = [doc["_id"] for doc in orders.find({}).sort([("_id", 1)])]  # ObjectIds made in one process ascend

    _, read_all = steps(engine, lambda: list(orders.find({})))
    newest, count_cost = steps(engine, lambda: orders.count_documents({"_id": {"$gt": ids[-11]}}))
    oldest, update_cost = steps(engine, lambda: orders.update_many({"_id": {"$lt": ids[10]}}, {"$set": {"seen": 1}}))

    assert (newest, oldest.modified_count) == (10, 10)
    assert orders.count_documents({"seen": 1}) == 10
    # A range on the _id column, not every document read and compared in Python.
    assert count_cost < read_all / 5
    assert update_cost < read_all / 5


def test_the_collection_names_follow_every_change_to_the_schema(tmp_path) -> None:
    patch_engine()
    ours, another = neosqlite.Connection(tmp_path / "desk.db"), neosqlite.Connection(tmp_path / "desk.db")
    try:
        for n in range(24):  # as many collections as the desk has
            ours[f"c{n}"].insert_one({"n": n})
        listed, first_cost = steps(ours, ours.list_collection_names)
        again, unchanged_cost = steps(ours, ours.list_collection_names)
        another["added"].insert_one({"n": 1})  # another connection changes the schema
        with_added = ours.list_collection_names()
        another.drop_collection("c0")
        without_c0 = ours.list_collection_names()
        with_added.append("not a collection")  # a caller's list is its own
    finally:
        ours.close()
        another.close()

    assert sorted(listed) == sorted(again) == sorted(f"c{n}" for n in range(24))
    assert sorted(with_added) == sorted([*listed, "added", "not a collection"])
    assert sorted(without_c0) == sorted([*(name for name in listed if name != "c0"), "added"])
    # Unchanged, the schema is not read again: one look at its version number.
    assert unchanged_cost * 5 < first_cost


def test_an_update_leaves_the_document_it_read_untouched(engine) -> None:
    orders = engine["orders"]
    orders.insert_one({"_id": 1, "tags": ["a"], "counts": {"a": 1}, "at": START})
    plain = {"$push": {"tags": "b"}}  # neosqlite's own update
    dotted = {"$inc": {"counts.a": 1}}  # python_updates' path, on its parent sub-document

    before_plain = orders.find_one_and_update({"_id": 1}, plain)
    before_dotted = orders.find_one_and_update({"_id": 1}, dotted)

    # As it was, as MongoDB answers by default
    assert before_plain == {"_id": 1, "tags": ["a"], "counts": {"a": 1}, "at": START}
    assert before_dotted == {"_id": 1, "tags": ["a", "b"], "counts": {"a": 1}, "at": START}
    assert orders.find_one({"_id": 1}) == {"_id": 1, "tags": ["a", "b"], "counts": {"a": 2}, "at": START}
