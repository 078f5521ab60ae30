"""The `outbox_events` collection, the job queue's store; the only place that touches it.

A job is one document (the spec's OutboxEvent): `type` names its task, `payloadRef` the thing it is
about, and the two are its key, unique. It moves pending -> processing (claimed, leased) -> done |
skipped | failed, or back to pending for a retry. Every claim bumps `fence`; every write that settles
a job names the fence it claimed with, so a worker that lost its lease (paused, partitioned) can no
longer settle it. Writes take the moment as `at` (the worker's clock), the current time by default.
"""

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from bson import ObjectId
from pymongo import ASCENDING, DESCENDING, ReturnDocument
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import DuplicateKeyError

from desk.jobs.models import EventStatus
from desk.schema import now

Doc = dict[str, Any]
STATUSES: tuple[EventStatus, ...] = ("pending", "processing", "done", "failed", "skipped")


def _jobs(db: AsyncDatabase):
    return db["outbox_events"]


async def ensure_indexes(db: AsyncDatabase) -> None:
    jobs = _jobs(db)
    # the idempotency key (AGT-1): a retried enqueue or a reconcile never makes a second job
    await jobs.create_index([("type", ASCENDING), ("payloadRef", ASCENDING)], unique=True, name="type_ref")
    await jobs.create_index([("status", ASCENDING), ("availableAt", ASCENDING)], name="status_available")
    await jobs.create_index([("status", ASCENDING), ("leasedUntil", ASCENDING)], name="status_lease")
    await jobs.create_index([("status", ASCENDING), ("updatedAt", DESCENDING)], name="status_updated")


async def enqueue(
    db: AsyncDatabase,
    task: str,
    key: ObjectId,
    *,
    not_before: datetime | None = None,
    skip: str | None = None,
    at: datetime | None = None,
) -> bool:
    """A job for `task` about `key`, due from `not_before` (now by default); False when it exists already.

    `skip` stores the job as `skipped` with that reason (an owner who turned AI off, SEC-8): it is
    kept, so a pass that enqueues what has no job does not enqueue it again.
    """
    moment = at or now()
    job = {
        "type": task,
        "payloadRef": key,
        "status": "skipped" if skip else "pending",
        "attempts": 0,
        "fence": 0,
        "availableAt": not_before or moment,
        "leasedUntil": None,
        "leaseOwner": None,
        "lastError": skip,
        "createdAt": moment,
        "updatedAt": moment,
    }
    try:
        await _jobs(db).insert_one(job)
    except DuplicateKeyError:
        return False
    return True


async def claim(
    db: AsyncDatabase,
    *,
    owner: str,
    lease: timedelta,
    tasks: Iterable[str] | None = None,
    at: datetime | None = None,
) -> Doc | None:
    """Take the oldest due job (of `tasks`, or any): pending and available, or processing with a lapsed lease,
    in one atomic step that counts the attempt and moves the fence."""
    moment = at or now()
    # One task (the common case) is named by equality: the embedded engine answers `$in` here by reading
    # every job for every claim (bench/triage.py: 2-4 times fewer passes a second).
    names = list(tasks) if tasks is not None else None
    of_tasks: Doc = {} if names is None else {"type": names[0] if len(names) == 1 else {"$in": names}}
    due: Doc = {
        "$or": [
            {"status": "pending", "availableAt": {"$lte": moment}, **of_tasks},
            {"status": "processing", "leasedUntil": {"$lt": moment}, **of_tasks},
        ]
    }
    return await _jobs(db).find_one_and_update(
        due,
        {
            "$set": {"status": "processing", "leasedUntil": moment + lease, "leaseOwner": owner, "updatedAt": moment},
            "$inc": {"attempts": 1, "fence": 1},
        },
        sort=[("availableAt", ASCENDING), ("_id", ASCENDING)],
        return_document=ReturnDocument.AFTER,
    )


def _fenced(job: Doc) -> Doc:
    return {"_id": job["_id"], "status": "processing", "fence": job["fence"]}


async def renew(db: AsyncDatabase, job: Doc, lease: timedelta, *, at: datetime | None = None) -> bool:
    """Extend our lease; False when the job is no longer ours (someone claimed it after our lease lapsed)."""
    result = await _jobs(db).update_one(_fenced(job), {"$set": {"leasedUntil": (at or now()) + lease}})
    return result.matched_count == 1


async def settle(
    db: AsyncDatabase, job: Doc, status: EventStatus, *, error: str | None = None, at: datetime | None = None
) -> bool:
    """End the job as `status` (done, skipped, failed), only while we still hold it."""
    fields = {"status": status, "leasedUntil": None, "leaseOwner": None, "lastError": error, "updatedAt": at or now()}
    result = await _jobs(db).update_one(_fenced(job), {"$set": fields})
    return result.modified_count == 1


async def retry_at(db: AsyncDatabase, job: Doc, when: datetime, *, error: str, at: datetime | None = None) -> bool:
    """Back to pending until `when` after a failed attempt (the attempt stays counted)."""
    fields = {"status": "pending", "availableAt": when, "leasedUntil": None, "leaseOwner": None, "lastError": error}
    result = await _jobs(db).update_one(_fenced(job), {"$set": {**fields, "updatedAt": at or now()}})
    return result.modified_count == 1


async def put_back(
    db: AsyncDatabase,
    job: Doc,
    *,
    error: str | None = None,
    not_before: datetime | None = None,
    at: datetime | None = None,
) -> bool:
    """Back to pending, the attempt not counted: the job was not the problem (its task said not now). Due at once,
    or from `not_before`; `error` (why it waits) is kept as its `lastError`."""
    fields: Doc = {"status": "pending", "leasedUntil": None, "leaseOwner": None, "updatedAt": at or now()}
    if error is not None:
        fields["lastError"] = error
    if not_before is not None:
        fields["availableAt"] = not_before
    result = await _jobs(db).update_one(_fenced(job), {"$set": fields, "$inc": {"attempts": -1}})
    return result.modified_count == 1


async def requeue(db: AsyncDatabase, job_id: ObjectId) -> Doc | None:
    """A failed job back to pending with its attempts reset (an admin's retry); None when it is not failed."""
    moment = now()
    return await _jobs(db).find_one_and_update(
        {"_id": job_id, "status": "failed"},
        {"$set": {"status": "pending", "attempts": 0, "availableAt": moment, "updatedAt": moment}},
        return_document=ReturnDocument.AFTER,
    )


async def requeue_failed(db: AsyncDatabase, task: str) -> int:
    """Every failed job of `task` back to pending with its attempts reset (an admin's "retry all"); how many."""
    moment = now()
    fields = {"status": "pending", "attempts": 0, "availableAt": moment, "updatedAt": moment}
    result = await _jobs(db).update_many({"type": task, "status": "failed"}, {"$set": fields})
    return result.modified_count


async def get(db: AsyncDatabase, job_id: ObjectId) -> Doc | None:
    return await _jobs(db).find_one({"_id": job_id})


async def find(db: AsyncDatabase, task: str, key: ObjectId) -> Doc | None:
    """The job of `task` about `key`, if there is one."""
    return await _jobs(db).find_one({"type": task, "payloadRef": key})


async def enqueued(db: AsyncDatabase, task: str, keys: Iterable[ObjectId]) -> set[ObjectId]:
    """Which of these keys have a job of `task`."""
    query = {"type": task, "payloadRef": {"$in": list(keys)}}
    return {doc["payloadRef"] async for doc in _jobs(db).find(query, {"payloadRef": 1})}


async def page(db: AsyncDatabase, *, status: EventStatus | None, offset: int, limit: int) -> tuple[list[Doc], int]:
    """Jobs (of one status), the latest change first, and how many there are."""
    query = {"status": status} if status else {}
    cursor = _jobs(db).find(query).sort([("updatedAt", DESCENDING), ("_id", DESCENDING)]).skip(offset).limit(limit)
    return await cursor.to_list(), await _jobs(db).count_documents(query)


async def oldest_pending(db: AsyncDatabase) -> datetime | None:
    """When the job that has waited longest was created (None: nothing waits)."""
    oldest = await _jobs(db).find_one({"status": "pending"}, {"createdAt": 1}, sort=[("createdAt", ASCENDING)])
    return oldest["createdAt"] if oldest else None


async def counts(db: AsyncDatabase) -> dict[str, int]:
    """How many jobs are in each status."""
    return {status: await _jobs(db).count_documents({"status": status}) for status in STATUSES}
