"""The copilot's turn (spec §4.4 to §4.7): one run = one turn of the person, a bounded loop of model calls.

`start.begin` does every check that can refuse the turn before anything streams (so refusals are the JSON
envelope) and hands over a `CopilotTurn`; its `events()` runs the loop and yields typed events, which the
SSE route and the copilot drawer both consume. The loop is all that is here: the run's records are
`record.CopilotRecord`'s, its bills `budget.Meter`'s, the guards on each tool call `pipeline`'s, a proposed
change `staging`'s, and stopping it from elsewhere `live`'s (an admin's kill switch too: `turned_off`).
"""

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from datetime import timedelta
from typing import Any, NoReturn

from bson import ObjectId

from desk import state
from desk.access import AI_OFF_FOR_YOU, AI_TURNED_OFF, Denied, can_use_ai
from desk.actors import Actor, Role
from desk.agent.copilot import live
from desk.agent.copilot.live import INTERRUPTED, TURNED_OFF
from desk.agent.copilot.prompt import Prompt, first_prompt
from desk.agent.copilot.record import CopilotRecord
from desk.agent.copilot.staging import Staging
from desk.agent.copilot.toolset import TOOLSET
from desk.agent.core import budget, pipeline, switch
from desk.agent.core.events import (
    Error,
    MessageDone,
    RunEvent,
    RunStatus,
    Token,
    ToolCallStart,
    ToolResult,
)
from desk.agent.core.history import Message
from desk.agent.core.pipeline import ToolAnswer
from desk.agent.core.provider import CHARS_PER_TOKEN, AIUnavailable, Call, Completed, Provider, ToolCallRequest, Usage
from desk.agent.core.state import RunEnded, RunState, together
from desk.agent.core.tools import ToolContext
from desk.config import Settings
from desk.errors import ErrorCode
from desk.logs import failure, tag
from desk.users import service as users_service

log = logging.getLogger(__name__)
AGENT = "copilot"
STEPS_USED = "The assistant used all its steps for this message."
UNREACHED = "ai_unreached"  # the run's error code when its call never reached the model (and cost nothing)
__all__ = ["AGENT", "INTERRUPTED", "CopilotTurn"]


class CopilotTurn:
    def __init__(
        self,
        *,
        db,
        settings: Settings,
        provider: Provider,
        actor: Actor,
        run: dict,
        session: dict,
        content: str,
        window: list[Message] | None = None,
        admission: budget.Admission | None = None,
        opening: live.Opening | None = None,
        prompt: Prompt | None = None,
    ):
        """The person's message `content` is stored with the run once the first token is out (`RunRecord.take`);
        `prompt`: the first call's, made from `window` ending with this very message (see `start.begin`)."""
        self.settings, self.provider, self.actor = settings, provider, actor
        self.run_id = str(run["_id"])
        self.record = CopilotRecord(db=db, run=run, session=session, window=window)
        self.record.take(content, prompt.message if prompt is not None else None)
        self.prompt = prompt
        tidy = admission.stale if admission else ()
        zone = admission.zone if admission else "UTC"  # the desk's days, as the admission read them
        self.meter = budget.Meter(db, cost=provider.cost, user_id=actor.id, agent=AGENT, tidy=tidy, zone=zone)
        self.state = RunState()
        ttl = timedelta(milliseconds=settings.ai_approval_ttl_ms)
        self.staging = Staging(self.record, self.state, ttl, self._person_now, lambda: self.interrupted)
        self.finished = False
        self.fresh = True  # `begin` has just checked AI access and budget: the first call needs no second look
        self.driver: asyncio.Task | None = None  # the task reading our events (`interrupt` may cancel it)
        self.calling = False  # the reader is waiting inside us for the model's next chunk
        self.interrupted = False
        self.notice = INTERRUPTED  # what the person reads when it is stopped from elsewhere (or TURNED_OFF)
        self.opening = opening or live.Opening()  # `begin` opened it before its checks
        self._forget = live.register(actor.id, self, db)

    async def recorded(self) -> bool:
        """Wait until the run and the person's message are stored; False if that failed."""
        return await self.record.recorded()

    async def events(self) -> AsyncIterator[RunEvent]:
        """The run, as events; if the listener goes away mid-run, the run is recorded as aborted.

        A failure of our own (say, the ledger could not be read) ends the run as an `error` and goes on
        up to the caller, which tells the person; the run must not read as if they had stopped it.
        """
        ending: tuple[RunStatus, str | None] | None = ("aborted", None)  # the consumer stopped, or a cancel
        self.driver = asyncio.current_task()
        tag(runId=self.run_id)  # every log line of the turn (and of tasks it starts) names the run
        try:
            try:
                # aclosing (here and around each step): when our consumer stops early, the step's upstream
                # call is closed and billed now, before the run is marked aborted, not later by the GC.
                async with contextlib.aclosing(self._loop()) as loop:
                    async for event in loop:
                        yield event
                        await self.opening.out()  # after the first: other people's first events go first
            except asyncio.CancelledError:
                if not self._take_back_interrupt():
                    raise
                ending = None
                status = await self._finish("aborted")
                yield MessageDone(run_id=self.run_id, status=status, notice=self.notice)
            else:
                ending = None
        except Exception:
            ending = ("error", "internal")
            raise
        finally:
            self.opening.done()
            self._forget()
            # One task for the whole wind-down: a second cancel (Stop pressed twice, a server's cancel
            # scope) interrupts only our wait for it, never the release that lets the next message in.
            closing = state.current().keep(
                asyncio.ensure_future(self._close(ending)), failure="could not end a copilot run"
            )
            await asyncio.shield(closing)

    def interrupt(self, by: str | None = None) -> None:
        """Stop: the run was ended elsewhere (a logout, a deactivation, the sweeper; see `live.interrupt`).

        `by`: who pressed Stop on this run (`live.stop`), or `live.TURNED_OFF`; anyone else's Stop changes nothing.
        While the reader waits inside us for the model's next chunk, its task is cancelled there, so the call is cut
        short at once, and `events` takes that cancel back. Anywhere else the run stops at its next look at
        `interrupted` (the next chunk, step, or poll of an approval): a cancel must never land in the reader's own
        code. Either way the stream ends with `message_done` (`aborted`).
        """
        if self.interrupted or by not in (None, TURNED_OFF, self.actor.id):
            return
        self.interrupted, self.notice = True, TURNED_OFF if by == TURNED_OFF else self.notice  # the desk's switch
        self.staging.wake()  # a wait for a decision ends now, not at its next tick
        if self.calling and self.driver is not None and not self.driver.done():
            self.driver.cancel()

    def _take_back_interrupt(self) -> bool:
        """True when the cancel being handled is `interrupt`'s alone; it is then withdrawn (as asyncio.timeout does)."""
        task = asyncio.current_task()
        return self.interrupted and task is not None and task.uncancel() == 0

    async def _close(self, ending: tuple[RunStatus, str | None] | None) -> None:
        try:
            if ending is not None:
                await self._finish(*ending)
        finally:
            await self.record.release()

    async def _finish(self, status: RunStatus, code: str | None = None) -> RunStatus:
        """End the run (with the call charged but not yet on it); returns how it ended (someone may have been first)."""
        code = code or ("turned_off" if status == "aborted" and self.notice == TURNED_OFF else None)
        await self.record.recorded()
        return await self.record.finish(status, code, usage=self.meter.take_pending())

    async def _loop(self) -> AsyncIterator[RunEvent]:
        if self.prompt is None:
            self.prompt = first_prompt(self.actor, self.settings, await self.record.conversation())
        messages, tools, ready = self.prompt.messages, self.prompt.tools, self.prompt.call
        try:
            for _ in range(self.settings.ai_max_steps_per_run):
                async with contextlib.aclosing(self._step(messages, tools, ready)) as step:  # see events()
                    async for event in step:
                        yield event
                ready = None  # built for the first call only: later ones send the messages as they are then
                if self.finished:
                    return
        except RunEnded as ended:
            status = await self._finish(ended.status, ended.code)
            if ended.event is not None:
                yield ended.event
            yield MessageDone(run_id=self.run_id, status=status, notice=self.notice if self.interrupted else None)
            return
        status = await self._finish("budget_exceeded", "step_cap")
        yield Error(code=ErrorCode.AI_BUDGET_EXCEEDED, message=STEPS_USED)
        yield MessageDone(run_id=self.run_id, status=status)

    async def _step(self, messages: list[dict], tools: list[dict], ready: Call | None) -> AsyncIterator[RunEvent]:
        """One model call (`ready`: its request, built already) and its tool calls; sets `finished` if the run ended."""
        refusal = await self._before_call(messages)
        if refusal is not None:
            status = "budget_exceeded" if refusal.code == ErrorCode.AI_BUDGET_EXCEEDED else "error"
            raise RunEnded(status, refusal, refusal.code.value)
        text, completed, billed = "", None, False
        # The lease keeper starts only once a third of a lease has passed: most calls end long before.
        stop_keeper = _later(self.record.lease.total_seconds() / 3, self._keep_lease, f"copilot-lease-{self.run_id}")
        try:
            call = ready if ready is not None else self.provider.call(messages, tools)
            async with contextlib.aclosing(self.provider.send(call)) as stream:
                while (chunk := await self._next(stream)) is not None:  # leaving early closes the upstream call
                    if self.interrupted:  # ended elsewhere while the last chunk was with the reader
                        raise RunEnded("aborted")
                    if isinstance(chunk, Completed):
                        completed = chunk
                    else:
                        text += chunk.text
                        yield Token(text=chunk.text)
                        self.record.store()  # the first token is out: now the run and the message may be written
                    if self.record.settled:
                        await self.record.require()  # they failed: stop the answer now, not at its end
        except AIUnavailable as failure:
            billed = True
            await self._failed(failure)
        finally:  # every call bills (spec §4.7), before anything else can end the run
            stop_keeper()
            if completed is not None:  # the ledger now; the run with its next write
                await self.meter.charge_for_later(completed.usage)  # shielded
            elif not billed:  # cut short: estimated
                await asyncio.shield(self._bill(Usage(_tokens(messages), len(text) // CHARS_PER_TOKEN)))
        assert completed is not None
        await self.record.require()
        if not completed.tool_calls:
            await self.record.say("assistant", text)
            notice = None if text.strip() else "The assistant finished without an answer."
            status = await self._finish("complete")  # with the call's usage: one write, not two
            self.finished = True
            yield MessageDone(run_id=self.run_id, status=status, notice=notice)
            return
        messages.append(_assistant_message(text, completed.tool_calls))
        await together(
            self.meter.record_pending(run_id=self.record.stored_id),
            self.record.say("assistant", text, toolCalls=[c.name for c in completed.tool_calls]),
        )
        async for event in self._tool_calls(completed.tool_calls, messages):
            yield event

    async def _failed(self, failure: AIUnavailable) -> NoReturn:
        """A failed call ends the run: billed if it reached the model (spec §4.7), free and said so if not."""
        if failure.reached:
            await self._bill(failure.usage)
        else:
            await self.record.recorded()
        code = "AI_UNAVAILABLE" if failure.reached else UNREACHED
        raise RunEnded("error", Error(code=ErrorCode.AI_UNAVAILABLE, message=failure.message), code) from None

    async def _next(self, stream: AsyncIterator) -> Any:
        """The model call's next chunk (None at its end); only while the reader waits here may `interrupt` cancel it."""
        self.calling = True
        try:
            return await anext(stream, None)
        finally:
            self.calling = False

    async def _bill(self, usage: Usage) -> None:
        """One model call, to the ledger and to its run (if the run could be stored)."""
        await self.record.recorded()
        await self.meter.bill(usage, run_id=self.record.stored_id)

    async def _keep_lease(self) -> None:
        """While a model call takes its time: keep the run's lease, and stop the run if it was ended elsewhere.

        The sweeper ends a run whose lease ran out and frees a session whose run it cannot find, and a
        call may stream for minutes. So every third of a lease the run is stored (if its first token has
        not come yet) and its lease renewed; a run no longer running (a logout in another web process,
        the sweeper) is interrupted.
        """
        try:
            while True:  # started a third of a lease into the call
                if not await self.record.recorded():
                    return  # the step ends the run for that itself (`RunRecord.require`)
                if not await self.record.renew():
                    self.interrupt()
                    return
                await asyncio.sleep(self.record.lease.total_seconds() / 3)
        except Exception as error:  # nobody awaits this task: say it here (the type only, as everywhere)
            log.warning("could not keep a copilot run's lease (%s)", failure(error))

    # --- one step's tool calls -------------------------------------------------------------

    async def _tool_calls(self, calls: list[ToolCallRequest], messages: list[dict]) -> AsyncIterator[RunEvent]:
        """Reads run in order; at most one write per step is staged; every call gets a tool message."""
        wrote = False
        for request in calls:
            # The desk's own id for the call, in every event about it: the one its record is stored under
            # (GET /runs/{id}) and, for a change, the one to decide on. The model's id may repeat.
            first_id = ObjectId()
            yield ToolCallStart(tool_call_id=str(first_id), tool=request.name[:80])
            started = time.monotonic()
            answer: ToolAnswer | None = None
            async for item in self._answer(request, first_id, wrote):
                if isinstance(item, ToolAnswer):
                    answer = item
                else:
                    yield item
            assert answer is not None
            wrote = wrote or answer.staged
            content = answer.content
            messages.append({"role": "tool", "tool_call_id": request.id, "content": content})
            name, summary = request.name[:80], answer.summary  # the line the person read: a page opened later shows it
            await self.record.say("tool", content, toolCallId=request.id, name=name, summary=summary)
            if not answer.staged:  # a staged call is its own record
                await self.record.tool_call(request, answer, started)
            yield ToolResult(tool_call_id=str(answer.id), tool=name, outcome=answer.outcome, summary=summary)

    async def _answer(
        self, request: ToolCallRequest, call_id: ObjectId, wrote: bool
    ) -> AsyncIterator[RunEvent | ToolAnswer]:
        """One tool call through the copilot's toolset (`pipeline`), and staging for a change; its `ToolAnswer` last."""
        person = await self._person_now()  # as stored now: turned off, deactivated or demoted since the run began
        context = ToolContext(db=self.record.db, actor=person or self.actor, run_id=self.run_id)
        asked = pipeline.Asked(request, call_id, person, self.actor, context, wrote)
        answer = await TOOLSET.call(asked, self.state)
        if isinstance(answer, pipeline.Deferred):
            async for item in self.staging.propose(answer.call):
                yield item
        else:
            yield answer

    # --- between steps -------------------------------------------------------------------

    async def _person_now(self) -> Actor | None:
        """The person with the role stored now, or None when AI is off for them (or the desk), or they are gone.

        Read again before every model call, every tool call and every approved change: someone turned
        off, deactivated or demoted while the run went on must not keep what they had when it began.
        """
        user = await users_service.get_user(db=self.record.db, actor=self.actor, user_id=self.actor.id)
        if isinstance(can_use_ai(user, settings=self.settings, switch=switch.known()), Denied):  # see _before_call
            return None
        return Actor(id=self.actor.id, role=Role(user.role))

    async def _before_call(self, messages: list[dict]) -> Error | None:
        """Checks between steps: still running (not aborted), still allowed, budget left, context fits."""
        if self.interrupted:
            raise RunEnded("aborted")
        if self.fresh:
            self.fresh = False
            assert self.prompt is not None
            return self._too_long(self.prompt.tokens)  # sized when the prompt was made, a moment ago
        leased, person, within_budget, desk = await asyncio.gather(
            self.record.renew(),
            self._person_now(),
            budget.check(self.record.db, self.settings, user_id=self.actor.id, agent=AGENT, zone=self.meter.zone),
            switch.current(self.record.db),  # kept up to a second: what `_person_now` and its tool calls go by
            return_exceptions=True,
        )
        for outcome in (leased, person, desk):
            if isinstance(outcome, BaseException):
                raise outcome
        if not leased:
            raise RunEnded("aborted")  # ended elsewhere (logout, the sweeper): stop
        if not desk.on:  # an admin turned AI off for the whole desk: stopped, as a Stop would
            raise RunEnded("aborted", Error(code=ErrorCode.AI_TURNED_OFF, message=AI_TURNED_OFF), "turned_off")
        if person is None:
            return Error(code=ErrorCode.FORBIDDEN, message=AI_OFF_FOR_YOU)
        if isinstance(within_budget, budget.BudgetExceeded):
            return Error(code=ErrorCode.AI_BUDGET_EXCEEDED, message=within_budget.message)
        if isinstance(within_budget, BaseException):
            raise within_budget
        return self._too_long(_tokens(messages))

    def _too_long(self, tokens: int) -> Error | None:
        if tokens > self.settings.ai_max_context_tokens:
            return Error(code=ErrorCode.AI_BUDGET_EXCEEDED, message="This conversation is too long; start a new one.")
        return None


def _tokens(messages: list[dict]) -> int:
    return len(json.dumps(messages)) // CHARS_PER_TOKEN


def _assistant_message(text: str, calls: list[ToolCallRequest]) -> dict:
    return {
        "role": "assistant",
        "content": text or None,
        "tool_calls": [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}} for c in calls
        ],
    }


def _later(seconds: float, start: Callable[[], Coroutine[Any, Any, None]], name: str) -> Callable[[], None]:
    """`start()` as a task once `seconds` have passed; returns what stops it, timer or task (a timer costs less)."""
    started: list[asyncio.Task] = []
    timer = asyncio.get_running_loop().call_later(
        seconds, lambda: started.append(asyncio.create_task(start(), name=name))
    )

    def stop() -> None:
        timer.cancel()
        for task in started:
            task.cancel()

    return stop
