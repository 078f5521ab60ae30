"""The `users` collection; the only place that touches it."""

import contextlib
import re
from datetime import datetime
from typing import Any

from bson import ObjectId
from pymongo import ASCENDING, DESCENDING, ReturnDocument
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import OperationFailure

from desk.schema import sort_key

# The names sorted by code point ("priya" after "Sam", "Élodie" after "Zoe") until `nameKey` took over.
OLD_BY_NAME = [("name", ASCENDING), ("_id", ASCENDING)]

Doc = dict[str, Any]


def _users(db: AsyncDatabase):
    return db["users"]


async def ensure_indexes(db: AsyncDatabase) -> None:
    await _users(db).create_index([("email", ASCENDING)], unique=True, name="email_unique")
    await _users(db).create_index([("createdAt", DESCENDING)], name="created")
    await _users(db).create_index([("nameKey", ASCENDING), ("_id", ASCENDING)], name="by_name_key")
    for name, spec in (await _users(db).index_information()).items():  # the embedded engine names indexes itself
        if spec["key"] == OLD_BY_NAME:
            with contextlib.suppress(OperationFailure):  # another process starting beside this one dropped it first
                await _users(db).drop_index(name)
    await _backfill_name_keys(db)


async def _backfill_name_keys(db: AsyncDatabase) -> None:
    """Give people stored before `nameKey` existed theirs (a desk has hundreds: one pass at start-up)."""
    async for doc in _users(db).find({"nameKey": {"$exists": False}}, {"name": 1}):
        await _users(db).update_one({"_id": doc["_id"]}, {"$set": {"nameKey": sort_key(doc["name"])}})


async def insert(db: AsyncDatabase, doc: Doc) -> Doc:
    """Store a new user; raises DuplicateKeyError when the email is taken."""
    doc = {**doc, "nameKey": sort_key(doc["name"])}
    result = await _users(db).insert_one(doc)
    return {**doc, "_id": result.inserted_id}


async def get(db: AsyncDatabase, user_id: ObjectId) -> Doc | None:
    return await _users(db).find_one({"_id": user_id})


async def ai_switches(db: AsyncDatabase, user_ids: list[ObjectId]) -> list[Doc]:
    """The `aiEnabled` of those of these people still stored, in one read (no password hash comes along)."""
    return await _users(db).find({"_id": {"$in": user_ids}}, {"aiEnabled": 1}).to_list() if user_ids else []


async def contacts(db: AsyncDatabase, user_ids: list[ObjectId]) -> list[Doc]:
    """Name, email, role and whether active, of those of these people still stored, in one read (notifications)."""
    shown = {"name": 1, "email": 1, "role": 1, "active": 1}
    return await _users(db).find({"_id": {"$in": user_ids}}, shown).to_list() if user_ids else []


async def active_admins(db: AsyncDatabase) -> list[ObjectId]:
    """The ids of every active admin (whom the triage agent's flags may concern)."""
    return [doc["_id"] async for doc in _users(db).find({"role": "admin", "active": {"$ne": False}}, {"_id": 1})]


def lookup_by_id(local_field: str, *, into: str) -> Doc:
    """An aggregation stage that puts the user whose id is in `local_field` into `into` (a list of 0 or 1)."""
    return {"$lookup": {"from": "users", "localField": local_field, "foreignField": "_id", "as": into}}


async def get_by_email(db: AsyncDatabase, email: str) -> Doc | None:
    return await _users(db).find_one({"email": email})


async def names(db: AsyncDatabase, ids: list[ObjectId]) -> dict[str, str]:
    """Display names by id string, for the ids given."""
    cursor = _users(db).find({"_id": {"$in": ids}}, {"name": 1})
    return {str(doc["_id"]): doc["name"] async for doc in cursor}


async def count(db: AsyncDatabase) -> int:
    return await _users(db).count_documents({})


async def page(db: AsyncDatabase, *, offset: int, limit: int) -> list[Doc]:
    cursor = _users(db).find({}).sort([("createdAt", DESCENDING), ("_id", DESCENDING)]).skip(offset).limit(limit)
    return await cursor.to_list()


def containing(q: str | None) -> Doc:
    """People whose name or email contains `q`, in any case (a desk has hundreds of people: a scan is fine)."""
    if not q:
        return {}
    pattern = {"$regex": re.escape(q), "$options": "i"}
    return {"$or": [{"name": pattern}, {"email": pattern}]}


async def page_by_name(db: AsyncDatabase, filter_: Doc, *, offset: int, limit: int) -> tuple[list[Doc], int]:
    """A page of people sorted by name as a person reads it (any case, any accents), and how many match."""
    cursor = _users(db).find(filter_).sort([("nameKey", ASCENDING), ("_id", ASCENDING)]).skip(offset).limit(limit)
    return await cursor.to_list(), await _users(db).count_documents(filter_)


async def record_login(db: AsyncDatabase, user_id: ObjectId, *, at: datetime) -> Doc | None:
    """Note the login; the user as it is now (None: no such user)."""
    return await _users(db).find_one_and_update(
        {"_id": user_id}, {"$set": {"lastLoginAt": at}}, return_document=ReturnDocument.AFTER
    )


async def update(db: AsyncDatabase, user_id: ObjectId, fields: Doc) -> Doc | None:
    if "name" in fields:
        fields = {**fields, "nameKey": sort_key(fields["name"])}
    return await _users(db).find_one_and_update(
        {"_id": user_id}, {"$set": fields}, return_document=ReturnDocument.AFTER
    )


async def record_failed_login(db: AsyncDatabase, user_id: ObjectId) -> None:
    """Count a failed login (since the last right password); it locks nothing by itself (desk/auth/throttle.py)."""
    await _users(db).update_one({"_id": user_id}, {"$inc": {"failedLoginCount": 1}})


async def lock(db: AsyncDatabase, user_id: ObjectId, *, until: datetime, moment: datetime) -> Doc | None:
    """Lock the account until `until` unless it is locked at `moment` already; the user locked, None if it was."""
    unlocked = {"$or": [{"lockedUntil": None}, {"lockedUntil": {"$lte": moment}}]}
    return await _users(db).find_one_and_update(
        {"_id": user_id, **unlocked}, {"$set": {"lockedUntil": until}}, return_document=ReturnDocument.AFTER
    )


async def clear_failed_logins(db: AsyncDatabase, user_id: ObjectId) -> Doc | None:
    """Forget the failed logins and lift the lock; the user as they were before (None: no such user)."""
    return await _users(db).find_one_and_update({"_id": user_id}, {"$set": UNLOCKED})


UNLOCKED = {"failedLoginCount": 0, "lockedUntil": None}
