"""Work orders made ready at start-up: their indexes, then the fields added after desks already held orders,
given to the old orders once.

Each backfill is idempotent and safe when two processes start at once (both write the same values), and costs one
probe once done.
"""

import logging
import time

from pymongo import UpdateOne
from pymongo.asynchronous.database import AsyncDatabase

from desk.schema import sort_key
from desk.work_orders import repository, search

log = logging.getLogger(__name__)
NO_TITLE_KEY = {"titleKey": {"$exists": False}}
NO_REQUESTER = {"requesterId": {"$exists": False}}


async def ensure_indexes(db: AsyncDatabase) -> None:
    """Every index of the work orders and their search; then what old orders lack. Safe to run at every start."""
    await repository.ensure_indexes(db)
    await due(db)  # before the postings are rebuilt from the orders: they carry its keys
    await search.ensure_indexes(db)
    await title_keys(db)
    await requesters(db)
    await handed(db)


async def title_keys(db: AsyncDatabase, *, batch: int = 1000) -> None:
    """Give orders stored before `titleKey` existed theirs, postings too; once done, one index probe.

    Once per desk, about 4 ms an order on the embedded engine (postings are most of it). After a
    change to `desk.schema.sort_key`, unset every stored key (orders and postings) and this makes them again.
    """
    started, done, previous = time.monotonic(), 0, None
    while docs := await db["work_orders"].find(NO_TITLE_KEY, {"title": 1, "description": 1}).limit(batch).to_list():
        if docs[0]["_id"] == previous:  # the last batch was not written: stop rather than loop at start-up
            raise RuntimeError("work_orders.titleKey backfill: an order is still without its key")
        previous = docs[0]["_id"]
        keyed = [{**doc, "titleKey": sort_key(doc["title"])} for doc in docs]
        await search.stamp_title_keys(db, keyed)  # postings first: a crash in between leaves the order to redo
        await db["work_orders"].bulk_write(
            [UpdateOne({"_id": d["_id"]}, {"$set": {"titleKey": d["titleKey"]}}) for d in keyed]
        )
        done += len(keyed)
    if done:
        log.info("Gave %d work orders their title sort key in %.1f s", done, time.monotonic() - started)


async def requesters(db: AsyncDatabase, *, batch: int = 1000) -> None:
    """Orders from before requesters were kept were asked for by their owner: say so. Once done, one index probe.

    Idempotent and safe when two processes start at once: both write the same value, each write naming
    only an order still without one. Counters need nothing (an order whose owner asked adds to no
    "handed" total); search postings get the requester first (a search may filter by it), so a crash in
    between leaves the order to redo.
    """
    started, done, previous = time.monotonic(), 0, None
    shown = {"ownerId": 1, "title": 1, "description": 1}
    while docs := await db["work_orders"].find(NO_REQUESTER, shown).limit(batch).to_list():
        if docs[0]["_id"] == previous:
            raise RuntimeError("work_orders.requesterId backfill: an order is still without its requester")
        previous = docs[0]["_id"]
        await search.stamp(db, [d | {"requesterId": d["ownerId"]} for d in docs], "requesterId")
        await db["work_orders"].bulk_write(
            [UpdateOne({"_id": d["_id"], **NO_REQUESTER}, {"$set": {"requesterId": d["ownerId"]}}) for d in docs],
            ordered=False,
        )
        done += len(docs)
    if done:
        log.info("Gave %d work orders their requester in %.1f s", done, time.monotonic() - started)


async def handed(db: AsyncDatabase, *, batch: int = 500) -> None:
    """Give orders stored before `handedBy` existed theirs, postings too; once per desk (a mark in search_meta).

    Only orders someone else works on get a value: on the others a missing `handedBy` reads as None.
    One pass over every order's requester and owner (4 s at 100,000 orders on the embedded engine, where
    paging by `_id` scanned the collection for every page), then those orders a batch at a time.
    Idempotent, so two processes starting at once both write the same values.
    """
    if await db["search_meta"].find_one({"_id": "handedBy"}):
        return
    started = time.monotonic()
    handed = {
        doc["_id"]: by
        async for doc in db["work_orders"].find({}, {"requesterId": 1, "ownerId": 1})
        if (by := repository.handed_by(doc))
    }
    ids = list(handed)
    for start in range(0, len(ids), batch):
        docs = (
            await db["work_orders"]
            .find({"_id": {"$in": ids[start : start + batch]}}, {"title": 1, "description": 1})
            .to_list()
        )
        marked = [{**doc, "handedBy": handed[doc["_id"]]} for doc in docs]
        await search.stamp(db, marked, "handedBy")  # postings first: a crash in between leaves the order to redo
        await db["work_orders"].bulk_write(
            [UpdateOne({"_id": d["_id"]}, {"$set": {"handedBy": d["handedBy"]}}) for d in marked]
        )
    await db["search_meta"].update_one({"_id": "handedBy"}, {"$set": {"done": True}}, upsert=True)
    if handed:
        log.info("Marked %d work orders as handed to someone else in %.1f s", len(handed), time.monotonic() - started)


async def due(db: AsyncDatabase) -> None:
    """Give orders stored before due dates existed their sort keys (due by no day); once per desk (a mark)."""
    if await db["search_meta"].find_one({"_id": "dueKey"}):
        return
    missing = {"dueKey": {"$exists": False}}
    result = await db["work_orders"].update_many(missing, {"$set": {"dueKey": repository.NO_DUE, "openDue": None}})
    await db["search_meta"].update_one({"_id": "dueKey"}, {"$set": {"done": True}}, upsert=True)
    if result.modified_count:
        log.info("Gave %d work orders their due sort key", result.modified_count)
