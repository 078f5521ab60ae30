"""The change feed: one small entry per work-order write, numbered in order.

Web processes poll it (a cheap indexed read) to keep every open screen current, whichever
process made the change (DESIGN §7); entries are kept a day.
"""

from typing import Any

from bson import ObjectId
from pymongo import ASCENDING, ReturnDocument
from pymongo.asynchronous.database import AsyncDatabase

from desk.schema import now

KEEP_SECONDS = 24 * 3600
# Not a change to an order: some people's bells moved (`owners`: whose). The web runtime hands these to bells alone.
NOTIFIED = "notified"


async def ensure_indexes(db: AsyncDatabase) -> None:
    await db["changes"].create_index([("seq", ASCENDING)], unique=True, name="seq")
    await db["changes"].create_index([("at", ASCENDING)], expireAfterSeconds=KEEP_SECONDS, name="ttl")


async def record(db: AsyncDatabase, order_id: ObjectId | None, kind: str, owners: set[str]) -> int:
    """Append one change; sequence numbers come from an atomic counter, so every process sees one order.

    `owners` are the owners before and after, so a screen showing one person's orders can tell
    whether the change concerns it without reading the work order.
    """
    counter = await db["counters"].find_one_and_update(
        {"_id": "changes:seq"}, {"$inc": {"n": 1}}, upsert=True, return_document=ReturnDocument.AFTER
    )
    entry = {
        "seq": counter["n"],
        "workOrderId": str(order_id) if order_id else "",
        "kind": kind,
        "owners": sorted(owners),
        "at": now(),
    }
    await db["changes"].insert_one(entry)
    return counter["n"]


async def ring(db: AsyncDatabase, people: set[str]) -> int:
    """Tell these people's bells, in every web process, that their notifications changed."""
    return await record(db, None, NOTIFIED, people)


async def latest(db: AsyncDatabase) -> int:
    """The newest sequence number (0 before any change)."""
    counter = await db["counters"].find_one({"_id": "changes:seq"})
    return int(counter["n"]) if counter else 0


async def since(db: AsyncDatabase, seq: int, *, limit: int = 500) -> list[dict[str, Any]]:
    """Changes after `seq`, oldest first."""
    return await db["changes"].find({"seq": {"$gt": seq}}, {"_id": 0}).sort("seq", ASCENDING).limit(limit).to_list()
