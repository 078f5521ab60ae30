"""One triage pass (AGT-4, AGT-6, AGT-7): read the order, one forced tool call, a suggestion, maybe an apply.

The pass checks, in order, what could make it stop (the kill switch, the order, the person's AI
switch, the budget) before anything costs money, and again before anything it does lands: the
switch and the lease before the model call and before applying, the person's switch before
applying (SEC-8). Every pass that reaches the model is an AgentRun with its messages, its tool
call, its tokens and how it ended (SEC-11).
"""

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal

from bson import ObjectId
from pydantic import ValidationError
from pymongo.asynchronous.database import AsyncDatabase

from desk.actors import SYSTEM_TRIAGE
from desk.agent import budget, policy, runs
from desk.agent.provider import AIUnavailable, Completed, Provider, Usage
from desk.agent.triage import prompt
from desk.agent.triage import repository as repo
from desk.agent.triage.models import TriageProposal
from desk.config import Settings
from desk.logs import tag
from desk.work_orders import service as work_orders
from desk.work_orders.models import PRIORITIES

log = logging.getLogger(__name__)
AGENT = policy.AGENT
Kind = Literal["suggested", "applied", "skipped", "disabled", "over_budget", "retry", "lost"]


@dataclass(frozen=True)
class Outcome:
    """How a pass ended. `retry`: a failed attempt (the worker decides when, or whether, to try again)."""

    kind: Kind
    run_id: ObjectId | None = None
    suggestion: dict[str, Any] | None = None
    error: str | None = None


StillOurs = Callable[[], Awaitable[bool]]


async def always_ours() -> bool:
    """A manual pass holds no lease: nothing can take it away."""
    return True


async def triage(
    *,
    db: AsyncDatabase,
    settings: Settings,
    provider: Provider,
    order_id: str,
    still_ours: StillOurs = always_ours,
    event_id: ObjectId | None = None,
    triggered_by: str | None = None,
) -> Outcome:
    """One pass over one work order, under the policy stored now."""
    if not settings.ai_enabled or not (await policy.current(db, settings))["enabled"]:
        return Outcome("disabled")
    target = await work_orders.triage_read(db=db, actor=SYSTEM_TRIAGE, order_id=order_id)
    if target is None:
        return Outcome("skipped", error="order_deleted")
    if not target.ai_allowed:
        return Outcome("skipped", error="ai_disabled_for_owner")
    try:
        await budget.check(db, settings, user_id=None, agent=AGENT)
    except budget.BudgetExceeded:
        return Outcome("over_budget")
    order = target.order.model_dump()
    messages = prompt.messages(order)
    run = _new_run(settings, order_id=order["id"], event_id=event_id, triggered_by=triggered_by)
    await runs.insert_run(db, run)
    tag(runId=str(run["_id"]))  # each pass runs in its own task: its log lines name its run
    for message in messages:
        await runs.add_message(db, {"runId": run["_id"], "sessionId": None, **message})
    pass_ = _Pass(db=db, settings=settings, provider=provider, run=run, still_ours=still_ours)
    return await pass_.go(order, messages, event_id)


def _new_run(settings: Settings, *, order_id: str, event_id: ObjectId | None, triggered_by: str | None) -> dict:
    lease = timedelta(milliseconds=settings.agent_lease_ms)
    run = runs.new_run(session_id=None, user_id=None, mode="autonomous", model=settings.ai_model, lease=lease)
    return {
        **run,
        "agentName": AGENT,
        "workOrderId": ObjectId(order_id),
        "eventId": event_id,
        "triggeredBy": triggered_by,  # an admin's id for a manual run, None for the outbox
    }


@dataclass
class _Pass:
    db: AsyncDatabase
    settings: Settings
    provider: Provider
    run: dict
    still_ours: StillOurs
    config: dict | None = None  # the policy as read just before applying

    @property
    def run_id(self) -> ObjectId:
        return self.run["_id"]

    async def go(self, order: dict, messages: list[dict], event_id: ObjectId | None) -> Outcome:
        if not (await policy.current(self.db, self.settings))["enabled"]:  # the switch, before the model call
            return await self._end("aborted", Outcome("disabled", self.run_id), code="disabled")
        started = time.monotonic()
        try:
            completed = await self._call(messages)
        except AIUnavailable as failure:
            await self._bill(failure.usage)
            return await self._end("error", Outcome("retry", self.run_id, error=f"provider_{failure.kind}"))
        except _LeaseLost:
            return await self._end("aborted", Outcome("lost", self.run_id), code="lease_lost")
        await self._bill(completed.usage)
        return await self._answer(order, completed, int((time.monotonic() - started) * 1000), event_id)

    async def _answer(self, order: dict, completed: Completed, latency: int, event_id: ObjectId | None) -> Outcome:
        """What the model proposed: invalid (a failed attempt), or a suggestion, stored only while ours."""
        proposal, call = _proposal(completed)
        if proposal is None:
            await self._record_call(call, outcome="invalid", latency=latency)
            return await self._end("error", Outcome("retry", self.run_id, error="invalid_output"))
        if not await self.still_ours():
            await self._record_call(call, outcome="aborted", latency=latency)
            return await self._end("aborted", Outcome("lost", self.run_id), code="lease_lost")
        suggestion = await self._suggest(order, proposal, event_id)
        if suggestion is None:  # an earlier pass stored this event's suggestion: it died, or slept, before the ack
            earlier = await repo.unsettled(self.db, event_id) if event_id is not None else None
            await self._record_call(call, outcome="aborted", latency=latency, result=_about(earlier))
            if earlier is None:
                return await self._end("aborted", Outcome("lost", self.run_id), code="duplicate")
            # we hold the event now: finish what that pass left (its apply), against the order it read
            order, suggestion = {**order, "priority": earlier["priorityBefore"]}, earlier
        else:
            await self._record_call(call, outcome="ok", latency=latency, result=_about(suggestion))
        suggestion = await self._maybe_apply(order, suggestion)
        kind = "applied" if suggestion["applied"] else "suggested"
        return await self._end("complete", Outcome(kind, self.run_id, suggestion))

    async def _call(self, messages: list[dict]) -> Completed:
        """The one model call, the lease renewed meanwhile; losing the lease cancels the call."""
        call = asyncio.create_task(self._stream(messages))
        keeper = asyncio.create_task(self._keep_lease(call))
        try:
            return await call
        except asyncio.CancelledError:
            if keeper.done() and not keeper.cancelled() and keeper.result() is False:
                raise _LeaseLost from None
            raise
        finally:
            keeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await keeper

    async def _stream(self, messages: list[dict]) -> Completed:
        async with contextlib.aclosing(
            self.provider.stream(messages, [prompt.TOOL], tool_choice=prompt.TOOL_CHOICE)
        ) as events:
            async for event in events:
                if isinstance(event, Completed):
                    return event
        raise AIUnavailable(kind="no_completion")

    async def _keep_lease(self, call: asyncio.Task) -> bool:
        every = self.settings.agent_lease_ms / 3000
        lease = timedelta(milliseconds=self.settings.agent_lease_ms)
        while True:
            await asyncio.sleep(every)
            if not await self.still_ours():
                call.cancel()
                return False
            await runs.renew_lease(self.db, self.run_id, lease)

    async def _bill(self, usage: Usage) -> None:
        """A call made is a call paid (spec §4.7): to `agent:triage` and `global`, and to the run."""
        cost = self.provider.cost(usage)
        used = {"inputTokens": usage.input_tokens, "outputTokens": usage.output_tokens, "costUsd": cost}
        await asyncio.shield(
            asyncio.gather(
                budget.charge(self.db, user_id=None, agent=AGENT, usd=cost),
                runs.record_usage(self.db, self.run_id, used),
            )
        )

    async def _suggest(self, order: dict, proposal: TriageProposal, event_id: ObjectId | None) -> dict | None:
        config = await policy.current(self.db, self.settings)
        rank = PRIORITIES.index
        flagged = proposal.flagForDispatcher or rank(proposal.suggestedPriority) >= rank(config["flagThreshold"])
        doc = {
            "workOrderId": ObjectId(order["id"]),
            "runId": self.run_id,
            "summary": proposal.summary,
            "suggestedPriority": proposal.suggestedPriority,
            "flagForDispatcher": proposal.flagForDispatcher,
            "flagged": flagged,
            "priorityBefore": order["priority"],
            "applied": False,
            "appliedNote": None,
            "decision": None,
            "decidedBy": None,
            "decidedAt": None,
            "decidedDay": None,
        }
        if event_id is not None:
            doc["eventId"] = event_id
        return await repo.insert(self.db, doc)

    async def _maybe_apply(self, order: dict, suggestion: dict) -> dict:
        """Auto-apply mode: the suggested priority through triage_patch, unless a check says no (then noted)."""
        note = await self._why_not_apply(order, suggestion)
        if note is None:
            changed = await work_orders.triage_patch(
                db=self.db,
                actor=SYSTEM_TRIAGE,
                order_id=order["id"],
                changes={"priority": suggestion["suggestedPriority"]},
                allowed=frozenset(self.config["allowedFields"] if self.config else ()),
                run_id=str(self.run_id),
            )
            note = None if changed is not None else "dropped"
        if note == "not_auto":
            return suggestion
        if note == "lease_lost":  # left as it is for the pass that holds the event now, which applies it
            return {**suggestion, "appliedNote": note}
        fields = {"applied": note is None, "appliedNote": note}
        return await repo.mark(self.db, suggestion["_id"], fields) or {**suggestion, **fields}

    async def _why_not_apply(self, order: dict, suggestion: dict) -> str | None:
        self.config = config = await policy.current(self.db, self.settings)  # the switch, before applying
        if note := _policy_says(config, order, suggestion):
            return note
        target = await work_orders.triage_read(db=self.db, actor=SYSTEM_TRIAGE, order_id=order["id"])
        if target is None or not target.ai_allowed:  # SEC-8, again, before applying
            return "ai_disabled_for_owner" if target else "order_deleted"
        if not await self.still_ours():
            return "lease_lost"
        if not (await policy.current(self.db, self.settings))["enabled"]:  # the switch, as late as can be
            return "disabled"
        if not await repo.take_action(self.db, agent=AGENT, cap=config["dailyActionCap"]):
            return "daily_action_cap"  # falls back to suggest; the suggestion and the run say why
        return None

    async def _record_call(self, call: dict, *, outcome: str, latency: int, result: dict | None = None) -> None:
        await runs.add_message(
            self.db, {"runId": self.run_id, "sessionId": None, "role": "assistant", "content": call.get("text") or None}
        )
        await runs.insert_tool_call(
            self.db,
            {
                "runId": self.run_id,
                "userId": None,
                "tool": call["name"][:80],
                "callId": call["id"],
                "args": call["args"],
                "outcome": outcome,
                "result": result,
                "latencyMs": latency,
            },
        )

    async def _end(self, status: str, outcome: Outcome, *, code: str | None = None) -> Outcome:
        note = (outcome.suggestion or {}).get("appliedNote")
        error = code or outcome.error or (note if note not in (None, "dropped") else None)
        await runs.finish_run(self.db, self.run_id, status, error_code=error)
        return outcome


def _policy_says(config: dict, order: dict, suggestion: dict) -> str | None:
    """Why the policy stored now keeps this suggestion a suggestion (None: it may be applied)."""
    if config["mode"] != "auto_apply" or "priority" not in config["allowedFields"]:
        return "not_auto"
    if suggestion["suggestedPriority"] == order["priority"]:
        return "not_auto"  # nothing to change
    if not config["enabled"]:
        return "disabled"
    return None


def _about(suggestion: dict | None) -> dict | None:
    return {"suggestionId": str(suggestion["_id"])} if suggestion else None


class _LeaseLost(Exception):
    """Someone else holds the event now: this pass must not finish it."""


def _proposal(completed: Completed) -> tuple[TriageProposal | None, dict]:
    """The validated arguments of the one `triage_propose` call, or None; and the call as recorded."""
    calls = completed.tool_calls
    first = calls[0] if calls else None
    call = {"id": first.id if first else "", "name": first.name if first else "(none)", "args": {}}
    if len(calls) != 1 or first.name != prompt.TOOL_NAME:
        return None, call
    try:
        raw = json.loads(first.arguments)
    except json.JSONDecodeError:
        call["args"] = {"raw": first.arguments[:2000]}
        return None, call
    call["args"] = raw if isinstance(raw, dict) else {"raw": raw}
    try:
        return TriageProposal.model_validate(raw), call
    except ValidationError:
        return None, call
