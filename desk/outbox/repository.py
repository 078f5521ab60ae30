"""The `outbox_events` collection; the only place that touches it.

An event moves pending -> processing (claimed, leased) -> done | skipped | failed, or back to
pending for a retry. Every claim bumps `fence`; every write that settles an event names the fence
it claimed with, so a worker that lost its lease (paused, partitioned) can no longer settle it.
"""

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from bson import ObjectId
from pymongo import ASCENDING, DESCENDING, ReturnDocument
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import DuplicateKeyError

from desk.outbox.models import WORK_ORDER_CREATED, EventStatus
from desk.schema import now
from desk.users import repository as users_repo

Doc = dict[str, Any]


def _events(db: AsyncDatabase):
    return db["outbox_events"]


async def ensure_indexes(db: AsyncDatabase) -> None:
    events = _events(db)
    # the idempotency key (AGT-1): a retried emission or a reconcile never makes a second event
    await events.create_index([("type", ASCENDING), ("payloadRef", ASCENDING)], unique=True, name="type_ref")
    await events.create_index([("status", ASCENDING), ("availableAt", ASCENDING)], name="status_available")
    await events.create_index([("status", ASCENDING), ("leasedUntil", ASCENDING)], name="status_lease")
    await events.create_index([("status", ASCENDING), ("updatedAt", DESCENDING)], name="status_updated")


async def emit_created(db: AsyncDatabase, order: Doc) -> bool:
    """The new order's event, `skipped` at once when its requester (whose words would go to the model) or
    its owner, if it has one, has AI turned off (SEC-8)."""
    people = {order.get("requesterId"), order.get("ownerId")} - {None}
    opted_out = False
    for person_id in people:
        person = await users_repo.get(db, person_id)
        opted_out = opted_out or (person is not None and not person.get("aiEnabled", True))
    return await emit(db, order["_id"], skip="ai_disabled_for_owner" if opted_out else None)


async def emit(db: AsyncDatabase, payload_ref: ObjectId, *, skip: str | None = None) -> bool:
    """Record that `payload_ref` was created; False when its event exists already.

    `skip` stores the event as `skipped` with that reason (an owner who turned AI off, SEC-8):
    it is kept, so the reconcile pass does not emit it again.
    """
    moment = now()
    event = {
        "type": WORK_ORDER_CREATED,
        "payloadRef": payload_ref,
        "status": "skipped" if skip else "pending",
        "attempts": 0,
        "fence": 0,
        "availableAt": moment,
        "leasedUntil": None,
        "leaseOwner": None,
        "lastError": skip,
        "createdAt": moment,
        "updatedAt": moment,
    }
    try:
        await _events(db).insert_one(event)
    except DuplicateKeyError:
        return False
    return True


async def claim(db: AsyncDatabase, *, owner: str, lease: timedelta) -> Doc | None:
    """Take the oldest due event (pending and available, or processing with a lapsed lease) in one atomic step."""
    moment = now()
    return await _events(db).find_one_and_update(
        {
            "$or": [
                {"status": "pending", "availableAt": {"$lte": moment}},
                {"status": "processing", "leasedUntil": {"$lt": moment}},
            ]
        },
        {
            "$set": {"status": "processing", "leasedUntil": moment + lease, "leaseOwner": owner, "updatedAt": moment},
            "$inc": {"attempts": 1, "fence": 1},
        },
        sort=[("availableAt", ASCENDING), ("_id", ASCENDING)],
        return_document=ReturnDocument.AFTER,
    )


def _fenced(event: Doc) -> Doc:
    return {"_id": event["_id"], "status": "processing", "fence": event["fence"]}


async def renew(db: AsyncDatabase, event: Doc, lease: timedelta) -> bool:
    """Extend our lease; False when the event is no longer ours (someone claimed it after our lease lapsed)."""
    result = await _events(db).update_one(_fenced(event), {"$set": {"leasedUntil": now() + lease}})
    return result.matched_count == 1


async def settle(db: AsyncDatabase, event: Doc, status: EventStatus, *, error: str | None = None) -> bool:
    """End the event as `status` (done, skipped, failed), only while we still hold it."""
    fields = {"status": status, "leasedUntil": None, "leaseOwner": None, "lastError": error, "updatedAt": now()}
    result = await _events(db).update_one(_fenced(event), {"$set": fields})
    return result.modified_count == 1


async def retry_at(db: AsyncDatabase, event: Doc, at: datetime, *, error: str) -> bool:
    """Back to pending until `at` after a failed attempt (the attempt stays counted)."""
    fields = {"status": "pending", "availableAt": at, "leasedUntil": None, "leaseOwner": None, "lastError": error}
    result = await _events(db).update_one(_fenced(event), {"$set": {**fields, "updatedAt": now()}})
    return result.modified_count == 1


async def put_back(db: AsyncDatabase, event: Doc) -> bool:
    """Back to pending at once, the attempt not counted: the event was not the problem (the switch went off)."""
    fields = {"status": "pending", "leasedUntil": None, "leaseOwner": None, "updatedAt": now()}
    result = await _events(db).update_one(_fenced(event), {"$set": fields, "$inc": {"attempts": -1}})
    return result.modified_count == 1


async def requeue(db: AsyncDatabase, event_id: ObjectId) -> Doc | None:
    """A failed event back to pending with its attempts reset (an admin's retry); None when it is not failed."""
    moment = now()
    return await _events(db).find_one_and_update(
        {"_id": event_id, "status": "failed"},
        {"$set": {"status": "pending", "attempts": 0, "availableAt": moment, "updatedAt": moment}},
        return_document=ReturnDocument.AFTER,
    )


async def get(db: AsyncDatabase, event_id: ObjectId) -> Doc | None:
    return await _events(db).find_one({"_id": event_id})


async def for_order(db: AsyncDatabase, order_id: ObjectId) -> Doc | None:
    return await _events(db).find_one({"type": WORK_ORDER_CREATED, "payloadRef": order_id})


async def emitted(db: AsyncDatabase, order_ids: Iterable[ObjectId]) -> set[ObjectId]:
    """Which of these orders have an event."""
    query = {"type": WORK_ORDER_CREATED, "payloadRef": {"$in": list(order_ids)}}
    return {doc["payloadRef"] async for doc in _events(db).find(query, {"payloadRef": 1})}


async def page(db: AsyncDatabase, *, status: EventStatus | None, offset: int, limit: int) -> tuple[list[Doc], int]:
    """Events (of one status), the latest change first, and how many there are."""
    query = {"status": status} if status else {}
    cursor = _events(db).find(query).sort([("updatedAt", DESCENDING), ("_id", DESCENDING)]).skip(offset).limit(limit)
    return await cursor.to_list(), await _events(db).count_documents(query)


async def oldest_pending(db: AsyncDatabase) -> datetime | None:
    """When the event that has waited longest was created (None: nothing waits)."""
    oldest = await _events(db).find_one({"status": "pending"}, {"createdAt": 1}, sort=[("createdAt", ASCENDING)])
    return oldest["createdAt"] if oldest else None


async def counts(db: AsyncDatabase) -> dict[str, int]:
    """How many events are in each status."""
    statuses = ("pending", "processing", "done", "failed", "skipped")
    return {status: await _events(db).count_documents({"status": status}) for status in statuses}


async def reconciled_until(db: AsyncDatabase) -> Doc | None:
    """Where the reconcile pass stopped: `{createdAt, orderId}` of the last order it checked, or None."""
    return await db["outbox_state"].find_one({"_id": "reconciled"})


async def mark_reconciled(db: AsyncDatabase, created_at: datetime, order_id: ObjectId) -> None:
    update = {"$set": {"createdAt": created_at, "orderId": order_id}}
    await db["outbox_state"].update_one({"_id": "reconciled"}, update, upsert=True)
