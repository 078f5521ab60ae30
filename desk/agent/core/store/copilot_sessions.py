"""Copilot conversations (`copilot_sessions`): one active per person, claimed by one run at a time.

`activeFor` (the person's id) is set only on the active one; a sparse unique index makes "one
active conversation per person" atomic. The copilot's path to the first token only claims and
updates here (each round trip is time before the first token); the finds serve pages and the sweeper.
"""

from datetime import datetime, timedelta
from typing import Any

from bson import ObjectId
from pymongo import ASCENDING, DESCENDING
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import DuplicateKeyError

from desk.agent.core.store.keep import KEEP_RUNS, Doc
from desk.schema import now


async def ensure_indexes(db: AsyncDatabase) -> None:
    await db["copilot_sessions"].create_index([("activeFor", ASCENDING)], unique=True, sparse=True, name="one_active")
    await db["copilot_sessions"].create_index([("userId", ASCENDING), ("createdAt", DESCENDING)], name="user")
    await db["copilot_sessions"].create_index([("expiresAt", ASCENDING)], expireAfterSeconds=0, name="ttl")


# A session claimed longer than this by no running run is stuck (the sweeper frees it). Longer than
# one model call may last (the provider's 120 s total timeout): a run ended elsewhere (a logout)
# stops only at its next step, and its session must not take a second stream before then.
CLAIM_GRACE = timedelta(minutes=3)


async def insert_session(db: AsyncDatabase, user_id: ObjectId, *, from_api: bool = False) -> Doc | None:
    """A new active session, or None when the user already has one; `from_api`: opened by an API client."""
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
    if from_api:  # the person's browser drawer shows the same conversation: it says where this one came from
        doc["startedFrom"] = "api"
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
