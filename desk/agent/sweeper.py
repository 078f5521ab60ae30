"""The sweeper (spec §4.5): runs whose lease went stale end as errors; overdue approvals expire."""

from dataclasses import dataclass

from pymongo.asynchronous.database import AsyncDatabase

from desk.agent import approvals, runs
from desk.schema import now


@dataclass(frozen=True)
class Swept:
    stale_runs: int
    expired_approvals: int


async def sweep(db: AsyncDatabase) -> Swept:
    """One pass; safe to run in several workers at once (every move is a conditional update)."""
    expired = await approvals.expire_overdue(db)
    stale = 0
    for run in await runs.stale_runs(db, now()):
        if await runs.finish_run(db, run["_id"], "error", error_code="lease_expired"):
            await approvals.expire_for_run(db, run["_id"])
            if run.get("sessionId"):
                await runs.release_session(db, run["sessionId"], run["_id"])
            stale += 1
    return Swept(stale_runs=stale, expired_approvals=expired)
