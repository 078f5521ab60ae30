"""Copilot sessions, agent runs, messages, tool calls and idempotency keys; the only code touching them.

Run status moves only from `running` to one terminal status, by a conditional update, so two
writers (the runtime, the sweeper, a logout) can never both finish a run.

The copilot's path to the first token only claims, updates and inserts here (each round trip is
time before the first token); the finds serve pages, the sweeper and the rarer paths.
"""

from datetime import datetime, timedelta
from typing import Any

from bson import ObjectId
from pymongo import ASCENDING, DESCENDING, ReturnDocument
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import DuplicateKeyError

from desk.agent.core.events import RunStatus
from desk.schema import now

Doc = dict[str, Any]
TERMINAL: tuple[RunStatus, ...] = ("complete", "error", "budget_exceeded", "expired", "aborted")
KEEP_TRANSCRIPT = timedelta(days=90)  # SEC-12: messages and tool-call results
KEEP_RUNS = timedelta(days=365)  # SEC-12: run and session records
# A session claimed longer than this by no running run is stuck (the sweeper frees it). Longer than
# one model call may last (the provider's 120 s total timeout): a run ended elsewhere (a logout)
# stops only at its next step, and its session must not take a second stream before then.
CLAIM_GRACE = timedelta(minutes=3)


async def ensure_indexes(db: AsyncDatabase) -> None:
    await db["copilot_sessions"].create_index([("activeFor", ASCENDING)], unique=True, sparse=True, name="one_active")
    await db["copilot_sessions"].create_index([("userId", ASCENDING), ("createdAt", DESCENDING)], name="user")
    await db["copilot_sessions"].create_index([("expiresAt", ASCENDING)], expireAfterSeconds=0, name="ttl")
    await db["agent_runs"].create_index([("sessionId", ASCENDING), ("startedAt", ASCENDING)], name="session")
    await db["agent_runs"].create_index([("userId", ASCENDING), ("startedAt", DESCENDING)], name="user")
    await db["agent_runs"].create_index([("status", ASCENDING), ("leaseUntil", ASCENDING)], name="status_lease")
    await db["agent_runs"].create_index([("expiresAt", ASCENDING)], expireAfterSeconds=0, name="ttl")
    await db["agent_messages"].create_index([("sessionId", ASCENDING), ("createdAt", ASCENDING)], name="session")
    await db["agent_messages"].create_index([("expiresAt", ASCENDING)], expireAfterSeconds=0, name="ttl")
    await db["agent_tool_calls"].create_index([("runId", ASCENDING), ("createdAt", ASCENDING)], name="run")
    await db["agent_tool_calls"].create_index(
        [("approval.status", ASCENDING), ("approval.expiresAt", ASCENDING)], name="approval"
    )
    await db["agent_tool_calls"].create_index([("expiresAt", ASCENDING)], expireAfterSeconds=0, name="ttl")
    await db["agent_idempotency"].create_index([("expiresAt", ASCENDING)], expireAfterSeconds=0, name="ttl")


# Sessions: `activeFor` (the user id) is set only on the active one; a sparse unique index makes
# "one active session per user" atomic.


async def insert_session(db: AsyncDatabase, user_id: ObjectId) -> Doc | None:
    """A new active session, or None when the user already has one."""
    moment = now()
    doc = {
        "userId": user_id,
        "activeFor": user_id,
        "status": "active",
        "runningRunId": None,
        "historyMark": None,  # no messages yet (see claim_session)
        "createdAt": moment,
        "updatedAt": moment,
        "expiresAt": moment + KEEP_RUNS,
    }
    try:
        doc["_id"] = (await db["copilot_sessions"].insert_one(doc)).inserted_id
    except DuplicateKeyError:
        return None
    return doc


async def get_session(db: AsyncDatabase, session_id: ObjectId) -> Doc | None:
    return await db["copilot_sessions"].find_one({"_id": session_id})


async def active_session(db: AsyncDatabase, user_id: ObjectId) -> Doc | None:
    return await db["copilot_sessions"].find_one({"activeFor": user_id})


async def archive_session(db: AsyncDatabase, session_id: ObjectId) -> bool:
    """Archive an idle active session (none of its runs is running)."""
    result = await db["copilot_sessions"].update_one(
        {"_id": session_id, "status": "active", "runningRunId": None},
        {"$set": {"status": "archived", **_used(now())}, "$unset": {"activeFor": ""}},
    )
    return result.modified_count == 1


async def recent_sessions(db: AsyncDatabase, user_id: ObjectId, *, limit: int = 20) -> list[Doc]:
    cursor = db["copilot_sessions"].find({"userId": user_id}).sort("createdAt", DESCENDING).limit(limit)
    return await cursor.to_list()


async def claim_session(
    db: AsyncDatabase, session_id: ObjectId, run_id: ObjectId, *, user_id: ObjectId | None = None
) -> Doc | None:
    """Mark the person's active session busy with `run_id` (one stream at a time); returns it as it was
    before, or None when it is not theirs, not active or held by another run.

    The returned `historyMark` is the id of the last message stored in the session (None: none yet),
    which tells the runtime whether the earlier turns it keeps in memory are current. While the run
    holds the session the mark is a fresh id that no memory holds: a run that dies mid-write is
    read back from the database.
    """
    owner = {"userId": user_id} if user_id is not None else {}
    moment = now()
    return await db["copilot_sessions"].find_one_and_update(
        {"_id": session_id, **owner, "status": "active", "runningRunId": None},
        {"$set": {"runningRunId": run_id, "claimedAt": moment, "historyMark": ObjectId(), **_used(moment)}},
    )


_UNCHANGED: Any = object()


def _used(moment: datetime) -> Doc:
    """A conversation in use is kept a year from its last use, not from its start (or it could go under its owner)."""
    return {"updatedAt": moment, "expiresAt": moment + KEEP_RUNS}


async def release_session(
    db: AsyncDatabase, session_id: ObjectId, run_id: ObjectId, *, history_mark: ObjectId | None = _UNCHANGED
) -> None:
    """Free the session if `run_id` still holds it; `history_mark` (when given) is its new last message."""
    fields: Doc = {"runningRunId": None, **_used(now())}
    if history_mark is not _UNCHANGED:
        fields["historyMark"] = history_mark
    await db["copilot_sessions"].update_one(
        {"_id": session_id, "runningRunId": run_id}, {"$set": fields, "$unset": {"claimedAt": ""}}
    )


async def claimed_before(db: AsyncDatabase, before: datetime) -> list[Doc]:
    """Sessions held by one run since before `before` (the sweeper checks that run still exists and runs)."""
    return await db["copilot_sessions"].find({"claimedAt": {"$lt": before}}).to_list(500)


# Idempotency keys: the first POST with a key wins; a replay finds the run it started.


async def remember_key(db: AsyncDatabase, user_id: ObjectId, key: str, run_id: ObjectId) -> ObjectId | None:
    """Record `key` for `run_id`; returns the earlier run's id when the key was used before.

    A key can be given back (`forget_key`: its message was refused) between our failed insert and
    our read of it; then the key is free and this message tries again. Only a key that keeps being
    taken and given back under us (three times) is refused as a duplicate of this very run.
    """
    for _ in range(3):
        try:
            await db["agent_idempotency"].insert_one(
                {"_id": f"{user_id}:{key}", "runId": run_id, "expiresAt": now() + timedelta(days=1)}
            )
        except DuplicateKeyError:
            earlier = await db["agent_idempotency"].find_one({"_id": f"{user_id}:{key}"})
            if earlier is not None:
                return earlier["runId"]
        else:
            return None
    return run_id


async def forget_key(db: AsyncDatabase, user_id: ObjectId, key: str) -> None:
    await db["agent_idempotency"].delete_one({"_id": f"{user_id}:{key}"})


# Runs


def new_run(*, session_id: ObjectId | None, user_id: ObjectId | None, mode: str, model: str, lease: timedelta) -> Doc:
    moment = now()
    return {
        "_id": ObjectId(),
        "sessionId": session_id,
        "userId": user_id,
        "mode": mode,
        "agentName": "copilot",
        "status": "running",
        "model": model,
        "inputTokens": 0,
        "outputTokens": 0,
        "costUsd": 0.0,
        "steps": 0,
        "startedAt": moment,
        "finishedAt": None,
        "errorCode": None,
        "leaseUntil": moment + lease,
        "expiresAt": moment + KEEP_RUNS,
    }


async def insert_run(db: AsyncDatabase, run: Doc) -> None:
    await db["agent_runs"].insert_one(run)


async def get_run(db: AsyncDatabase, run_id: ObjectId) -> Doc | None:
    return await db["agent_runs"].find_one({"_id": run_id})


async def endings(db: AsyncDatabase, run_ids: list[ObjectId]) -> dict[ObjectId, tuple[str, str | None]]:
    """How each of these runs ended, if it ended other than complete: its status and error code, by run id."""
    query = {"_id": {"$in": run_ids}, "status": {"$nin": ["running", "complete"]}}
    found = await db["agent_runs"].find(query, {"status": 1, "errorCode": 1}).to_list()
    return {doc["_id"]: (doc["status"], doc.get("errorCode")) for doc in found}


async def user_runs(db: AsyncDatabase, user_id: ObjectId, *, limit: int = 50) -> list[Doc]:
    return await db["agent_runs"].find({"userId": user_id}).sort("startedAt", DESCENDING).limit(limit).to_list()


async def page(db: AsyncDatabase, found: Doc, *, offset: int, limit: int, count_cap: int) -> tuple[list[Doc], int]:
    """Runs matching `found` (a filter on userId, agentName, status, startedAt), newest first, and how many (<= cap)."""
    cursor = db["agent_runs"].find(found).sort([("startedAt", DESCENDING), ("_id", DESCENDING)])
    items = await cursor.skip(offset).limit(limit).to_list()
    # counted by reading ids, not count_documents: its aggregation ignores a date filter on the embedded engine
    total = len(await db["agent_runs"].find(found, {"_id": 1}).limit(count_cap).to_list())
    return items, total


async def last_of(db: AsyncDatabase, agent: str) -> Doc | None:
    """The newest run of one agent."""
    return await db["agent_runs"].find_one({"agentName": agent}, sort=[("startedAt", DESCENDING), ("_id", DESCENDING)])


async def costs(db: AsyncDatabase, run_ids: list[ObjectId]) -> list[Doc]:
    """`costUsd` and `workOrderId` of these runs (what the run read model leaves out)."""
    return await db["agent_runs"].find({"_id": {"$in": run_ids}}, {"costUsd": 1, "workOrderId": 1}).to_list()


async def record_usage(db: AsyncDatabase, run_id: ObjectId, usage: Doc) -> None:
    """Add one model call (`inputTokens`, `outputTokens`, `costUsd`) to its run."""
    await db["agent_runs"].update_one({"_id": run_id}, {"$inc": {**usage, "steps": 1}})


async def renew_lease(db: AsyncDatabase, run_id: ObjectId, lease: timedelta) -> bool:
    """Extend a running run's lease; False when the run is no longer running (aborted, expired...)."""
    result = await db["agent_runs"].update_one(
        {"_id": run_id, "status": "running"}, {"$set": {"leaseUntil": now() + lease}}
    )
    return result.matched_count == 1


async def renew_lease_and_look(db: AsyncDatabase, run_id: ObjectId, lease: timedelta) -> Doc | None:
    """Extend a running run's lease, returning its `wakeFor` (a decision's mark); None when it no longer runs."""
    return await db["agent_runs"].find_one_and_update(
        {"_id": run_id, "status": "running"},
        {"$set": {"leaseUntil": now() + lease}},
        projection={"wakeFor": 1},
        return_document=ReturnDocument.AFTER,
    )


async def wake(db: AsyncDatabase, run_id: ObjectId, tool_call_id: ObjectId) -> None:
    """Mark a run whose change was just decided: its wait, in whichever process, sees it at its next renewal."""
    await db["agent_runs"].update_one({"_id": run_id, "status": "running"}, {"$set": {"wakeFor": tool_call_id}})


async def finish_run(
    db: AsyncDatabase, run_id: ObjectId, status: RunStatus, *, error_code: str | None = None, usage: Doc | None = None
) -> bool:
    """running -> `status`, only if it is still running; returns whether this call made the move.

    `usage` (the last model call, as for record_usage) is added in the same update, or on its own
    when someone else ended the run first: every call is billed to its run.
    """
    assert status in TERMINAL
    update: Doc = {"$set": {"status": status, "finishedAt": now(), "errorCode": error_code, "leaseUntil": None}}
    if usage is not None:
        update["$inc"] = {**usage, "steps": 1}
    result = await db["agent_runs"].update_one({"_id": run_id, "status": "running"}, update)
    if result.modified_count == 1:
        return True
    if usage is not None:
        await record_usage(db, run_id, usage)
    return False


async def running_runs(db: AsyncDatabase, user_id: ObjectId) -> list[Doc]:
    return await db["agent_runs"].find({"userId": user_id, "status": "running"}).to_list()


async def stale_runs(db: AsyncDatabase, before: datetime) -> list[Doc]:
    return await db["agent_runs"].find({"status": "running", "leaseUntil": {"$lt": before}}).to_list(500)


# Messages and tool calls (kept 90 days)


async def add_message(db: AsyncDatabase, message: Doc) -> datetime:
    """Store one message (the caller may choose its `_id`); returns when it was stored (`createdAt`)."""
    moment = now()
    await db["agent_messages"].insert_one({**message, "createdAt": moment, "expiresAt": moment + KEEP_TRANSCRIPT})
    return moment


async def add_messages(db: AsyncDatabase, messages: list[Doc]) -> None:
    """Store several messages of one run at once, in order (one round trip; `run_messages` keeps their order)."""
    moment = now()
    kept = moment + KEEP_TRANSCRIPT
    docs = [{"_id": ObjectId(), **message, "createdAt": moment, "expiresAt": kept} for message in messages]
    await db["agent_messages"].insert_many(docs)


async def session_messages(db: AsyncDatabase, session_id: ObjectId, *, limit: int = 50) -> list[Doc]:
    """The newest `limit` messages of a session still kept (SEC-12; the TTL purge may lag a minute), oldest first."""
    cursor = db["agent_messages"].find({"sessionId": session_id}).sort("createdAt", DESCENDING).limit(limit)
    moment = now()  # filtered here, not in the query: the planner must keep using the session index
    return [message for message in reversed(await cursor.to_list()) if message["expiresAt"] > moment]


async def owned_by(db: AsyncDatabase, user_id: ObjectId, run_ids: list[ObjectId]) -> list[ObjectId]:
    """Those of `run_ids` that are runs of `user_id`."""
    found = await db["agent_runs"].find({"_id": {"$in": run_ids}, "userId": user_id}, {"_id": 1}).to_list()
    return [doc["_id"] for doc in found]


async def first_asked(db: AsyncDatabase, run_ids: list[ObjectId]) -> dict[ObjectId, str]:
    """Each run's first message from the person (what they asked), by run id."""
    query = {"runId": {"$in": run_ids}, "role": "user"}
    found = await db["agent_messages"].find(query, {"runId": 1, "content": 1}).sort("createdAt", ASCENDING).to_list()
    asked: dict[ObjectId, str] = {}
    for message in found:
        asked.setdefault(message["runId"], message.get("content") or "")
    return asked


async def run_messages(db: AsyncDatabase, run_id: ObjectId) -> list[Doc]:
    # _id breaks ties: messages stored in the same millisecond (or at once) come back in the order they were made
    order = [("createdAt", ASCENDING), ("_id", ASCENDING)]
    return await db["agent_messages"].find({"runId": run_id}).sort(order).to_list()


async def insert_tool_call(db: AsyncDatabase, call: Doc) -> Doc:
    moment = now()
    doc = {"_id": ObjectId(), **call, "createdAt": moment, "expiresAt": moment + KEEP_TRANSCRIPT}
    await db["agent_tool_calls"].insert_one(doc)
    return doc


async def get_tool_call(db: AsyncDatabase, call_id: ObjectId) -> Doc | None:
    return await db["agent_tool_calls"].find_one({"_id": call_id})


async def run_tool_calls(db: AsyncDatabase, run_id: ObjectId) -> list[Doc]:
    return await db["agent_tool_calls"].find({"runId": run_id}).sort("createdAt", ASCENDING).to_list()


async def update_tool_call(
    db: AsyncDatabase, call_id: ObjectId, fields: Doc, *, only_if: Doc | None = None
) -> Doc | None:
    """Set `fields` (when the stored call also matches `only_if`); returns the call after, or None."""
    return await db["agent_tool_calls"].find_one_and_update(
        {"_id": call_id, **(only_if or {})}, {"$set": fields}, return_document=ReturnDocument.AFTER
    )


async def pending_approvals(db: AsyncDatabase, run_id: ObjectId) -> list[Doc]:
    return await db["agent_tool_calls"].find({"runId": run_id, "approval.status": "pending"}).to_list()


async def abandon_approved(db: AsyncDatabase, run_id: ObjectId) -> None:
    """Approved changes of `run_id` that were never made: outcome `aborted` (the run ended first)."""
    await db["agent_tool_calls"].update_many(
        {"runId": run_id, "approval.status": "approved", "outcome": "pending"}, {"$set": {"outcome": "aborted"}}
    )


async def overdue_approvals(db: AsyncDatabase, before: datetime) -> list[Doc]:
    query = {"approval.status": "pending", "approval.expiresAt": {"$lt": before}}
    return await db["agent_tool_calls"].find(query).to_list(500)
