"""Approvals (spec §4.6): staging a write with frozen args and a pre-image, the server-rendered diff, decide.

The diff comes only from the frozen arguments and the pre-image, never from model text. Deciding is
one conditional update on a pending approval, so of many concurrent decides exactly one wins.
"""

import re
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from bson import ObjectId
from pymongo.asynchronous.database import AsyncDatabase

from desk import state
from desk.actors import Actor
from desk.agent.copilot import live
from desk.agent.core.events import Diff
from desk.agent.core.models import AgentToolCallRead
from desk.agent.core.store import agent_runs, agent_tool_calls
from desk.errors import Conflict, DeskError, ErrorCode, NotFound
from desk.schema import CONTROL, by_id
from desk.work_orders.models import EDITABLE

SHOWN = (*EDITABLE, "due_at")  # what a person sees of an order is what they may edit on it
CREATE_DEFAULTS = {"description": "", "priority": "medium", "status": "pending"}


class ApprovalExpired(DeskError):
    code = ErrorCode.AI_APPROVAL_EXPIRED
    default_message = "That change can no longer be approved; ask the assistant again."


class ApprovalResolved(Conflict):
    code = ErrorCode.AI_APPROVAL_RESOLVED
    default_message = "This change was already decided."


class ApprovalStale(Conflict):
    code = ErrorCode.AI_APPROVAL_STALE
    default_message = (
        "The work order changed after this change was proposed, so it was proposed again with what it holds "
        "now; decide on that one."
    )


def diff(tool: str, args: dict[str, Any], before: dict[str, Any] | None) -> Diff:
    """Before/after of a staged write: a create shows the new order, a delete the one that will go."""
    if tool == "create_work_order":
        after = {**CREATE_DEFAULTS, **{k: v for k, v in args.items() if k in SHOWN}}
        return Diff(action="create", before=None, after=after, changed=[k for k in SHOWN if k in after])
    if tool == "delete_work_order":
        return Diff(action="delete", before=before, after=None, changed=[k for k in SHOWN if k in (before or {})])
    after = {**(before or {}), **{k: v for k, v in args.items() if k in SHOWN}}  # a null kept in args: emptied
    changed = [k for k in SHOWN if (before or {}).get(k) != after.get(k)]
    return Diff(action="update", before=before, after=after, changed=changed)


async def stage(
    db: AsyncDatabase,
    *,
    record_id: ObjectId,
    run_id: ObjectId,
    user_id: ObjectId,
    tool: str,
    call_id: str,
    args: dict[str, Any],
    pre_image: dict[str, Any] | None,
    version: int | None,
    ttl: timedelta,
) -> dict[str, Any]:
    """Store the proposed write (as `record_id`) with its frozen args and pre-image, waiting for the person."""
    return await agent_tool_calls.insert_tool_call(
        db,
        {
            "_id": record_id,
            "runId": run_id,
            "userId": user_id,
            "tool": tool,
            "callId": call_id,
            "args": args,
            "outcome": "pending",
            "result": None,
            "latencyMs": 0,
            "stagedVersion": version,
            "executedVersion": None,
            "preImage": pre_image,
            "approval": {"status": "pending", "expiresAt": expiry(ttl), "decidedAt": None, "reason": None},
        },
    )


def expiry(ttl: timedelta) -> datetime:
    """When an approval staged now lapses: on the Desk's clock, which every check of it reads (a test moves it)."""
    return state.current().clock.now() + ttl


def clean_reason(reason: str | None) -> str | None:
    """A person's rejection reason as plain, short text (it goes back to the model as data)."""
    if not reason:
        return None
    # What a one-line field refuses (controls, line separators, bidirectional controls), a run of it one
    # space: shown on the runs page, an override would make the reason read otherwise than the model was told.
    return REFUSED_RUNS.sub(" ", reason).strip()[:300] or None


REFUSED_RUNS = re.compile(f"{CONTROL.pattern}+")


async def decide(
    *, db: AsyncDatabase, actor: Actor, tool_call_id: str, approve: bool, reason: str | None = None
) -> AgentToolCallRead:
    """The run's owner approves or rejects a pending write; repeating the same decision is harmless."""
    call = await by_id(tool_call_id, partial(agent_tool_calls.get_tool_call, db))
    if call is None or str(call.get("userId")) != actor.id or call.get("approval") is None:
        raise NotFound("No such change waiting for approval.")
    wanted = "approved" if approve else "rejected"
    moment = state.current().clock.now()
    run = await agent_runs.get_run(db, call["runId"])
    if call["approval"]["status"] == "pending" and (call["approval"]["expiresAt"] <= moment or run is None):
        await _expire(db, call)
        raise ApprovalExpired()
    if run is not None and run["status"] != "running" and call["approval"]["status"] == "pending":
        raise ApprovalExpired("The assistant's run has ended; this change can no longer be approved.")
    fields = {"approval.status": wanted, "approval.decidedAt": moment, "approval.reason": clean_reason(reason)}
    decided = await agent_tool_calls.update_tool_call(db, call["_id"], fields, only_if={"approval.status": "pending"})
    if decided is not None:  # the waiting run wakes: at once in this process, at its next renewal in another
        await live.decided(str(call["_id"]))
        await agent_runs.wake(db, call["runId"], call["_id"])
    else:
        decided = await agent_tool_calls.get_tool_call(db, call["_id"])
        if decided["approval"]["status"] != wanted:
            if decided["approval"]["status"] == "expired":
                raise ApprovalExpired()
            if decided["approval"]["status"] == "stale":  # re-staged with fresh values: point at the new one
                again = await agent_tool_calls.pending_approvals(
                    db, call["runId"]
                )  # none yet, for a moment after it went stale
                newest = max((c["_id"] for c in again), default=None)
                raise ApprovalStale(details={"toolCallId": str(newest)} if newest else None)
            raise ApprovalResolved(f"This change was already {decided['approval']['status']}.")
    return AgentToolCallRead.model_validate(decided)


async def _expire(db: AsyncDatabase, call: dict[str, Any]) -> None:
    await expire_call(db, call["_id"])


async def expire_call(db: AsyncDatabase, call_id: ObjectId) -> dict[str, Any] | None:
    """Expire a pending approval; the call after, or None when a decision (or another expiry) was first."""
    return await agent_tool_calls.update_tool_call(
        db, call_id, {"approval.status": "expired", "outcome": "expired"}, only_if={"approval.status": "pending"}
    )


async def expire_for_run(db: AsyncDatabase, run_id: ObjectId) -> None:
    """A run that ends (aborted, logout, error) leaves no approval pending, and no approved change it never
    made (the person left before it ran) looking as if it still might be: that one's outcome is `aborted`."""
    for call in await agent_tool_calls.pending_approvals(db, run_id):
        await _expire(db, call)
    await agent_tool_calls.abandon_approved(db, run_id)
