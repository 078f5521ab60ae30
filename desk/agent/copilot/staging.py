"""A proposed change (spec §4.6): staged for the person, waited on, then made at the version shown.

Nothing is made without the person's approval, only while the run still runs, and only as the person
is stored now (turned off, deactivated or demoted meanwhile: refused). A target that moved since
it was staged is staged again with what it holds now, under a new id; the stale one keeps its record.
"""

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any

from bson import ObjectId

from desk import state
from desk.actors import Actor
from desk.agent.copilot import approvals, live
from desk.agent.copilot.record import CopilotRecord
from desk.agent.core.events import RunEvent, ToolApprovalExpired, ToolApprovalRequired
from desk.agent.core.pipeline import Call, ToolAnswer
from desk.agent.core.state import RunEnded, RunState, stopped
from desk.agent.core.store import agent_runs, agent_tool_calls
from desk.errors import Conflict, DeskError, ErrorCode

WAKE_SECONDS = 1.0  # a decision made in another process is seen within this
LOOK_EVERY = 10  # every tenth tick reads the call itself (see `Staging._decision`)


@dataclass(frozen=True)
class Staging:
    record: CopilotRecord
    state: RunState
    ttl: timedelta
    person_now: Callable[[], Awaitable[Actor | None]]  # the person as stored now; None: AI is off for them
    interrupted: Callable[[], bool]  # the run was stopped in this process (`live.interrupt`)
    waiting: dict[str, asyncio.Event] = field(default_factory=dict)  # the decision being waited on (`wake`)

    async def propose(self, call: Call) -> AsyncIterator[RunEvent | ToolAnswer]:
        """Events for the person while the change waits; its `ToolAnswer` last."""
        tool, args = call.tool, call.args
        pre, version = None, None
        if tool.preimage is not None:
            image = await tool.preimage(call.context, call.parsed())
            if image is None:
                yield call.answer("error", {"error": "That work order no longer exists."}, "Found the work order gone")
                return
            pre, version = image.fields, image.version
        shown = approvals.diff(tool.name, args, pre)
        if not shown.changed:  # nothing to show the person, nothing to make
            yield call.answer("error", {"error": "This change would change nothing."}, "Proposed a change of nothing")
            return
        while True:
            staged = await self.record.stage(
                record_id=call.id,
                tool=tool.name,
                call_id=call.request.id,
                args=args,
                pre_image=pre,
                version=version,
                ttl=self.ttl,
            )
            yield ToolApprovalRequired(
                tool_call_id=str(staged["_id"]),
                tool=tool.name,
                args=args,
                diff=shown,
                expires_at=staged["approval"]["expiresAt"],
            )
            decided = await self._decision(staged)
            status = decided["approval"]["status"]
            if status == "expired":
                raise RunEnded("expired", ToolApprovalExpired(tool_call_id=str(staged["_id"])))
            if status == "rejected":
                yield await self._rejected(call, staged, decided)
                return
            person, running = await asyncio.gather(self.person_now(), self.record.renew())
            if self.interrupted() or not running:  # ended since the click (a logout, the sweeper): nothing is made
                await agent_tool_calls.update_tool_call(self.record.db, staged["_id"], {"outcome": "aborted"})
                raise RunEnded("aborted")
            if person is None or person.role not in tool.roles:  # turned off, deactivated or demoted meanwhile
                await agent_tool_calls.update_tool_call(self.record.db, staged["_id"], {"outcome": "forbidden"})
                refusal = {"error": "This account can no longer make changes."}
                yield call.answer("forbidden", refusal, "Refused a change", staged=True)
                return
            call = replace(call, context=replace(call.context, actor=person))
            # Shielded: a change under way is finished and recorded even if the run is stopped meanwhile
            # (Stop, a closed tab, a logout); cut off halfway, its record would not say what happened.
            execution = asyncio.ensure_future(self._execute(call, staged, version))
            try:
                made = await asyncio.shield(execution)
            except asyncio.CancelledError:
                await asyncio.wait([execution])
                raise
            if isinstance(made, ToolAnswer):
                yield made
                return
            pre, version = made  # stale: stage again with the fresh pre-image,
            shown = approvals.diff(tool.name, args, pre)
            call = replace(call, id=ObjectId())  # as a new proposal with its own id (the stale one keeps its record)

    def wake(self) -> None:
        """Wake a wait for a decision at once (the run was interrupted: it must not sit out its second)."""
        for event in self.waiting.values():
            event.set()

    async def _decision(self, staged: dict) -> dict:
        """The call once decided or expired, whichever write won; at most one round trip a second meanwhile.

        A decide in this process sets the call's event (`live.decided`): the run wakes at once. One in
        another process marks the run (`agent_runs.wake`), which the lease renewal reads back: the renewal and
        the look are one round trip, once a second. Every `LOOK_EVERY`th tick reads the call itself
        instead, in case a decision reached it without the mark (a decide that died between the two).
        """
        db, run_id, call_id = self.record.db, self.record.run["_id"], staged["_id"]
        expires, clock = staged["approval"]["expiresAt"], state.current().clock  # the clock `approvals` reads
        key = str(call_id)
        with live.awaiting(key) as woken:
            self.waiting[key] = woken
            try:
                ticks = 0
                while True:
                    left = (expires - clock.now()).total_seconds()
                    if not woken.is_set() and left > 0:
                        with contextlib.suppress(TimeoutError):
                            async with asyncio.timeout(min(WAKE_SECONDS, left)):
                                await woken.wait()
                    ticks += 1
                    ended = self.interrupted()  # stopped here: what became of the call is still said (expired)
                    if not (ended or woken.is_set() or clock.now() >= expires or ticks % LOOK_EVERY == 0):
                        run = await agent_runs.renew_lease_and_look(db, run_id, self.record.lease)
                        if run is not None and run.get("wakeFor") != call_id:
                            continue  # still running, nothing decided: one round trip this second
                        ended = run is None
                    woken.clear()
                    current = await agent_tool_calls.get_tool_call(db, call_id)
                    if current is None:  # gone from the database under the run (a restore, a clean-up): nothing to do
                        raise RunEnded("aborted")
                    if current["approval"]["status"] != "pending":
                        return current
                    if ended:  # the run was ended elsewhere (Stop, a logout, the sweeper) and the call is pending
                        raise RunEnded("aborted")
                    if clock.now() >= expires:
                        return await self._expire(current)
            finally:
                self.waiting.pop(key, None)

    async def _expire(self, current: dict) -> dict:
        """Expire the call, unless a decision won the race: then that decision is the outcome (never `expired`)."""
        db = self.record.db
        expired = await approvals.expire_call(db, current["_id"])
        if expired is None:  # a concurrent decide got there first: the person was told it counted
            return await agent_tool_calls.get_tool_call(db, current["_id"])
        await approvals.expire_for_run(db, self.record.run["_id"])
        return expired

    async def _rejected(self, call: Call, staged: dict, decided: dict) -> ToolAnswer:
        self.state.rejected[call.key] = self.state.rejected.get(call.key, 0) + 1
        await agent_tool_calls.update_tool_call(self.record.db, staged["_id"], {"outcome": "rejected"})
        if self.state.rejected[call.key] >= 2:
            message = "The assistant proposed the same rejected change again, so it was stopped."
            raise stopped(ErrorCode.VALIDATION_ERROR, message, "loop_detected")
        reason = decided["approval"].get("reason")
        result = {"rejected": True, "reason": reason} if reason else {"rejected": True}
        return call.answer("rejected", result, "You rejected the change", staged=True)

    async def _execute(  # noqa: PLR0911 - one return per way an approved change can end, each recorded
        self, call: Call, staged: dict, version: int | None
    ) -> ToolAnswer | tuple[dict[str, Any], int]:
        """Make an approved change at the staged version; a moved version re-stages instead (never executes stale)."""
        db, tool, started = self.record.db, call.tool, time.monotonic()
        try:
            parsed = call.parsed()  # frozen args, validated again at execution; the error names no value
        except DeskError as error:
            await agent_tool_calls.update_tool_call(
                db, staged["_id"], {"outcome": "error", "result": {"error": error.message}}
            )
            return call.answer("error", {"error": error.message}, "The change could not be made", staged=True)
        if tool.preimage is not None:
            image = await tool.preimage(call.context, parsed)
            if image is None:
                await agent_tool_calls.update_tool_call(
                    db, staged["_id"], {"outcome": "error", "result": {"error": "gone"}}
                )
                gone = {"error": "That work order no longer exists."}
                return call.answer("error", gone, "Found the work order gone", staged=True)
            if image.version != version:
                await agent_tool_calls.update_tool_call(
                    db, staged["_id"], {"outcome": "stale", "approval.status": "stale"}
                )
                return image.fields, image.version
        try:
            output = await tool.run(call.context, parsed, version)
        except Conflict:
            await agent_tool_calls.update_tool_call(db, staged["_id"], {"outcome": "stale", "approval.status": "stale"})
            image = await tool.preimage(call.context, parsed) if tool.preimage else None
            if image is None:
                changed = {"error": "That work order changed and is gone."}
                return call.answer("error", changed, "Found the work order gone", staged=True)
            return image.fields, image.version
        except DeskError as error:
            await agent_tool_calls.update_tool_call(
                db, staged["_id"], {"outcome": "error", "result": {"error": error.message}}
            )
            return call.answer("error", {"error": error.message}, "The change could not be made", staged=True)
        await agent_tool_calls.update_tool_call(
            db,
            staged["_id"],
            {
                "outcome": "executed",
                "result": output.result,
                "executedVersion": next(iter(output.seen.values()), None),
                "latencyMs": int((time.monotonic() - started) * 1000),
            },
        )
        self.state.versions.update(output.seen)
        self.state.seen_ids.update(output.seen)
        self.state.executed.add(call.key)
        self.state.cache.clear()  # earlier reads no longer describe the desk: answering from them would be stale
        self.state.pasted.clear()
        return call.answer("executed", output.result, tool.say(output), staged=True)
