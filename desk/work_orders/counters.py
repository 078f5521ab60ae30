"""Counters kept up to date on every write, so list totals and metrics never scan the collection.

Each work order adds 1 to the totals of every filter combination it matches (owner x status x
priority, each either fixed or "*"; the owner "none" is the unassigned queue), and, when someone
other than its requester works on it, to its requester's "handed" totals (status x priority): a
person's scope (owned + queue + requested from others) is then three disjoint counters. It also
adds 1 to the day it was opened and, once closed, the day it closed, and its time to done to a
running sum. A write applies the difference between the document before and after it, so create,
update, delete and the seed all keep the counters right.
"""

from collections import Counter
from datetime import datetime
from itertools import product
from typing import Any

from pymongo import UpdateOne
from pymongo.asynchronous.database import AsyncDatabase

Doc = dict[str, Any]
ANY = "*"
QUEUE = "none"  # the owner of an unassigned order, in keys and in the list filter


def total_key(owner: str | None = None, status: str | None = None, priority: str | None = None) -> str:
    return f"wo:o={owner or ANY}:s={status or ANY}:p={priority or ANY}"


def handed_key(requester: str, status: str | None = None, priority: str | None = None) -> str:
    """Orders `requester` asked for that someone else (not the queue) works on."""
    return f"wo:r={requester}:s={status or ANY}:p={priority or ANY}"


def queued_key(requester: str, status: str | None = None, priority: str | None = None) -> str:
    """Orders `requester` asked for that wait in the queue (nobody works on them yet)."""
    return f"wo:q={requester}:s={status or ANY}:p={priority or ANY}"


def owner_key(doc: Doc) -> str:
    return str(doc["ownerId"]) if doc.get("ownerId") else QUEUE


def day_key(kind: str, moment: datetime) -> str:
    return f"{kind}:{moment.date().isoformat()}"


def contributions(doc: Doc | None) -> Counter:
    """What one stored work order adds to the counters."""
    found: Counter = Counter()
    if doc is None:
        return found
    owners, statuses, priorities = (owner_key(doc), None), (doc["status"], None), (doc["priority"], None)
    for owner, status, priority in product(owners, statuses, priorities):
        found[total_key(owner, status, priority)] += 1
    requester = str(doc.get("requesterId") or doc["ownerId"])  # an order from before requesters asked for itself
    if owners[0] not in (QUEUE, requester):
        for status, priority in product(statuses, priorities):
            found[handed_key(requester, status, priority)] += 1
    if owners[0] == QUEUE:
        for status, priority in product(statuses, priorities):
            found[queued_key(requester, status, priority)] += 1
    found[day_key("opened", doc["createdAt"])] += 1
    if doc.get("closedAt"):
        found[day_key("closed", doc["closedAt"])] += 1
    if doc["status"] == "done" and doc.get("closedAt"):
        found["done:count"] += 1
        found["done:seconds"] += round((doc["closedAt"] - doc["createdAt"]).total_seconds())
    return found


async def apply(db: AsyncDatabase, before: Doc | None, after: Doc | None) -> None:
    """Move the counters from `before` to `after` in one round trip."""
    delta = contributions(after)
    delta.subtract(contributions(before))
    ops = [UpdateOne({"_id": key}, {"$inc": {"n": n}}, upsert=True) for key, n in delta.items() if n]
    if ops:
        await db["counters"].bulk_write(ops, ordered=False)


async def read(db: AsyncDatabase, keys: list[str]) -> dict[str, int]:
    """Counter values by key; a key never written reads 0."""
    found = {doc["_id"]: doc["n"] async for doc in db["counters"].find({"_id": {"$in": keys}})}
    return {key: int(found.get(key, 0)) for key in keys}


async def rebuild(db: AsyncDatabase) -> None:
    """Recompute every work-order counter from the documents (repair after a crash between writes)."""
    totals: Counter = Counter()
    async for doc in db["work_orders"].find(
        {}, {"ownerId": 1, "requesterId": 1, "status": 1, "priority": 1, "createdAt": 1, "closedAt": 1}
    ):
        totals.update(contributions(doc))
    await db["counters"].delete_many({"_id": {"$ne": "changes:seq"}})
    if totals:
        await db["counters"].bulk_write(
            [UpdateOne({"_id": k}, {"$set": {"n": n}}, upsert=True) for k, n in totals.items()]
        )
