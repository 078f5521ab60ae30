"""The `outbox_events` collection, the job queue's store; the only place that touches it.

A job is one document (the spec's OutboxEvent): `type` names its task, `payloadRef` the thing it is
about, and the two are its key, unique. It moves pending -> processing (claimed, leased) -> done |
skipped | failed, or back to pending for a retry. Every claim bumps `fence`; every write that settles
a job names the fence it claimed with, so a worker that lost its lease (paused, partitioned) can no
longer settle it. Writes take the moment as `at` (the worker's clock), the current time by default.

Claims take the newest due job first, by `bornAt`: when the thing the job is about came to be (an order's
creation), not when the job was enqueued. Decision: newest first rather than a lane for fresh jobs. A
backlog (a kill switch, an outage, AI turned off, a reconcile after a crash) is work nobody is watching;
a new order is the one a person just made and may be looking at. Newest first puts it next in line with
no second queue to balance, and `bornAt` keeps a job enqueued late for an old thing (reconcile) behind it.
The price: under an overload that never ends, the oldest jobs wait until arrivals slow down; they are
never lost, and the queue's overview shows the oldest waiting job.

Retention: a finished job carries `expiresAt` under a TTL index: done and skipped jobs go 30 days after they
ended, dead letters (failed) 90 (the record of orders never triaged, which an admin may still retry); pending
and processing jobs have none and never expire. A date set only on finished jobs, not a TTL index with a
partial filter: the embedded engine's TTL purge ignores partial filters and would delete waiting jobs too.
"""

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from bson import ObjectId
from pymongo import ASCENDING, DESCENDING, ReturnDocument
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import BulkWriteError, DuplicateKeyError

from desk.jobs.models import EventStatus
from desk.schema import now

Doc = dict[str, Any]
STATUSES: tuple[EventStatus, ...] = ("pending", "processing", "done", "failed", "skipped")
FRESH = {"attempts": 0, "strikes": 0}  # a job an admin retries starts its count again
KEEP: dict[str, timedelta] = {"done": timedelta(days=30), "skipped": timedelta(days=30), "failed": timedelta(days=90)}


def _expires(status: str, at: datetime) -> datetime | None:
    """When a job in `status` since `at` is deleted (None: it waits or runs, and is kept)."""
    keep = KEEP.get(status)
    return at + keep if keep is not None else None


def _jobs(db: AsyncDatabase):
    return db["outbox_events"]


async def ensure_indexes(db: AsyncDatabase) -> None:
    jobs = _jobs(db)
    # the idempotency key (AGT-1): a retried enqueue or a reconcile never makes a second job
    await jobs.create_index([("type", ASCENDING), ("payloadRef", ASCENDING)], unique=True, name="type_ref")
    await jobs.create_index([("status", ASCENDING), ("availableAt", ASCENDING)], name="status_available")
    # the claim's sort (newest first) served by the index, within a status and a task: no sort of the backlog
    await jobs.create_index([("status", ASCENDING), ("type", ASCENDING), ("bornAt", DESCENDING)], name="claim_order")
    await jobs.create_index([("status", ASCENDING), ("leasedUntil", ASCENDING)], name="status_lease")
    await jobs.create_index([("status", ASCENDING), ("updatedAt", DESCENDING)], name="status_updated")
    await jobs.create_index([("expiresAt", ASCENDING)], expireAfterSeconds=0, name="ttl")


async def enqueue(
    db: AsyncDatabase,
    task: str,
    key: ObjectId,
    *,
    not_before: datetime | None = None,
    skip: str | None = None,
    born: datetime | None = None,
    at: datetime | None = None,
) -> bool:
    """A job for `task` about `key`, due from `not_before` (now by default); False when it exists already.

    `born`: when the key's thing came to be (now by default); claims take the newest first.

    `skip` stores the job as `skipped` with that reason (an owner who turned AI off, SEC-8): it is
    kept, so a pass that enqueues what has no job does not enqueue it again.
    """
    moment = at or now()
    job = _new_job(task, key, not_before=not_before or moment, born=born or moment, at=moment)
    if skip:
        job |= {"status": "skipped", "lastError": skip, "expiresAt": _expires("skipped", moment)}
    try:
        await _jobs(db).insert_one(job)
    except DuplicateKeyError:
        return False
    return True


def _new_job(task: str, key: ObjectId, *, not_before: datetime, born: datetime, at: datetime) -> Doc:
    """A job as it is first stored: pending, never tried."""
    return {
        "type": task,
        "payloadRef": key,
        "status": "pending",
        "attempts": 0,
        "strikes": 0,  # failures that may be the job's own, uncounted in its attempts (`put_back`)
        "fence": 0,
        "availableAt": not_before,
        "bornAt": born,
        "leasedUntil": None,
        "leaseOwner": None,
        "lastError": None,
        "createdAt": at,
        "updatedAt": at,
        "expiresAt": None,
    }


async def enqueue_held(
    db: AsyncDatabase, task: str, key: ObjectId, payload: Doc, *, owner: str, lease: timedelta, at: datetime
) -> Doc | None:
    """A job for `task` about `key`, stored already claimed by `owner` (its first attempt, leased for `lease`), with
    what it needs to know (`payload`, which its function reads as `Job.payload`); None when it exists already.

    For work a process does itself at once and must not lose: stored before the write it follows, it is this
    process's to run; should the process die first, its lease lapses and a worker takes it (`revive`), as any job a
    dead worker held. Settled like any claim (`settle`, `retry_at`), fenced.
    """
    job = _new_job(task, key, not_before=at, born=at, at=at)
    job |= {"status": "processing", "attempts": 1, "fence": 1, "leasedUntil": at + lease, "leaseOwner": owner}
    job["payload"] = payload
    try:
        await _jobs(db).insert_one(job)  # gives `job` its _id
    except DuplicateKeyError:
        return None
    return job


async def enqueue_many(
    db: AsyncDatabase, jobs: Iterable[tuple[str, ObjectId, datetime, Doc | None]], *, at: datetime
) -> int:
    """Several jobs (task, key, due from, payload or None) in one round trip, as `enqueue` makes each, born `at`;
    those that exist already are left as they are. Returns how many were made. A payload is what the job's function
    reads as `Job.payload` (what it would otherwise read from the database)."""
    docs = [
        _new_job(task, key, not_before=not_before, born=at, at=at) | ({"payload": payload} if payload else {})
        for task, key, not_before, payload in jobs
    ]
    if not docs:
        return 0
    try:
        return len((await _jobs(db).insert_many(docs, ordered=False)).inserted_ids)
    except BulkWriteError as error:  # a key that has its job already: the others are stored all the same
        return error.details.get("nInserted", 0)


async def claim(
    db: AsyncDatabase,
    *,
    owner: str,
    lease: timedelta,
    tasks: Iterable[str] | None = None,
    at: datetime | None = None,
) -> Doc | None:
    """Take the newest due job (of `tasks`, or any; by `bornAt`), pending and available, in one atomic step that
    counts the attempt and moves the fence. A job whose lease lapsed is claimed once `revive` put it back."""
    at = at or now()
    # One status and one task (the common case), named by equality, with the sort on the index's last key: the
    # embedded engine walks `claim_order` from the newest and stops at the first due job. An `$or` (pending, or
    # processing and lapsed) or an `$in` made it read and sort every job for every claim.
    names = list(tasks) if tasks is not None else None
    of_tasks: Doc = {} if names is None else {"type": names[0] if len(names) == 1 else {"$in": names}}
    return await _jobs(db).find_one_and_update(
        {"status": "pending", **of_tasks, "availableAt": {"$lte": at}},
        {
            "$set": {"status": "processing", "leasedUntil": at + lease, "leaseOwner": owner, "updatedAt": at},
            "$inc": {"attempts": 1, "fence": 1},
        },
        sort=[("bornAt", DESCENDING), ("_id", DESCENDING)],
        return_document=ReturnDocument.AFTER,
    )


async def revive(db: AsyncDatabase, *, at: datetime | None = None) -> int:
    """Every job whose lease lapsed (its worker died or stalled) back to pending, its attempt still counted;
    how many. Its fence stays: the worker that lost it can settle nothing (it matches `processing`)."""
    lapsed = {"status": "processing", "leasedUntil": {"$lt": at or now()}}
    fields = {"status": "pending", "leasedUntil": None, "leaseOwner": None}
    return (await _jobs(db).update_many(lapsed, {"$set": fields})).modified_count


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
    moment = at or now()
    fields = {"status": status, "leasedUntil": None, "leaseOwner": None, "lastError": error, "updatedAt": moment}
    fields["expiresAt"] = _expires(status, moment)
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
    strike: bool = False,
    at: datetime | None = None,
) -> bool:
    """Back to pending, the attempt not counted: the job was not the problem (its task said not now). Due at once,
    or from `not_before`; `error` (why it waits) is kept as its `lastError`. `strike`: it may have been the problem
    after all, and its `strikes` are counted (desk/jobs/table.py, `Later`)."""
    fields: Doc = {"status": "pending", "leasedUntil": None, "leaseOwner": None, "updatedAt": at or now()}
    if error is not None:
        fields["lastError"] = error
    if not_before is not None:
        fields["availableAt"] = not_before
    counted = {"attempts": -1, "strikes": 1} if strike else {"attempts": -1}
    result = await _jobs(db).update_one(_fenced(job), {"$set": fields, "$inc": counted})
    return result.modified_count == 1


async def take(
    db: AsyncDatabase,
    task: str,
    key: ObjectId,
    *,
    owner: str,
    lease: timedelta,
    born: datetime | None = None,
    at: datetime | None = None,
) -> tuple[Doc, Doc] | None:
    """The job of `task` about `key` claimed outside the worker's order (an admin's manual run), whatever its status,
    made first if there is none: the job as it was and as claimed; None while another holds a live lease on it.

    The caller settles it (`settle`) or gives it back as it was (`hand_back`), like any claim, fenced.
    """
    moment = at or now()
    before = await find(db, task, key)
    if before is None:
        await enqueue(db, task, key, born=born, at=moment)
        before = await find(db, task, key)
    held = before is not None and before["status"] == "processing" and (before.get("leasedUntil") or moment) > moment
    if before is None or held:
        return None
    claimed = await _jobs(db).find_one_and_update(
        {"_id": before["_id"], "status": before["status"], "fence": before["fence"]},  # no one claimed it meanwhile
        {
            "$set": {
                "status": "processing",
                "leasedUntil": moment + lease,
                "leaseOwner": owner,
                "updatedAt": moment,
                "expiresAt": None,  # held again: kept until it ends again
            },
            "$inc": {"attempts": 1, "fence": 1},
        },
        return_document=ReturnDocument.AFTER,
    )
    return (before, claimed) if claimed is not None else None


async def hand_back(db: AsyncDatabase, job: Doc, before: Doc, *, at: datetime | None = None) -> bool:
    """A job `take`n back to how it was (its status and error), the attempt not counted, only while we hold it.

    One taken from a dead worker (processing, its lease lapsed) goes back pending: a worker claims it again."""
    status = "pending" if before["status"] == "processing" else before["status"]
    fields = {"status": status, "lastError": before.get("lastError"), "leasedUntil": None, "leaseOwner": None}
    fields["expiresAt"] = before.get("expiresAt")
    result = await _jobs(db).update_one(
        _fenced(job), {"$set": {**fields, "updatedAt": at or now()}, "$inc": {"attempts": -1}}
    )
    return result.modified_count == 1


async def put_back_all(db: AsyncDatabase, task: str, *, at: datetime | None = None) -> int:
    """Every claimed job of `task` back to pending at once, attempts not counted, fences moved: whoever held one
    can no longer renew or settle it (a kill switch takes its jobs back from every worker); returns how many."""
    fields = {"status": "pending", "leasedUntil": None, "leaseOwner": None, "updatedAt": at or now()}
    result = await _jobs(db).update_many(
        {"type": task, "status": "processing"}, {"$set": fields, "$inc": {"attempts": -1, "fence": 1}}
    )
    return result.modified_count


async def requeue(db: AsyncDatabase, job_id: ObjectId) -> Doc | None:
    """A failed job back to pending with its attempts reset (an admin's retry); None when it is not failed."""
    moment = now()
    return await _jobs(db).find_one_and_update(
        {"_id": job_id, "status": "failed"},
        {"$set": {"status": "pending", **FRESH, "availableAt": moment, "updatedAt": moment, "expiresAt": None}},
        return_document=ReturnDocument.AFTER,
    )


async def requeue_failed(db: AsyncDatabase, task: str | None = None) -> int:
    """Every failed job (of `task`, if named) back to pending with its attempts reset (an admin's "retry all");
    how many."""
    moment = now()
    fields = {"status": "pending", **FRESH, "availableAt": moment, "updatedAt": moment, "expiresAt": None}
    failed = {"status": "failed"} | ({"type": task} if task else {})
    result = await _jobs(db).update_many(failed, {"$set": fields})
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
    """When the job that has waited longest was created (None: nothing waits). A job not due yet (an email's digest
    at its window's end, a backoff) is not waiting: counted, it would raise the alarm for a worker that is fine."""
    due = {"status": "pending", "availableAt": {"$lte": now()}}
    oldest = await _jobs(db).find_one(due, {"createdAt": 1}, sort=[("createdAt", ASCENDING)])
    return oldest["createdAt"] if oldest else None


async def counts(db: AsyncDatabase) -> dict[str, int]:
    """How many jobs are in each status."""
    return {status: await _jobs(db).count_documents({"status": status}) for status in STATUSES}
