"""The sweeper (spec §4.5): stale runs end as errors, overdue approvals expire, stuck sessions are freed."""

from dataclasses import dataclass
from typing import Any

from pymongo.asynchronous.database import AsyncDatabase

from desk import state
from desk.agent.copilot import approvals
from desk.agent.core.store import agent_runs, agent_tool_calls, copilot_sessions
from desk.clock import Clock
from desk.schema import now


@dataclass(frozen=True)
class Swept:
    stale_runs: int
    expired_approvals: int
    freed_sessions: int = 0


async def sweep(db: AsyncDatabase, *, clock: Clock | None = None) -> Swept:
    """One pass; safe to run in several workers at once (every move is a conditional update, counted once).

    Approvals lapse on `clock` (the Desk's unless given): the one `approvals` and a waiting run read.
    """
    expired = 0
    for call in await agent_tool_calls.overdue_approvals(db, (clock or state.current().clock).now()):
        expired += await _expire_approval(db, call)
    stale = 0
    for run in await agent_runs.stale_runs(db, now()):
        if await agent_runs.finish_run(db, run["_id"], "error", error_code="lease_expired"):
            await approvals.expire_for_run(db, run["_id"])
            await _release(db, run)
            stale += 1
    return Swept(stale_runs=stale, expired_approvals=expired, freed_sessions=await _free_stuck_sessions(db))


async def _free_stuck_sessions(db: AsyncDatabase) -> int:
    """Free sessions held for longer than a run's lease by a run that was never stored or has ended.

    The runtime stores a run while its first model call streams, so a process that dies right after
    claiming the session leaves a claim with no run for the sweep above to find; one that dies
    between ending its run and letting go (say, after a logout ended it) leaves a claim by a run
    that is over. Either would keep the person out of their conversation for good.
    """
    freed = 0
    for session in await copilot_sessions.claimed_before(db, now() - copilot_sessions.CLAIM_GRACE):
        run_id = session.get("runningRunId")
        run = await agent_runs.get_run(db, run_id) if run_id else None
        if run_id and (run is None or run["status"] != "running"):
            await copilot_sessions.release_session(db, session["_id"], run_id)
            freed += 1
    return freed


async def _expire_approval(db: AsyncDatabase, call: dict[str, Any]) -> bool:
    """Expire one overdue approval and then its run; False when another sweep or a decision got there first.

    Counting only our own moves keeps concurrent sweeps from double-counting, and the run ends only
    when its approval really expired here.
    """
    moved = await agent_tool_calls.update_tool_call(
        db, call["_id"], {"approval.status": "expired", "outcome": "expired"}, only_if={"approval.status": "pending"}
    )
    if moved is None:
        return False
    if await agent_runs.finish_run(db, call["runId"], "expired"):
        await approvals.expire_for_run(db, call["runId"])
        # a run whose process died would otherwise hold its session forever (no new message, no new session)
        await _release(db, await agent_runs.get_run(db, call["runId"]))
    return True


async def _release(db: AsyncDatabase, run: dict[str, Any] | None) -> None:
    if run is not None and run.get("sessionId"):
        await copilot_sessions.release_session(db, run["sessionId"], run["_id"])
