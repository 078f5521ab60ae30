"""Idempotency keys of copilot messages (`agent_idempotency`): the first POST with a key wins, a day long."""

from datetime import timedelta

from bson import ObjectId
from pymongo import ASCENDING
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import DuplicateKeyError

from desk.schema import now


async def ensure_indexes(db: AsyncDatabase) -> None:
    await db["agent_idempotency"].create_index([("expiresAt", ASCENDING)], expireAfterSeconds=0, name="ttl")


async def remember_key(db: AsyncDatabase, user_id: ObjectId, key: str, run_id: ObjectId) -> ObjectId | None:
    """Record `key` for `run_id`; returns the earlier run's id when the key was used before.

    A key can be given back (`forget_key`: its message was refused) between our failed insert and
    our read of it; then the key is free and this message tries again. Only a key that keeps being
    taken and given back under us (three times) is refused as a duplicate of this very run.
    """
    for _ in range(3):
        try:
            await db["agent_idempotency"].insert_one(
                {"_id": f"{user_id}:{key}", "runId": run_id, "expiresAt": now() + timedelta(days=1)}
            )
        except DuplicateKeyError:
            earlier = await db["agent_idempotency"].find_one({"_id": f"{user_id}:{key}"})
            if earlier is not None:
                return earlier["runId"]
        else:
            return None
    return run_id


async def forget_key(db: AsyncDatabase, user_id: ObjectId, key: str) -> None:
    await db["agent_idempotency"].delete_one({"_id": f"{user_id}:{key}"})
