"""Retention (docs/triage.md): suggestions a year, finished outbox events 30 days (dead letters 90), spend 400 days.

TTL indexes do the deleting, on MongoDB and on the embedded engine alike. The embedded engine purges when a
collection is read, at most once a minute per collection (desk/db/embedded/patches/ttl.py); so the test
builds the desk's history on a database of its own, starts that database again (a fresh server purges at
its first read) and reads what is left, as anyone would next.
"""

from datetime import timedelta
from pathlib import Path

from bson import ObjectId
from pymongo import AsyncMongoClient

from desk.agent.core import budget
from desk.app import ensure_indexes
from desk.db.embedded import EmbeddedMongo
from desk.jobs import queue
from desk.schema import now

TASK = "work_order.created"
LEASE = timedelta(seconds=10)


async def test_finished_events_old_suggestions_and_old_spend_are_deleted_and_nothing_else(tmp_path: Path):
    moment = now()
    database = EmbeddedMongo(tmp_path / "mongo")
    uri = database.start()
    try:
        async with AsyncMongoClient(uri, tz_aware=True) as client:
            db = client["desk_retention"]
            await ensure_indexes(db)
            events = await _history_of_events(db, moment)
            await db["triage_suggestions"].insert_many(
                [
                    {"_id": "last year", "workOrderId": ObjectId(), "createdAt": moment - timedelta(days=366)},
                    {"_id": "this year", "workOrderId": ObjectId(), "createdAt": moment - timedelta(days=364)},
                ]
            )
            await budget.charge(db, user_id=None, agent="triage", usd=0.01)  # today's, dated by the ledger
            today = await db["agent_spend"].find_one({"_id": budget.keys(user_id=None, agent="triage")[0]})
            await db["agent_spend"].insert_one({"_id": "global:2020-01-01", "day": "2020-01-01", "spentUsd": 1.0})
            await db["agent_spend"].update_one(
                {"_id": "global:2020-01-01"}, {"$set": {"expiresAt": moment - timedelta(days=1)}}
            )
        database.stop()
        database.start()  # same files; a fresh server purges at its first read of each collection
        async with AsyncMongoClient(uri, tz_aware=True) as client:
            db = client["desk_retention"]
            kept_events = {doc["payloadRef"] async for doc in db["outbox_events"].find()}
            kept_suggestions = {doc["_id"] async for doc in db["triage_suggestions"].find()}
            kept_spend = {doc["_id"] async for doc in db["agent_spend"].find()}
    finally:
        database.stop()

    assert kept_events == {events[name] for name in ("pending", "processing", "done lately", "failed lately")}
    assert kept_suggestions == {"this year"}
    assert today["expiresAt"].date() == moment.date() + timedelta(days=400)
    assert kept_spend == {today["_id"], budget.keys(user_id=None, agent="triage")[1]}


async def _history_of_events(db, moment) -> dict[str, ObjectId]:
    """Events in every state, some finished long ago: their keys by what happened to them."""
    keys = {
        name: ObjectId()
        for name in ("pending", "processing", "done long ago", "done lately", "skipped long ago", "failed lately")
    }
    long_ago, lately = moment - timedelta(days=31), moment - timedelta(days=29)
    await queue.enqueue(db, TASK, keys["skipped long ago"], skip="ai_disabled_for_owner", at=long_ago)
    for name, ended, status in (("done long ago", long_ago, "done"), ("done lately", lately, "done")):
        await queue.enqueue(db, TASK, keys[name], at=ended)
        job = await queue.take(db, TASK, keys[name], owner="w", lease=LEASE, at=ended)
        await queue.settle(db, job[1], status, at=ended)
    await queue.enqueue(db, TASK, keys["failed lately"], at=moment - timedelta(days=89))
    held = await queue.take(db, TASK, keys["failed lately"], owner="w", lease=LEASE, at=moment - timedelta(days=89))
    await queue.settle(db, held[1], "failed", error="invalid_output", at=moment - timedelta(days=89))
    await queue.enqueue(db, TASK, keys["pending"], at=moment - timedelta(days=400))
    await queue.enqueue(db, TASK, keys["processing"], at=moment - timedelta(days=400))
    await queue.take(db, TASK, keys["processing"], owner="w", lease=LEASE, at=moment - timedelta(days=400))
    return keys
