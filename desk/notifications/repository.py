"""The `notifications` and `notification_prefs` collections; the only place that touches them.

A notification belongs to one person (`userId`); `shown` says whether it is in their bell (their in-desk
switch for its kind was on), `mail` whether an email is still owed for it ("due", "mailing:<id>" while a mailing
sends it, then "sent"). Preferences are stored as each person's changes to the desk's defaults, which live in the
same collection under "desk".
"""

from datetime import datetime, timedelta
from typing import Any

from bson import ObjectId
from pymongo import ASCENDING, DESCENDING
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import BulkWriteError

Doc = dict[str, Any]
KEEP = timedelta(days=90)  # a bell is news, not an archive: the order's timeline keeps its history
DUPLICATE_KEY = 11000
DESK = "desk"  # the id of the desk's defaults among the people's preferences


def _notes(db: AsyncDatabase):
    return db["notifications"]


def _prefs(db: AsyncDatabase):
    return db["notification_prefs"]


async def ensure_indexes(db: AsyncDatabase) -> None:
    notes = _notes(db)
    await notes.create_index(
        [("userId", ASCENDING), ("shown", ASCENDING), ("read", ASCENDING), ("createdAt", DESCENDING)], name="bell"
    )
    await notes.create_index([("userId", ASCENDING), ("workOrderId", ASCENDING), ("mail", ASCENDING)], name="mail")
    await notes.create_index([("createdAt", ASCENDING)], expireAfterSeconds=int(KEEP.total_seconds()), name="ttl")
    # once per fan-out job, person and kind: a retried fan-out stores nothing twice (notifications stored before
    # fan-outs were jobs have no source, and are left out)
    await notes.create_index(
        [("source", ASCENDING), ("userId", ASCENDING), ("kind", ASCENDING)],
        unique=True,
        partialFilterExpression={"source": {"$exists": True}},
        name="once",
    )


async def insert_once(db: AsyncDatabase, docs: list[Doc]) -> tuple[list[Doc], bool]:
    """Store these notifications in one round trip, those of their source stored already left as they are: the
    ones stored now with their ids, and whether any was there already (a retried fan-out)."""
    if not docs:
        return [], False
    try:
        result = await _notes(db).insert_many(docs, ordered=False)
    except BulkWriteError as error:
        if any(failed.get("code") != DUPLICATE_KEY for failed in error.details.get("writeErrors", [])):
            raise
        # insert_many gave each doc its _id before sending: those that failed are the ones already stored
        refused = {failed["index"] for failed in error.details["writeErrors"]}
        return [doc for index, doc in enumerate(docs) if index not in refused], True
    return [{**doc, "_id": oid} for doc, oid in zip(docs, result.inserted_ids, strict=True)], False


async def of_source(db: AsyncDatabase, source: ObjectId) -> list[Doc]:
    """Every notification one fan-out job stored."""
    return await _notes(db).find({"source": source}).to_list()


def _bell(user_id: ObjectId, *, unread: bool | None = None) -> Doc:
    return {"userId": user_id, "shown": True} | ({"read": False} if unread else {})


async def page(db: AsyncDatabase, user_id: ObjectId, *, unread: bool | None, offset: int, limit: int) -> list[Doc]:
    """A page of a person's bell, newest first."""
    cursor = _notes(db).find(_bell(user_id, unread=unread)).sort([("createdAt", DESCENDING), ("_id", DESCENDING)])
    return await cursor.skip(offset).limit(limit).to_list()


async def count(db: AsyncDatabase, user_id: ObjectId, *, unread: bool | None = None) -> int:
    return await _notes(db).count_documents(_bell(user_id, unread=unread))


async def mark_read(db: AsyncDatabase, user_id: ObjectId, ids: list[ObjectId] | None) -> int:
    """Mark some of a person's notifications read (None: all of them); how many changed."""
    query = _bell(user_id, unread=True) | ({"_id": {"$in": ids}} if ids is not None else {})
    return (await _notes(db).update_many(query, {"$set": {"read": True}})).modified_count


async def claim_mail(db: AsyncDatabase, user_id: ObjectId, order_id: ObjectId, mailing: ObjectId) -> list[Doc]:
    """The notifications of one person about one order still owed an email, oldest first, taken for `mailing`:
    those owed (`due`) and those it took before (a try that failed). Two mailings at once (the first email's
    retry and the digest) never take the same notification, so none is mailed twice."""
    taken = f"mailing:{mailing}"
    mine = {"userId": user_id, "workOrderId": order_id, "mail": taken}
    await _notes(db).update_many({**mine, "mail": "due"}, {"$set": {"mail": taken}})
    return await _notes(db).find(mine).sort([("createdAt", ASCENDING), ("_id", ASCENDING)]).to_list()


async def mark_mailed(db: AsyncDatabase, ids: list[ObjectId], *, at: datetime) -> None:
    await _notes(db).update_many({"_id": {"$in": ids}}, {"$set": {"mail": "sent", "mailedAt": at}})


# Keyed by the person's id as a string, as the desk's defaults are by "desk": one key type in the collection.


async def preferences(db: AsyncDatabase, user_ids: list[ObjectId]) -> tuple[Doc | None, dict[ObjectId, Doc]]:
    """The desk's defaults (None: never set) and these people's own changes, in one read."""
    found = await _prefs(db).find({"_id": {"$in": [DESK, *map(str, user_ids)]}}).to_list()
    desk = next((doc for doc in found if doc["_id"] == DESK), None)
    return desk, {ObjectId(doc["_id"]): doc for doc in found if doc["_id"] != DESK}


async def set_preferences(db: AsyncDatabase, owner: ObjectId | str, switches: dict[str, dict[str, bool]]) -> None:
    """Store some switches ({channel: {kind: on}}) of a person, or of the desk (owner DESK)."""
    fields = {f"{channel}.{kind}": on for channel, kinds in switches.items() for kind, on in kinds.items()}
    if fields:
        await _prefs(db).update_one({"_id": str(owner)}, {"$set": fields}, upsert=True)
