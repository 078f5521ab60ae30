"""Triage suggestions, the daily action counter and the reconcile watermark; the only code touching them.

A suggestion is unique per (order, run), and per outbox event: two workers that both got as far as
storing one for the same event (one of them paused past its lease) cannot both store it.
"""

from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from bson import ObjectId
from pymongo import ASCENDING, DESCENDING, ReturnDocument
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import DuplicateKeyError

from desk.schema import now
from desk.work_orders import changes

Doc = dict[str, Any]
KEEP_COUNTERS = timedelta(days=3)
KEEP_SUGGESTIONS = timedelta(days=365)  # then deleted by a TTL index on createdAt (docs/triage.md, Retention)
# The change-feed kind of a suggestion stored or decided: no owner's list changes, the order's page and the
# attention list do (owners left empty, so people's own lists do not reload for it).
TRIAGED = "triaged"


def _suggestions(db: AsyncDatabase):
    return db["triage_suggestions"]


async def ensure_indexes(db: AsyncDatabase) -> None:
    found = _suggestions(db)
    await found.create_index([("workOrderId", ASCENDING), ("runId", ASCENDING)], unique=True, name="order_run")
    await found.create_index([("workOrderId", ASCENDING), ("createdAt", DESCENDING)], name="order_created")
    await found.create_index(
        [("eventId", ASCENDING)], unique=True, partialFilterExpression={"eventId": {"$type": "objectId"}}, name="event"
    )
    await found.create_index([("flagged", ASCENDING), ("createdAt", DESCENDING)], name="flagged")
    await found.create_index([("decidedDay", ASCENDING)], name="decided_day")
    await found.create_index(
        [("createdAt", ASCENDING)], expireAfterSeconds=int(KEEP_SUGGESTIONS.total_seconds()), name="ttl"
    )
    await db["agent_actions"].create_index([("expiresAt", ASCENDING)], expireAfterSeconds=0, name="ttl")


async def insert(db: AsyncDatabase, suggestion: Doc) -> Doc | None:
    """Store a suggestion; None when its event (or its order and run) already has one."""
    doc = {"_id": ObjectId(), **suggestion, "createdAt": now()}
    try:
        await _suggestions(db).insert_one(doc)
    except DuplicateKeyError:
        return None
    await changes.record(db, doc["workOrderId"], TRIAGED, set())  # open pages show it within the feed's poll
    return doc


async def get(db: AsyncDatabase, suggestion_id: ObjectId) -> Doc | None:
    return await _suggestions(db).find_one({"_id": suggestion_id})


async def for_order(db: AsyncDatabase, order_id: ObjectId, *, limit: int = 20) -> list[Doc]:
    cursor = _suggestions(db).find({"workOrderId": order_id}).sort([("createdAt", DESCENDING), ("_id", DESCENDING)])
    return await cursor.limit(limit).to_list()


async def unsettled(db: AsyncDatabase, event_id: ObjectId) -> Doc | None:
    """The event's suggestion if its pass ended before deciding on the apply (no note, not applied, undecided)."""
    open_ = {"eventId": event_id, "applied": False, "appliedNote": None, "decision": None}
    return await _suggestions(db).find_one(open_)


async def triaged(db: AsyncDatabase, order_ids: list[ObjectId]) -> set[ObjectId]:
    """Which of these orders have a suggestion."""
    found = _suggestions(db).find({"workOrderId": {"$in": order_ids}}, {"workOrderId": 1})
    return {doc["workOrderId"] async for doc in found}


async def mark(db: AsyncDatabase, suggestion_id: ObjectId, fields: Doc, *, only_if: Doc | None = None) -> Doc | None:
    """Set `fields` on a suggestion that still matches `only_if`; the suggestion after, or None."""
    after = await _suggestions(db).find_one_and_update(
        {"_id": suggestion_id, **(only_if or {})}, {"$set": fields}, return_document=ReturnDocument.AFTER
    )
    if after is not None:
        await changes.record(db, after["workOrderId"], TRIAGED, set())
    return after


async def flagged_page(db: AsyncDatabase, *, offset: int, limit: int) -> list[Doc]:
    """Flagged, undecided suggestions, newest first (the caller drops those of closed orders)."""
    cursor = (
        _suggestions(db)
        .find({"flagged": True, "decision": None})
        .sort([("createdAt", DESCENDING), ("_id", DESCENDING)])
    )
    return await cursor.skip(offset).limit(limit).to_list()


async def created_since(db: AsyncDatabase, start: datetime, *, limit: int = 50_000) -> list[datetime]:
    """When each suggestion from `start` on was made (at most `limit`): suggestions per day, counted by the caller."""
    found = _suggestions(db).find({"createdAt": {"$gte": start}}, {"createdAt": 1}).limit(limit)
    return [doc["createdAt"] async for doc in found]


async def decisions_since(db: AsyncDatabase, day: str) -> list[Doc]:
    """Decided suggestions from `day` (ISO) on: the acceptance rate per day (computed by the caller)."""
    cursor = _suggestions(db).find({"decidedDay": {"$gte": day}}, {"decision": 1, "decidedDay": 1})
    return await cursor.to_list(5000)


async def take_action(db: AsyncDatabase, *, agent: str, cap: int, zone: str = "UTC") -> bool:
    """Count one automatic change against today's cap, today in `zone` (the policy's); False (and nothing counted)
    once the cap is reached."""
    moment = now()
    key = f"{agent}:{moment.astimezone(ZoneInfo(zone)).date().isoformat()}"
    counted = await db["agent_actions"].find_one_and_update(
        {"_id": key},
        {"$inc": {"n": 1}, "$set": {"expiresAt": moment + KEEP_COUNTERS}},
        upsert=True,
        return_document=ReturnDocument.AFTER,
    )
    if counted["n"] <= cap:
        return True
    await db["agent_actions"].update_one({"_id": key}, {"$inc": {"n": -1}})
    return False


async def reconciled_until(db: AsyncDatabase) -> Doc | None:
    """Where the reconcile pass stopped: `{createdAt, orderId}` of the last order it checked, or None."""
    return await db["outbox_state"].find_one({"_id": "reconciled"})


async def mark_reconciled(db: AsyncDatabase, created_at: datetime, order_id: ObjectId) -> None:
    update = {"$set": {"createdAt": created_at, "orderId": order_id}}
    await db["outbox_state"].update_one({"_id": "reconciled"}, update, upsert=True)


async def outcomes_since(db: AsyncDatabase, start: datetime, *, limit: int = 50_000) -> list[Doc]:
    """Suggestions made from `start` on, with what became of them (decided, applied, overtaken): the acceptance
    rate by week, counted by the caller."""
    fields = {"createdAt": 1, "decision": 1, "applied": 1, "appliedNote": 1, "workOrderId": 1}
    fields |= {"suggestedPriority": 1, "priorityBefore": 1}
    return await _suggestions(db).find({"createdAt": {"$gte": start}}, fields).limit(limit).to_list()
