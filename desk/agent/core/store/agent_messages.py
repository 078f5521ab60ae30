"""A run's messages (`agent_messages`), kept 90 days; the only code touching them."""

from datetime import datetime

from bson import ObjectId
from pymongo import ASCENDING, DESCENDING
from pymongo.asynchronous.database import AsyncDatabase

from desk.agent.core.store.keep import KEEP_TRANSCRIPT, Doc
from desk.schema import now


async def ensure_indexes(db: AsyncDatabase) -> None:
    await db["agent_messages"].create_index([("sessionId", ASCENDING), ("createdAt", ASCENDING)], name="session")
    await db["agent_messages"].create_index([("expiresAt", ASCENDING)], expireAfterSeconds=0, name="ttl")


async def add_messages(db: AsyncDatabase, messages: list[Doc]) -> datetime:
    """Store several messages of one run at once, in order (one round trip; `run_messages` keeps their order, and a
    message may bring its own `_id`); returns when they were stored (`createdAt`)."""
    moment = now()
    kept = moment + KEEP_TRANSCRIPT
    docs = [{"_id": ObjectId(), **message, "createdAt": moment, "expiresAt": kept} for message in messages]
    await db["agent_messages"].insert_many(docs)
    return moment


async def session_messages(db: AsyncDatabase, session_id: ObjectId, *, limit: int = 50) -> list[Doc]:
    """The newest `limit` messages of a session still kept (SEC-12; the TTL purge may lag a minute), oldest first."""
    cursor = db["agent_messages"].find({"sessionId": session_id}).sort("createdAt", DESCENDING).limit(limit)
    moment = now()  # filtered here, not in the query: the planner must keep using the session index
    return [message for message in reversed(await cursor.to_list()) if message["expiresAt"] > moment]


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
