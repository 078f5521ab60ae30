"""One-click unsubscribe tokens (RFC 8058): signed, so they cannot be guessed or changed, and usable with no login.

A token names a person and the kinds of email it turns off. It is signed with a key the desk makes once and keeps in
its database, so the worker that writes the email and the web process that takes the click agree on it whatever
DESK_SECRET is (or is not) set in each.
"""

import base64
import hashlib
import hmac
import json
import secrets

from bson import ObjectId
from pymongo.asynchronous.database import AsyncDatabase

from desk.notifications.models import KINDS, Kind

KEY_ID = "unsubscribe_key"


# The key once read, by database name: it never changes (a restore, which could bring another, runs with the desk
# stopped), so each email's link costs no read. One entry per database the process serves (tests use several).
_KEPT: dict[str, bytes] = {}


async def _key(db: AsyncDatabase) -> bytes:
    """The signing key, made by whichever process needs it first (the upsert keeps the first one made)."""
    if (kept := _KEPT.get(db.name)) is not None:
        return kept
    doc = await db["mail_keys"].find_one({"_id": KEY_ID})
    if doc is None:
        made = secrets.token_urlsafe(32)
        await db["mail_keys"].update_one({"_id": KEY_ID}, {"$setOnInsert": {"key": made}}, upsert=True)
        doc = await db["mail_keys"].find_one({"_id": KEY_ID})
    _KEPT[db.name] = doc["key"].encode()
    return _KEPT[db.name]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


async def token(db: AsyncDatabase, user_id: ObjectId, kinds: list[Kind]) -> str:
    """A token that turns these kinds of email off for this person."""
    body = _b64(json.dumps({"u": str(user_id), "k": sorted(set(kinds))}, separators=(",", ":")).encode())
    return f"{body}.{_b64(hmac.new(await _key(db), body.encode(), hashlib.sha256).digest())}"


async def read(db: AsyncDatabase, value: str) -> tuple[ObjectId, list[Kind]] | None:
    """The person and kinds a token names, or None when it is not one the desk signed."""
    body, _, signature = value.partition(".")
    expected = _b64(hmac.new(await _key(db), body.encode(), hashlib.sha256).digest())
    if not body or not hmac.compare_digest(signature.encode(), expected.encode()):  # bytes: any text, no TypeError
        return None
    try:
        data = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
        user, kinds = ObjectId(data["u"]), [kind for kind in data["k"] if kind in KINDS]
    except (ValueError, KeyError, TypeError):
        return None
    return (user, kinds) if kinds else None
