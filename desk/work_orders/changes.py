"""The change feed: one small entry per work-order write, numbered in order.

Web processes poll it (a cheap indexed read) to keep every open screen current, whichever
process made the change (DESIGN §7); entries are kept a day.
"""

import time
from dataclasses import dataclass, field
from typing import Any

from bson import ObjectId
from pymongo import ASCENDING, ReturnDocument
from pymongo.asynchronous.database import AsyncDatabase

from desk.schema import now

KEEP_SECONDS = 24 * 3600
# How long a reader waits for a missing number: a writer between taking it and writing its entry (a later
# writer's entry can land first), or one that died there and will never write it.
GAP_SECONDS = 10.0
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


async def since(
    db: AsyncDatabase, seq: int, *, limit: int = 500, leaving_out: set[int] | None = None
) -> list[dict[str, Any]]:
    """Changes after `seq`, oldest first, but those numbered in `leaving_out` (handed out already, past a gap: the
    `limit` must go to changes the reader has not seen, or 500 of those would hide every newer one)."""
    after: dict[str, Any] = {"$gt": seq} | ({"$nin": sorted(leaving_out)} if leaving_out else {})
    return await db["changes"].find({"seq": after}, {"_id": 0}).sort("seq", ASCENDING).limit(limit).to_list()


@dataclass
class Cursor:
    """Reads the feed in order and hands out each change once, the late ones too.

    A writer takes its number, then writes its entry: a later writer's entry can land first. Reading
    on from the newest number seen would skip the earlier one for good (a comment that never shows),
    so the cursor stays below a missing number, up to GAP_SECONDS, while handing out what came after.
    """

    seq: int  # every change up to here is handed out
    ahead: set[int] = field(default_factory=set)  # numbers past a gap, handed out already
    gap_since: float | None = None

    async def read(self, db: AsyncDatabase, *, clock: float | None = None) -> list[dict[str, Any]]:
        """The changes not handed out yet, oldest first."""
        fresh = await since(db, self.seq, leaving_out=self.ahead)
        self.ahead.update(change["seq"] for change in fresh)
        self._close_gaps(time.monotonic() if clock is None else clock)
        return fresh

    def _close_gaps(self, clock: float) -> None:
        while self.seq + 1 in self.ahead:
            self.seq += 1
            self.ahead.discard(self.seq)
        if not self.ahead:
            self.gap_since = None
        elif self.gap_since is None:
            self.gap_since = clock
        elif clock - self.gap_since > GAP_SECONDS:  # that number will never come: step over it
            self.seq, self.gap_since = min(self.ahead) - 1, None
            self._close_gaps(clock)
