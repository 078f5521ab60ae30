"""The `audit_log` collection; the only place that touches it. Append-only: nothing here updates or deletes.

Entries expire a year after they were written (SEC-12), through a TTL index on `at` (on the embedded
engine the purge happens lazily, when the collection is next read: DESIGN §4).
"""

from typing import Any

from bson import ObjectId
from pymongo import DESCENDING
from pymongo.asynchronous.database import AsyncDatabase

Doc = dict[str, Any]
KEPT_SECONDS = 365 * 24 * 3600
COUNT_CAP = 1000  # entries counted before the page says "1,000+"


def _log(db: AsyncDatabase):
    return db["audit_log"]


async def ensure_indexes(db: AsyncDatabase) -> None:
    await _log(db).create_index([("at", DESCENDING)], name="kept_a_year", expireAfterSeconds=KEPT_SECONDS)
    await _log(db).create_index([("action", DESCENDING), ("at", DESCENDING)], name="action_at")
    await _log(db).create_index([("actorId", DESCENDING), ("at", DESCENDING)], name="actor_at")
    await _log(db).create_index([("subjectId", DESCENDING), ("at", DESCENDING)], name="subject_at")


async def append(db: AsyncDatabase, entry: Doc) -> None:
    await _log(db).insert_one(entry)


async def newest_id(db: AsyncDatabase, filter_: Doc) -> ObjectId | None:
    """The id of the newest entry matching `filter_`: one probe of an index, no count."""
    found = await _log(db).find_one(filter_, {"_id": 1}, sort=[("at", DESCENDING), ("_id", DESCENDING)])
    return found["_id"] if found else None


async def page(db: AsyncDatabase, filter_: Doc, *, offset: int, limit: int) -> tuple[list[Doc], int, bool]:
    """Newest first; the count stops at COUNT_CAP + 1 (counting scans on the embedded engine)."""
    cursor = _log(db).find(filter_).sort([("at", DESCENDING), ("_id", DESCENDING)]).skip(offset).limit(limit)
    counted = await _log(db).count_documents(filter_, limit=COUNT_CAP + 1)
    return await cursor.to_list(), min(counted, COUNT_CAP), counted <= COUNT_CAP
