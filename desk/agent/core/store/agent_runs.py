"""Agent runs (`agent_runs`): one document a run, its status, lease and usage; the only code touching them.

Run status moves only from `running` to one terminal status, by a conditional update, so two
writers (the copilot's turn, the sweeper, a logout) can never both finish a run.
"""

from datetime import datetime, timedelta

from bson import ObjectId
from pymongo import ASCENDING, DESCENDING, ReturnDocument
from pymongo.asynchronous.database import AsyncDatabase

from desk.agent.core.events import RunStatus
from desk.agent.core.store.keep import KEEP_RUNS, Doc
from desk.schema import now


async def ensure_indexes(db: AsyncDatabase) -> None:
    await db["agent_runs"].create_index([("sessionId", ASCENDING), ("startedAt", ASCENDING)], name="session")
    await db["agent_runs"].create_index([("userId", ASCENDING), ("startedAt", DESCENDING)], name="user")
    await db["agent_runs"].create_index([("status", ASCENDING), ("leaseUntil", ASCENDING)], name="status_lease")
    await db["agent_runs"].create_index([("expiresAt", ASCENDING)], expireAfterSeconds=0, name="ttl")


TERMINAL: tuple[RunStatus, ...] = ("complete", "error", "budget_exceeded", "expired", "aborted")


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


async def owned_by(db: AsyncDatabase, user_id: ObjectId, run_ids: list[ObjectId]) -> list[ObjectId]:
    """Those of `run_ids` that are runs of `user_id`."""
    found = await db["agent_runs"].find({"_id": {"$in": run_ids}, "userId": user_id}, {"_id": 1}).to_list()
    return [doc["_id"] for doc in found]
