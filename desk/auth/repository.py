"""Sessions, API tokens and rate-limit counters; the only place that touches their collections."""

from datetime import datetime, timedelta
from typing import Any

from bson import ObjectId
from pymongo import ASCENDING, DESCENDING, ReturnDocument
from pymongo.asynchronous.collection import AsyncCollection
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import DuplicateKeyError

from desk.actors import SCOPES, Role, scopes_of
from desk.schema import now
from desk.users import repository as users_repo

Doc = dict[str, Any]
LEGACY_TOKEN_DAYS = 90
EXPIRED_KEPT = 30 * 24 * 3600  # seconds an expired token stays listed (as "Expired") before the database drops it


async def ensure_indexes(db: AsyncDatabase) -> None:
    await db["sessions"].create_index([("userId", ASCENDING)], name="user")
    await db["sessions"].create_index([("expiresAt", ASCENDING)], expireAfterSeconds=0, name="ttl")
    await db["api_tokens"].create_index([("hash", ASCENDING)], unique=True, name="hash_unique")
    await db["api_tokens"].create_index([("userId", ASCENDING), ("createdAt", DESCENDING)], name="user")
    # an expired token is refused at once, and listed as "Expired" for a while before it goes
    await db["api_tokens"].create_index([("expiresAt", ASCENDING)], expireAfterSeconds=EXPIRED_KEPT, name="ttl")
    await db["rate_limits"].create_index([("expiresAt", ASCENDING)], expireAfterSeconds=0, name="ttl")
    await db["login_tickets"].create_index([("expiresAt", ASCENDING)], expireAfterSeconds=0, name="ttl")
    await _backfill_token_limits(db)


async def _backfill_token_limits(db: AsyncDatabase) -> None:
    """Tokens made before tokens had limits keep what they could do (read and write, admin for an admin's) and
    last LEGACY_TOKEN_DAYS from this start, so no script stops at the upgrade and none runs forever."""
    pipeline = [{"$match": {"expiresAt": {"$exists": False}}}, users_repo.lookup_by_id("userId", into="user")]
    expires_at = now() + timedelta(days=LEGACY_TOKEN_DAYS)
    for doc in await (await db["api_tokens"].aggregate(pipeline)).to_list():
        role = Role(doc["user"][0]["role"]) if doc["user"] else Role.VIEWER  # an owner gone: its token is refused
        scopes = [scope for scope in SCOPES if scope in scopes_of(role)]
        query = {"_id": doc["_id"], "expiresAt": {"$exists": False}}  # a process starting beside this one did it
        await db["api_tokens"].update_one(query, {"$set": {"scopes": scopes, "expiresAt": expires_at}})


# Sessions: the id is the sha256 of the cookie's secret, so a leaked database holds no usable cookie.


async def insert_session(db: AsyncDatabase, doc: Doc) -> None:
    await db["sessions"].insert_one(doc)


async def get_session_and_user(db: AsyncDatabase, session_hash: str) -> tuple[Doc, Doc | None] | None:
    """The session and the user it belongs to, as they are now, in one round trip (None: no such session)."""
    return await _with_user(db["sessions"], {"_id": session_hash})


async def _with_user(collection: AsyncCollection, query: Doc) -> tuple[Doc, Doc | None] | None:
    """The one document matching `query` and the stored user its `userId` names (None when it has gone)."""
    pipeline = [{"$match": query}, {"$limit": 1}, users_repo.lookup_by_id("userId", into="user")]
    found = await (await collection.aggregate(pipeline)).to_list()
    if not found:
        return None
    doc = found[0]
    users = doc.pop("user")
    return doc, users[0] if users else None


async def touch_session(db: AsyncDatabase, session_hash: str, *, seen_at: datetime, idle_until: datetime) -> None:
    await db["sessions"].update_one(
        {"_id": session_hash}, {"$set": {"lastSeenAt": seen_at, "idleExpiresAt": idle_until}}
    )


async def delete_session(db: AsyncDatabase, session_hash: str) -> Doc | None:
    return await db["sessions"].find_one_and_delete({"_id": session_hash})


async def delete_user_sessions(db: AsyncDatabase, user_id: ObjectId, *, keep: str | None = None) -> int:
    query: Doc = {"userId": user_id}
    if keep:
        query["_id"] = {"$ne": keep}
    return (await db["sessions"].delete_many(query)).deleted_count


# Login tickets: a page's login hands the browser one, which an HTTP request turns into a session cookie.


async def insert_login_ticket(db: AsyncDatabase, doc: Doc) -> None:
    await db["login_tickets"].insert_one(doc)


async def take_login_ticket(db: AsyncDatabase, ticket_hash: str, *, browser: str, moment: datetime) -> Doc | None:
    """The unexpired ticket of this browser, deleted as it is read: it works once."""
    query = {"_id": ticket_hash, "browser": browser, "expiresAt": {"$gt": moment}}
    return await db["login_tickets"].find_one_and_delete(query)


# Personal API tokens


async def insert_token(db: AsyncDatabase, doc: Doc) -> Doc:
    result = await db["api_tokens"].insert_one(doc)
    return {**doc, "_id": result.inserted_id}


async def get_token_and_user(db: AsyncDatabase, token_hash: str) -> tuple[Doc, Doc | None] | None:
    """The API token and the user it belongs to, as they are now, in one round trip (None: no such token)."""
    return await _with_user(db["api_tokens"], {"hash": token_hash})


async def list_tokens(db: AsyncDatabase, user_id: ObjectId) -> list[Doc]:
    return await db["api_tokens"].find({"userId": user_id}).sort("createdAt", DESCENDING).to_list(100)


async def touch_token(db: AsyncDatabase, token_id: ObjectId, *, used_at: datetime) -> None:
    await db["api_tokens"].update_one({"_id": token_id}, {"$set": {"lastUsedAt": used_at}})


async def delete_token(
    db: AsyncDatabase, token_id: ObjectId, user_id: ObjectId, *, token_hash: str | None = None
) -> Doc | None:
    """The token as it was, or None when the user has no such token (with `token_hash`: none with that hash)."""
    query: Doc = {"_id": token_id, "userId": user_id} | ({"hash": token_hash} if token_hash is not None else {})
    return await db["api_tokens"].find_one_and_delete(query)


async def has_token(db: AsyncDatabase, token_id: ObjectId, user_id: ObjectId) -> bool:
    return await db["api_tokens"].find_one({"_id": token_id, "userId": user_id}, {"_id": 1}) is not None


async def delete_user_tokens(db: AsyncDatabase, user_id: ObjectId) -> int:
    return (await db["api_tokens"].delete_many({"userId": user_id})).deleted_count


# Fixed-window rate-limit counters, shared by every web process.


async def hit(db: AsyncDatabase, key: str, *, window_end: datetime) -> int:
    """Count one hit on `key` in the window that ends at `window_end`; returns the count so far."""
    doc = await db["rate_limits"].find_one_and_update(
        {"_id": f"{key}@{window_end.isoformat()}"},
        {"$inc": {"n": 1}, "$setOnInsert": {"expiresAt": window_end + timedelta(minutes=1)}},
        upsert=True,
        return_document=ReturnDocument.AFTER,
    )
    return doc["n"]


async def unhit(db: AsyncDatabase, key: str, *, window_end: datetime) -> None:
    """Take back one hit counted on `key` in that window (a login whose password was right)."""
    await db["rate_limits"].update_one({"_id": f"{key}@{window_end.isoformat()}", "n": {"$gt": 0}}, {"$inc": {"n": -1}})


# Login delays per (address, email typed), failures per account, and writes per person, in the same collection:
# each document is one key's state, and expires with it.


async def get_limit(db: AsyncDatabase, key: str) -> Doc | None:
    return await db["rate_limits"].find_one({"_id": key})


async def swap(db: AsyncDatabase, key: str, *, seen: int, state: Doc) -> bool:
    """Store `state` as `key`'s if it is still at version `seen` (0: no document yet), as version `seen + 1`.

    A compare-and-set: of two requests that read the same version, one stores, the other is told False.
    """
    new = {**state, "v": seen + 1}
    if seen == 0:
        try:
            await db["rate_limits"].insert_one({"_id": key, **new})
        except DuplicateKeyError:
            return False
        return True
    return (await db["rate_limits"].update_one({"_id": key, "v": seen}, {"$set": new})).modified_count == 1


async def add_time(
    db: AsyncDatabase, key: str, *, at: datetime, since: datetime, keep: int, expires_at: datetime
) -> bool:
    """Append `at` to `key`'s times, keeping the newest `keep`, if fewer than `keep` of them are after `since`.

    One conditional update, so of writes sent together no more get in than there is room for. False when
    the room is full, or `key` has no document yet (`start_times`).
    """
    within = {"$size": {"$filter": {"input": "$at", "cond": {"$gt": ["$$this", since]}}}}
    # $and, not a sibling of _id: the embedded engine drops the fields beside a top-level $expr
    room = {"$and": [{"_id": key}, {"$expr": {"$lt": [within, keep]}}]}
    add = {"$push": {"at": {"$each": [at], "$slice": -keep}}, "$set": {"expiresAt": expires_at}}
    return (await db["rate_limits"].update_one(room, add)).matched_count == 1  # no upsert: MongoDB refuses $expr in one


async def start_times(db: AsyncDatabase, key: str, *, at: datetime, expires_at: datetime) -> bool:
    """Start `key`'s times with `at`; False when it already has a document."""
    try:
        await db["rate_limits"].insert_one({"_id": key, "at": [at], "expiresAt": expires_at})
    except DuplicateKeyError:
        return False
    return True


async def forget(db: AsyncDatabase, key: str) -> None:
    await db["rate_limits"].delete_one({"_id": key})


async def add_failure(db: AsyncDatabase, key: str, *, entry: Doc, keep: int, expires_at: datetime) -> list[Doc]:
    """Append one failure to `key`'s newest `keep`; returns them, oldest first."""
    doc = await db["rate_limits"].find_one_and_update(
        {"_id": key},
        {"$push": {"failures": {"$each": [entry], "$slice": -keep}}, "$set": {"expiresAt": expires_at}},
        upsert=True,
        return_document=ReturnDocument.AFTER,
    )
    return doc["failures"]
