"""Spend: the daily ledger (one atomic $inc per LLM call) and the caps checked before a run and each call.

Keys are `user:<id>:<day>`, `agent:<name>:<day>` and `global:<day>` (UTC days). Checking then
calling can overshoot a cap by at most the one call in flight, as the spec allows; the next start
is refused.
"""

from pymongo import ASCENDING, UpdateOne
from pymongo.asynchronous.database import AsyncDatabase

from desk.config import Settings
from desk.errors import DeskError, ErrorCode
from desk.schema import now


class BudgetExceeded(DeskError):
    code = ErrorCode.AI_BUDGET_EXCEEDED
    default_message = "Today's AI budget is used up. It resets at midnight UTC."


async def ensure_indexes(db: AsyncDatabase) -> None:
    await db["agent_spend"].create_index([("day", ASCENDING)], name="day")


def keys(*, user_id: str | None, agent: str) -> list[str]:
    day = now().date().isoformat()
    found = [f"agent:{agent}:{day}", f"global:{day}"]
    return [f"user:{user_id}:{day}", *found] if user_id else found


async def charge(db: AsyncDatabase, *, user_id: str | None, agent: str, usd: float) -> None:
    """Add one call's cost to every scope it counts against (one round trip, each an atomic $inc)."""
    day = now().date().isoformat()
    ops = [
        UpdateOne({"_id": key}, {"$inc": {"spentUsd": usd}, "$setOnInsert": {"day": day}}, upsert=True)
        for key in keys(user_id=user_id, agent=agent)
    ]
    await db["agent_spend"].bulk_write(ops, ordered=False)


async def spent(db: AsyncDatabase, key: str) -> float:
    doc = await db["agent_spend"].find_one({"_id": key})
    return float(doc["spentUsd"]) if doc else 0.0


async def check(db: AsyncDatabase, settings: Settings, *, user_id: str | None, agent: str) -> None:
    """BudgetExceeded when today's spend reached the user's, the agent's or the global cap."""
    caps = {
        "user": settings.ai_daily_spend_usd,
        "agent": settings.agent_daily_spend_usd,
        "global": settings.ai_global_daily_spend_usd,
    }
    scopes = keys(user_id=user_id, agent=agent)
    found = {doc["_id"]: float(doc["spentUsd"]) async for doc in db["agent_spend"].find({"_id": {"$in": scopes}})}
    for key in scopes:  # one read for every scope: this check sits in front of the model's first token
        scope = key.split(":", 1)[0]
        if found.get(key, 0.0) >= caps[scope]:
            whose = {"user": "your", "agent": "the assistant's", "global": "the desk's"}[scope]
            raise BudgetExceeded(f"Today's AI budget ({whose} daily limit) is used up. It resets at midnight UTC.")
