"""One triage pass (AGT-4, AGT-6, AGT-7): read the order, one forced tool call, a suggestion, maybe an apply.

The pass checks, in order, what could make it stop (the kill switch, the order, the person's AI
switch) before anything costs money (the caller checked the spend caps: the worker before its
claim, a manual run before the pass), and again before anything it does lands: the lease before
the suggestion, the switch, the lease and the person's switch before applying (SEC-8). While the model
answers, the desk-wide kill switch is read every `switch.WATCH_SECONDS`: turned off, the call is
cancelled and the run ends `aborted` (`turned_off`); the switch has put the event back in the queue. It uses
the agents' shared parts: its run is a `RunRecord` (SEC-11: the run, its messages, its tool call,
its tokens and how it ended), its bill a `budget.Meter` (`agent:triage` and `global`), and its one
tool passes the registry's gate as the System Actor.

Each policy read is one the spec asks for (AGT-9: before the model call, before applying; the
worker reads it before claiming): the flag threshold and the mode come from the read before the
model call, so a pass in suggest mode reads the policy once.
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
from pymongo.asynchronous.database import AsyncDatabase

from desk.actors import SYSTEM_TRIAGE
from desk.agent.core import budget, switch
from desk.agent.core.events import RunStatus, ToolOutcome
from desk.agent.core.pipeline import ToolAnswer
from desk.agent.core.provider import CHARS_PER_TOKEN, AIUnavailable, Completed, Provider, ToolCallRequest, Usage
from desk.agent.core.record import RunRecord
from desk.agent.core.state import together
from desk.agent.core.store import agent_runs
from desk.agent.triage import answer, apply_rules, policy, prompt
from desk.agent.triage import repository as repo
from desk.agent.triage.models import TriageProposal
from desk.config import Settings
from desk.logs import failure, tag
from desk.notifications import events as notify
from desk.notifications import outbox as told
from desk.work_orders import triage_door as work_orders
from desk.work_orders.models import CLOSED, PRIORITIES

log = logging.getLogger(__name__)
AGENT = policy.AGENT
# lease_lost: the event is another worker's now (this pass stored nothing more); duplicate: an earlier pass stored
# this event's suggestion and settled it. Once one kind, `lost`, told apart by the error code.
Kind = Literal["suggested", "applied", "skipped", "disabled", "over_budget", "retry", "lease_lost", "duplicate"]


@dataclass(frozen=True)
class Outcome:
    """How a pass ended. `retry`: a failed attempt (the worker decides when, or whether, to try again);
    `failure`: the provider's, when the model call failed (transient or not, and any Retry-After)."""

    kind: Kind
    run_id: ObjectId | None = None
    suggestion: dict[str, Any] | None = None
    error: str | None = None
    failure: AIUnavailable | None = None


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
    config: dict | None = None,
    unsettled: budget.Unsettled | None = None,
) -> Outcome:
    """One pass over one work order, under the policy stored now: `config` as read a moment ago (the worker's look
    before its claim), else read here. Its spend is reserved before the model call: a cap reached, it waits.
    `unsettled`: earlier passes' calls to settle with this reservation, and where this one's waits (budget.py)."""
    if not settings.ai_enabled:
        return Outcome("disabled")
    read = work_orders.triage_read(db=db, actor=SYSTEM_TRIAGE, order_id=order_id)
    if config is None:  # the switch before the model call (AGT-9), read beside the order
        config, target = await asyncio.gather(policy.current(db, settings), read)
    else:
        target = await read
    if not config["enabled"]:
        return Outcome("disabled")
    if target is None or (skip := _nothing_to_do(target)):
        return Outcome("skipped", error="order_deleted" if target is None else skip)
    order = target.order.model_dump()
    messages = prompt.messages(order)
    meter = budget.Meter(
        db, cost=provider.cost, user_id=None, agent=AGENT, zone=policy.zone(config), unsettled=unsettled
    )
    # the most this call can cost, counted against the caps before it is made (settled by its bill); a call cut off
    # otherwise (a cancel) keeps the reservation: charged at its most, never under. Refused: no run, the job waits.
    most = Usage(len(json.dumps([messages, prompt.TOOL])) // CHARS_PER_TOKEN, provider.max_output_tokens)
    try:
        await meter.reserve(settings, most)
    except budget.BudgetExceeded:  # a cap reached (another worker's call may have taken its last cents)
        return Outcome("over_budget", error="budget_exceeded")
    lease = timedelta(milliseconds=settings.agent_lease_ms)
    record = RunRecord(
        db=db, run=_new_run(settings, order_id=order["id"], event_id=event_id, triggered_by=triggered_by), lease=lease
    )
    await record.open(messages)
    tag(runId=str(record.run["_id"]))  # each pass runs in its own task: its log lines name its run
    pass_ = _Pass(
        db=db, settings=settings, provider=provider, record=record, meter=meter, still_ours=still_ours, config=config
    )
    return await pass_.go(order, messages, event_id)


def _nothing_to_do(target: work_orders.TriageTarget) -> str | None:
    """Why this order gets no pass (no call, no bill), or None."""
    if not target.ai_allowed:
        return "ai_disabled_for_owner"
    if target.order.status in CLOSED:  # done or cancelled: nothing left to triage
        return "order_closed"
    return None


def _new_run(settings: Settings, *, order_id: str, event_id: ObjectId | None, triggered_by: str | None) -> dict:
    lease = timedelta(milliseconds=settings.agent_lease_ms)
    run = agent_runs.new_run(session_id=None, user_id=None, mode="autonomous", model=settings.ai_model, lease=lease)
    return {
        **run,
        "agentName": AGENT,
        "workOrderId": ObjectId(order_id),
        "eventId": event_id,
        "triggeredBy": triggered_by,  # an admin's id for a manual run, None for the outbox
        "actorId": SYSTEM_TRIAGE.id,  # whom every triage run runs as, a manual one too (SEC-6)
        "actorKind": SYSTEM_TRIAGE.kind,
    }


@dataclass
class _Pass:
    db: AsyncDatabase
    settings: Settings
    provider: Provider
    record: RunRecord
    meter: budget.Meter
    still_ours: StillOurs
    config: dict  # the policy as read before the model call; before applying, as read then
    switch_seen: bool = False  # the watcher read the kill switch (on) while the model answered

    @property
    def run_id(self) -> ObjectId:
        return self.record.run["_id"]

    async def go(self, order: dict, messages: list[dict], event_id: ObjectId | None) -> Outcome:
        started = time.monotonic()
        try:
            completed = await self._call(messages)
        except AIUnavailable as failure:
            await self.meter.charge_for_later(failure.usage)  # a call made is a call paid (spec §4.7)
            outcome = Outcome("retry", self.run_id, error=f"provider_{failure.kind}", failure=failure)
            return await self._end("error", outcome)
        except (_LeaseLost, _TurnedOff):  # cut off, not unmade: billed as estimated from what was sent (spec §4.7)
            await self.meter.charge_for_later(Usage(len(json.dumps(messages)) // CHARS_PER_TOKEN, 0))
            return await self._let_go()
        latency = time.monotonic() - started
        # the ledger now (`agent:triage` and `global`; a worker's pass: with its next reservation), the run with its end
        billed = self.meter.charge_for_later(completed.usage)
        return await self._answer(order, completed, latency, event_id, billed)

    async def _answer(
        self, order: dict, completed: Completed, latency: float, event_id: ObjectId | None, billed: Awaitable[None]
    ) -> Outcome:
        """What the model proposed: invalid (a failed attempt), or a suggestion, stored only while ours."""
        proposal, call = self._proposal(completed)
        if proposal is None:
            await together(billed, self._record_call(call, "invalid", latency))
            return await self._end("error", Outcome("retry", self.run_id, error="invalid_output"))
        ours = await _beside(billed, self._still_ours_and_on())
        if not ours:
            await self._record_call(call, "aborted", latency)
            return await self._let_go()
        suggestion = await self._suggest(order, proposal, event_id)
        if suggestion is None:  # an earlier pass stored this event's suggestion: it died, or slept, before the ack
            earlier = await repo.unsettled(self.db, event_id) if event_id is not None else None
            await self._record_call(call, "aborted", latency, result=_about(earlier))
            if earlier is None:
                return await self._end("aborted", Outcome("duplicate", self.run_id), code="duplicate")
            # we hold the event now: finish what that pass left (its apply), against the order it read
            order, suggestion = {**order, "priority": earlier["priorityBefore"]}, earlier
        else:
            await self._record_call(call, "ok", latency, result=_about(suggestion))
        suggestion = await self._maybe_apply(order, suggestion)
        kind = "applied" if suggestion["applied"] else "suggested"
        return await self._end("complete", Outcome(kind, self.run_id, suggestion))

    async def _let_go(self) -> Outcome:
        """The event is no longer ours: the kill switch took it back (it waits, pending), or another worker has it."""
        if not (await switch.read(self.db)).on:
            return await self._end("aborted", Outcome("disabled", self.run_id, error="turned_off"), code="turned_off")
        return await self._end("aborted", Outcome("lease_lost", self.run_id, error="lease_lost"))

    async def _call(self, messages: list[dict]) -> Completed:
        """The one model call, the lease renewed and the kill switch watched meanwhile; either cancels the call."""
        call = asyncio.create_task(self._stream(messages))
        keeper = asyncio.create_task(self._keep_lease(call))
        watcher = asyncio.create_task(self._watch_switch(call))
        try:
            return await call
        except asyncio.CancelledError:
            for stopper, stopped in ((keeper, _LeaseLost), (watcher, _TurnedOff)):
                if stopper.done() and not stopper.cancelled() and stopper.result() is False:
                    raise stopped from None
            raise
        finally:
            for stopper in (keeper, watcher):
                stopper.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await stopper

    async def _stream(self, messages: list[dict]) -> Completed:
        async with contextlib.aclosing(
            self.provider.stream(messages, **answer.asked(self.settings.ai_structured_output))
        ) as events:
            async for event in events:
                if isinstance(event, Completed):
                    return event
        raise AIUnavailable(kind="no_completion", transient=True)  # a stream that ended early, as faults.py reads it

    async def _keep_lease(self, call: asyncio.Task) -> bool:
        every = self.settings.agent_lease_ms / 3000
        while True:
            await asyncio.sleep(every)
            if not await self.still_ours():
                call.cancel()
                return False
            await self.record.renew()

    async def _still_ours_and_on(self) -> bool:
        """Before the suggestion is stored: the lease, and the kill switch unless the watcher read it during the call
        (a claim made just as an admin turned AI off is not one `put_back_all` took back)."""
        if self.switch_seen:
            return await self.still_ours()
        ours, desk = await asyncio.gather(self.still_ours(), switch.read(self.db))
        return ours and desk.on

    async def _watch_switch(self, call: asyncio.Task) -> bool:
        """The desk-wide switch, read every `WATCH_SECONDS` while the call runs (the worker is not the admin's
        process); off: the call is cancelled. A read that fails is tried again at the next look."""
        while True:
            await asyncio.sleep(switch.WATCH_SECONDS)
            try:
                on = (await switch.read(self.db)).on
                self.switch_seen = True
            except Exception as error:  # the lease check before each write still stands
                log.warning("could not read the AI switch (%s)", failure(error))
                continue
            if not on:
                call.cancel()
                return False

    def _proposal(self, completed: Completed) -> tuple[TriageProposal | None, "_Call"]:
        """The answer (the one call's arguments, or the text asked for), past the gate and the strict model; or None."""
        found = answer.read(completed, self.settings.ai_structured_output)
        return found.proposal, _Call(found.request, found.args)

    async def _suggest(self, order: dict, proposal: TriageProposal, event_id: ObjectId | None) -> dict | None:
        rank = PRIORITIES.index
        threshold = self.config["flagThreshold"]
        flagged = proposal.flagForDispatcher or rank(proposal.suggestedPriority) >= rank(threshold)
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
        stored = await repo.insert(self.db, doc)
        if stored is not None and flagged:  # the admins who asked to hear of flags (a retried pass stores none)
            await told.made(self.db, notify.flagged(actor=SYSTEM_TRIAGE, order_id=order["id"]))
        return stored

    async def _maybe_apply(self, order: dict, suggestion: dict) -> dict:
        """Auto-apply mode: the suggested priority through triage_patch, unless a check says no (then noted)."""
        note = await self._why_not_apply(order, suggestion)
        if note is None:
            changed = await work_orders.triage_patch(
                db=self.db,
                actor=SYSTEM_TRIAGE,
                order_id=order["id"],
                changes={"priority": suggestion["suggestedPriority"]},
                allowed=frozenset(self.config["allowedFields"]),
                run_id=str(self.run_id),
                read={"priority": order["priority"]},  # people first: a person's edit since the read wins
            )
            if isinstance(changed, work_orders.Overtaken):
                note = "overtaken"  # a person's edit landed after the check above
            elif changed is None:
                note = "dropped"
        if note == "not_auto":
            return suggestion
        if note == "lease_lost":  # left as it is for the pass that holds the event now, which applies it
            return {**suggestion, "appliedNote": note}
        fields = {"applied": note is None, "appliedNote": note}
        return await repo.mark(self.db, suggestion["_id"], fields) or {**suggestion, **fields}

    async def _why_not_apply(self, order: dict, suggestion: dict) -> str | None:
        if apply_rules.policy_says(self.config, order, suggestion) == "not_auto":
            return "not_auto"  # suggest mode when the pass began: it stays a suggestion, with no more reads
        # before applying, side by side: the policy (the switch, AGT-9), the owner's AI switch (SEC-8), the lease
        self.config, target, ours = await asyncio.gather(
            policy.current(self.db, self.settings),
            work_orders.triage_read(db=self.db, actor=SYSTEM_TRIAGE, order_id=order["id"]),
            self.still_ours(),
        )
        if note := apply_rules.policy_says(self.config, order, suggestion):
            return note
        if note := apply_rules.order_says(target, order, suggestion):
            return note
        if not ours:
            return "lease_lost"
        cap, zone = self.config["dailyActionCap"], policy.zone(self.config)
        if not await repo.take_action(self.db, agent=AGENT, cap=cap, zone=zone):
            return "daily_action_cap"  # falls back to suggest; the suggestion and the run say why
        return None

    async def _record_call(
        self, call: "_Call", outcome: ToolOutcome, latency: float, result: dict | None = None
    ) -> None:
        """The model's answer and its one tool call, side by side (`latency`: the model call's, in seconds)."""
        answer = ToolAnswer(ObjectId(), outcome, result, "", call.args)  # result None: nothing to show
        await together(
            self.record.say("assistant", None, into_window=False),  # no text: the answer is its forced tool call
            self.record.tool_call(call.request, answer, time.monotonic() - latency),
        )

    async def _end(self, status: RunStatus, outcome: Outcome, *, code: str | None = None) -> Outcome:
        note = (outcome.suggestion or {}).get("appliedNote")
        error = code or outcome.error or (note if note not in (None, "dropped") else None)
        await self.record.finish(status, error, usage=self.meter.take_pending())  # the call's usage, in the same write
        return outcome


def _about(suggestion: dict | None) -> dict | None:
    return {"suggestionId": str(suggestion["_id"])} if suggestion else None


class _LeaseLost(Exception):
    """Someone else holds the event now: this pass must not finish it."""


class _TurnedOff(Exception):
    """An admin turned AI off for the desk while the model answered: the call is dropped, the event waits."""


@dataclass(frozen=True)
class _Call:
    """The model's tool call as recorded: the request (`(none)` for no call) and its arguments, parsed if they were."""

    request: ToolCallRequest
    args: dict[str, Any]


async def _beside(billed: Awaitable[None], check: Awaitable[bool]) -> bool:
    """The bill and a lease check in one round trip; the bill lands either way."""
    results = await asyncio.gather(billed, check, return_exceptions=True)
    for failed in results:
        if isinstance(failed, BaseException):
            raise failed
    return bool(results[1])
