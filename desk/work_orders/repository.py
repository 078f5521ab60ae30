"""The `work_orders` and `activity` collections; the only place that touches them.

Every write here also moves the counters (desk/work_orders/counters.py) and appends to the
change feed (desk/work_orders/changes.py), so no caller can forget either. A write's timeline entry
(`activity`, made by the service) is stored before the change goes out: a screen told of the
change reads the order's timeline at once, and must find the entry there.
"""

import logging
from collections import Counter
from datetime import UTC, date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from bson import ObjectId
from pymongo import ASCENDING, DESCENDING, ReturnDocument
from pymongo.asynchronous.database import AsyncDatabase

from desk.schema import during, sort_key
from desk.work_orders import changes, counters, outbox, search
from desk.work_orders.models import CLOSED, PRIORITIES, Due

Doc = dict[str, Any]
log = logging.getLogger(__name__)

SORTS: dict[str, list[tuple[str, int]]] = {
    "-createdAt": [("createdAt", DESCENDING), ("_id", DESCENDING)],
    "createdAt": [("createdAt", ASCENDING), ("_id", ASCENDING)],
    "-updatedAt": [("updatedAt", DESCENDING), ("_id", DESCENDING)],
    "updatedAt": [("updatedAt", ASCENDING), ("_id", ASCENDING)],
    "-priority": [("priorityRank", DESCENDING), ("createdAt", DESCENDING), ("_id", DESCENDING)],
    "priority": [("priorityRank", ASCENDING), ("createdAt", DESCENDING), ("_id", DESCENDING)],
    "title": [("titleKey", ASCENDING), ("_id", ASCENDING)],
    "-title": [("titleKey", DESCENDING), ("_id", DESCENDING)],
    "dueAt": [("dueKey", ASCENDING), ("_id", ASCENDING)],
}
# In a due view every order is open, so its `openDue` is its due moment: the view's range and this order are
# one index walk (`open_due`), whatever the desk's size.
DUE_VIEW_SORT = [("openDue", ASCENDING), ("_id", ASCENDING)]
NO_DUE = 2**53  # an order due by no day sorts after every due one (`due_key`)
WEEK = 7  # "week": today and the six days after it


def _orders(db: AsyncDatabase):
    return db["work_orders"]


async def ensure_indexes(db: AsyncDatabase) -> None:
    """The orders', their timeline's and the change feed's indexes (desk/work_orders/startup.py runs this first)."""
    orders = _orders(db)
    await orders.create_index([("createdAt", DESCENDING), ("_id", DESCENDING)], name="created")
    await orders.create_index([("ownerId", ASCENDING), ("createdAt", DESCENDING)], name="owner_created")
    await orders.create_index([("requesterId", ASCENDING), ("createdAt", DESCENDING)], name="requester_created")
    await orders.create_index([("status", ASCENDING), ("createdAt", DESCENDING)], name="status_created")
    await orders.create_index([("priorityRank", DESCENDING), ("createdAt", DESCENDING)], name="priority_created")
    # "Title A-Z" reads an index in its order whatever the filter (a status filter chose status_created
    # and sorted half the desk without status_title: 90 ms at 100,000 orders on the embedded engine).
    await orders.create_index([("titleKey", ASCENDING), ("_id", ASCENDING)], name="title")
    await orders.create_index([("ownerId", ASCENDING), ("titleKey", ASCENDING), ("_id", ASCENDING)], name="owner_title")
    await orders.create_index(
        [("requesterId", ASCENDING), ("titleKey", ASCENDING), ("_id", ASCENDING)], name="requester_title"
    )
    await orders.create_index([("status", ASCENDING), ("titleKey", ASCENDING), ("_id", ASCENDING)], name="status_title")
    # The due views are a range of one field, `openDue` (set on open orders only): a status `$in` beside a
    # person's `$or` of parts was slow on the embedded engine, and no counter can keep "overdue" as time passes.
    await orders.create_index([("openDue", ASCENDING), ("_id", ASCENDING)], name="open_due")
    await orders.create_index([("dueKey", ASCENDING), ("_id", ASCENDING)], name="due")
    await db["activity"].create_index([("workOrderId", ASCENDING), ("at", DESCENDING)], name="order_at")
    await changes.ensure_indexes(db)


def _derived(doc: Doc) -> Doc:
    """Fields kept only for sorting and finding: priority in its natural order, titles as a person reads them,
    who handed the order to someone else (see `seen_by`), its due moment as sorted (none: last) and, while it
    is open, as the due views find it."""
    due = doc.get("dueAt")
    return {
        "priorityRank": PRIORITIES.index(doc["priority"]),
        "titleKey": sort_key(doc["title"]),
        "handedBy": handed_by(doc),
        "dueKey": due_key(due) if due else NO_DUE,
        "openDue": due_key(due) if due and doc["status"] not in CLOSED else None,
    }


def due_key(moment: datetime) -> int:
    """A due moment as the due views find and sort it: milliseconds since 1970. The embedded engine compares
    dates through SQLite's strftime(), which no index serves (a range read every row); a number's range is one
    index seek."""
    return int(moment.timestamp() * 1000)


def due_filter(due: Due, *, now: datetime, zone: str) -> Doc:
    """The open orders of a due view: past their due moment, or due today or in the week from today, days
    counted in the desk's time zone `zone`."""
    if due == "overdue":
        return {"openDue": {"$lt": due_key(now)}}
    today = now.astimezone(ZoneInfo(zone)).date()
    end = today + timedelta(days=1 if due == "today" else WEEK)
    return {"openDue": {"$gte": due_key(local_midnight(today, zone)), "$lt": due_key(local_midnight(end, zone))}}


def local_midnight(day: date, zone: str) -> datetime:
    """Where `day` begins in `zone`, in UTC."""
    return datetime.combine(day, datetime.min.time(), tzinfo=ZoneInfo(zone)).astimezone(UTC)


def handed_by(doc: Doc) -> ObjectId | None:
    """The requester, when someone else (not the queue) works on the order; else None."""
    requester, owner = doc.get("requesterId"), doc.get("ownerId")
    return requester if owner is not None and requester is not None and owner != requester else None


def filters(
    *,
    owner_id: ObjectId | str | None,
    status: str | list[str] | None,
    priority: str | None,
    requester_id: ObjectId | None = None,
) -> Doc:
    """The MongoDB filter for a list request (it also applies to search postings); owner "none" is the queue."""
    found: Doc = {}
    if owner_id == counters.QUEUE:
        found["ownerId"] = None
    elif owner_id is not None:
        found["ownerId"] = owner_id
    if requester_id is not None:
        found["requesterId"] = requester_id
    if isinstance(status, list) and len(status) > 1:
        found["status"] = {"$in": status}
    elif status:
        found["status"] = status[0] if isinstance(status, list) else status
    if priority:
        found["priority"] = priority
    return found


# What a person sees, as disjoint parts with an index range each: a search walks each part's postings on
# its own (search.py), and their counts add up. `handedBy` makes the third part one key: an `$or` or a `$nin`
# over requester and owner would read every order the person asked for, most of which they work on.


def seen_by(person: ObjectId) -> list[Doc]:
    """What a person (not an admin or viewer) sees: what they work on, the queue, what they asked of others."""
    return [{"ownerId": person}, {"ownerId": None}, {"handedBy": person}]


def requested_by(person: ObjectId) -> list[Doc]:
    """What a person asked for, as disjoint parts with an index range each (as in `seen_by`): what they work on
    themselves, what they asked of someone else, what they asked of the queue."""
    return [{"ownerId": person, "requesterId": person}, {"handedBy": person}, {"ownerId": None, "requesterId": person}]


def requested_or_owned(person: ObjectId) -> list[Doc]:
    """A person's own work orders: what they work on, what they asked of others, what they asked of the queue."""
    return [{"ownerId": person}, {"handedBy": person}, {"requesterId": person, "ownerId": None}]


within = search.within  # a list's filter kept to the parts: one definition, for lists and searches alike


def parties(*docs: Doc | None) -> set[str]:
    """Whom a change concerns, for the change feed: requesters and owners, "none" for the queue."""
    found = set()
    for doc in docs:
        if doc is not None:
            found |= {str(doc.get("requesterId") or doc["ownerId"]), counters.owner_key(doc)}
    return found


READ_FIELDS = {"priorityRank": 0, "titleKey": 0, "handedBy": 0, "dueKey": 0, "openDue": 0}


async def insert(db: AsyncDatabase, doc: Doc, *, activity: Doc | None = None, untriaged: str | None = None) -> Doc:
    """Store a new work order (and its timeline's first entry, when given); `untriaged`: why its triage job is
    stored skipped rather than run (the demo seed's history is no new work)."""
    stored = {**doc, **_derived(doc)}
    stored["_id"] = (await _orders(db).insert_one(stored)).inserted_id
    await _timeline(db, stored["_id"], activity)
    await counters.apply(db, None, stored)
    await search.reindex(db, stored["_id"], None, stored)
    await changes.record(db, stored["_id"], "created", parties(stored))
    await outbox.emit_created(db, stored, skip=untriaged)  # AGT-1: every creation path comes through here
    return stored


async def get(db: AsyncDatabase, order_id: ObjectId) -> Doc | None:
    return await _orders(db).find_one({"_id": order_id}, READ_FIELDS)


async def page(db: AsyncDatabase, filter_: Doc, *, sort: str, offset: int, limit: int) -> list[Doc]:
    order = DUE_VIEW_SORT if sort == "dueAt" and "openDue" in filter_ else SORTS[sort]
    cursor = _orders(db).find(filter_, READ_FIELDS).sort(order).skip(offset).limit(limit)
    return await cursor.to_list()


async def count(db: AsyncDatabase, filter_: Doc) -> tuple[int, bool]:
    """How many orders match, counting at most search.CAP + 1 (a filter the counters do not keep)."""
    counted = await _orders(db).count_documents(filter_, limit=search.CAP + 1)
    return min(counted, search.CAP), counted <= search.CAP


async def owner_history(
    db: AsyncDatabase, owner: ObjectId, *, start: datetime, end: datetime | None
) -> dict[str, list]:
    """One person's orders opened, and closed, in [start, end) (no end: from start on), and every time to done of
    theirs (the metrics).

    Reads that person's orders only (owner indexes), so its cost follows their orders, not the desk's.
    """
    mine = {"ownerId": owner}
    opened = _orders(db).find(mine | {"createdAt": during(start, end)}, {"createdAt": 1})
    closed = _orders(db).find(mine | {"closedAt": during(start, end)}, {"closedAt": 1})
    done = _orders(db).find(mine | {"status": "done"}, {"createdAt": 1, "closedAt": 1})
    return {
        "opened": [d["createdAt"] for d in await opened.to_list()],
        "closed": [d["closedAt"] for d in await closed.to_list()],
        "done": [(d["closedAt"] - d["createdAt"]).total_seconds() for d in await done.to_list() if d.get("closedAt")],
    }


async def overdue_by_owner(db: AsyncDatabase, *, now: datetime, owner: str | None = None) -> dict[str, int]:
    """How many open orders are past their due moment at `now`, by owner id ("none": the queue); one owner's
    only when given. Counted here from one index range: the embedded engine's aggregations were wrong."""
    query: Doc = due_filter("overdue", now=now, zone="UTC") | ({"ownerId": ObjectId(owner)} if owner else {})
    found = Counter([counters.owner_key(doc) async for doc in _orders(db).find(query, {"ownerId": 1})])
    return dict(found)


async def search_page(db: AsyncDatabase, q: str, filter_: Doc, parts: list[Doc], *, sort: str, offset: int, limit: int):
    """One page of the work orders within `parts` matching every word of `q`, the match count and if it is exact."""
    ids, total, exact = await search.search(db, q, filter_, SORTS[sort], offset=offset, limit=limit, parts=parts)
    found = {doc["_id"]: doc async for doc in _orders(db).find({"_id": {"$in": ids}}, READ_FIELDS)}
    return [found[oid] for oid in ids if oid in found], total, exact


async def update(
    db: AsyncDatabase, before: Doc, fields: Doc, *, at: datetime, activity: Doc | None = None
) -> Doc | None:
    """Apply `fields` only if the stored version is still `before`'s; None when someone else saved first."""
    merged = {**before, **fields}
    after = await _orders(db).find_one_and_update(
        {"_id": before["_id"], "version": before["version"]},
        {"$set": {**fields, **_derived(merged), "updatedAt": at}, "$inc": {"version": 1}},
        projection=READ_FIELDS,
        return_document=ReturnDocument.AFTER,
    )
    if after is not None:
        await _timeline(db, after["_id"], activity)
        await counters.apply(db, before, after)
        await search.reindex(db, after["_id"], before, {**after, **_derived(after)})
        await changes.record(db, after["_id"], "updated", parties(before, after))
    return after


async def delete(db: AsyncDatabase, order_id: ObjectId, version: int, *, activity: Doc | None = None) -> Doc | None:
    """Delete only at `version`; returns what was deleted, None when the version moved on."""
    gone = await _orders(db).find_one_and_delete({"_id": order_id, "version": version}, projection=READ_FIELDS)
    if gone is not None:
        await _timeline(db, order_id, activity)
        await counters.apply(db, gone, None)
        await search.reindex(db, order_id, gone, None)
        await changes.record(db, order_id, "deleted", parties(gone))
    return gone


async def append_activity(db: AsyncDatabase, entry: Doc) -> None:
    """An entry as it is (the demo's history, written with its own times)."""
    await db["activity"].insert_one(entry)


async def _timeline(db: AsyncDatabase, order_id: ObjectId, entry: Doc | None) -> None:
    if entry is not None:
        await append_activity(db, {**entry, "workOrderId": order_id})


async def activity(
    db: AsyncDatabase, order_id: ObjectId, *, offset: int, limit: int, action: str | None = None
) -> list[Doc]:
    """A page of an order's timeline (or of one kind of its entries), newest first."""
    query = {"workOrderId": order_id} | ({"action": action} if action else {})
    cursor = db["activity"].find(query).sort([("at", DESCENDING), ("_id", DESCENDING)])
    return await cursor.skip(offset).limit(limit).to_list()


async def has_entry(db: AsyncDatabase, entry_id: ObjectId) -> bool:
    """Whether this timeline entry was stored (a write's proof that it was made)."""
    return await db["activity"].find_one({"_id": entry_id}, {"_id": 1}) is not None


async def left_the_queue_last(db: AsyncDatabase, order_id: ObjectId) -> bool:
    """Whether the order's newest change of owner took it from the queue (where anyone could see it)."""
    query = {"workOrderId": order_id, "action": "updated", "after.ownerId": {"$exists": True}}
    entry = await db["activity"].find_one(query, sort=[("at", DESCENDING), ("_id", DESCENDING)])
    return entry is not None and entry["before"].get("ownerId") is None and entry["after"]["ownerId"] is not None


async def comment(db: AsyncDatabase, order: Doc, entry: Doc, *, kind: str = "commented") -> Doc:
    """Add an entry that changes no field (a comment, a file added or removed) to an order's timeline, and tell
    every open screen of the order (`kind`: the change feed's word for it)."""
    entry["_id"] = (await db["activity"].insert_one(entry)).inserted_id
    await changes.record(db, order["_id"], kind, parties(order))
    return entry


async def commenters(db: AsyncDatabase, order_id: ObjectId) -> set[ObjectId]:
    """The people who commented on an order (those who take part in its conversation hear of the next comment)."""
    ids = await db["activity"].distinct("actorId", {"workOrderId": order_id, "action": "commented"})
    return {ObjectId(found) for found in ids if ObjectId.is_valid(found)}
