"""A run's tool calls (`agent_tool_calls`) and a staged change's approval; the only code touching them."""

from datetime import datetime

from bson import ObjectId
from pymongo import ASCENDING, ReturnDocument
from pymongo.asynchronous.database import AsyncDatabase

from desk.agent.core.store.keep import KEEP_TRANSCRIPT, Doc
from desk.schema import now


async def ensure_indexes(db: AsyncDatabase) -> None:
    await db["agent_tool_calls"].create_index([("runId", ASCENDING), ("createdAt", ASCENDING)], name="run")
    await db["agent_tool_calls"].create_index(
        [("approval.status", ASCENDING), ("approval.expiresAt", ASCENDING)], name="approval"
    )
    await db["agent_tool_calls"].create_index([("expiresAt", ASCENDING)], expireAfterSeconds=0, name="ttl")


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
