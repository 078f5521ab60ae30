"""The copilot runtime (spec §4.4 to §4.7): one run = one turn of the person, a bounded loop of model calls.

`start.begin` does every check that can refuse the turn before anything streams (so refusals are
the JSON envelope) and hands over a `CopilotTurn`; its `events()` runs the loop and yields typed
events, which the SSE route and the copilot drawer both consume.
"""

import asyncio
import contextlib
import hashlib
import json
import logging
import re
import time
import weakref
from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from bson import ObjectId
from bson.errors import InvalidDocument
from pydantic import ValidationError
from pymongo.errors import PyMongoError

from desk.actors import Actor, Role
from desk.agent import approvals, budget, history, runs
from desk.agent.events import (
    Error,
    MessageDone,
    RunEvent,
    Token,
    ToolApprovalExpired,
    ToolApprovalRequired,
    ToolCallStart,
    ToolResult,
)
from desk.agent.history import WINDOW, Message, kept
from desk.agent.prompt import SYSTEM_PROMPT
from desk.agent.provider import CHARS_PER_TOKEN, AIUnavailable, Completed, Provider, ToolCallRequest, Usage
from desk.agent.tools import REGISTRY
from desk.agent.tools.registry import Refusal, Tool, ToolContext
from desk.config import Settings
from desk.errors import Conflict, DeskError, ErrorCode
from desk.schema import now
from desk.users import service as users_service

log = logging.getLogger(__name__)
AGENT = "copilot"
LEASE = timedelta(seconds=60)
POLL_SECONDS = 0.2  # how often a run waiting for a decision looks at the approval
OBJECT_ID = re.compile(r"\b[0-9a-f]{24}\b")


@dataclass
class RunState:
    """What one run learned: ids it saw, versions it read, answers it can reuse, mistakes it counted."""

    seen_ids: set[str] = field(default_factory=set)
    versions: dict[str, int] = field(default_factory=dict)
    cache: dict[str, str] = field(default_factory=dict)
    pasted: dict[str, str] = field(default_factory=dict)  # results shown to the model (by digest) -> the tool
    executed: set[str] = field(default_factory=set)  # fingerprints of writes already made in this run
    rejected: dict[str, int] = field(default_factory=dict)
    unknown_tools: int = 0
    bad_args: int = 0


class RunEnded(Exception):
    """The run reached a terminal status inside a tool call (expired, aborted, loop detected)."""

    def __init__(self, status: str, event: RunEvent | None = None, code: str | None = None):
        super().__init__(status)
        self.status, self.event, self.code = status, event, code


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
        window: list[Message] | None = None,
        admission: budget.Admission | None = None,
    ):
        self.db, self.settings, self.provider, self.actor = db, settings, provider, actor
        self.run, self.session = run, session
        self.run_id = str(run["_id"])
        self.state = RunState()
        self.finished = False
        self.fresh = True  # `begin` has just checked AI access and budget: the first call needs no second look
        self.staged = False  # whether this run put a change before the person (only then can one be pending)
        self.window = window  # the session's newest messages (None: read them from the database first)
        self.last_message: ObjectId | None = session.get("historyMark")
        self.unsure = False  # a message write failed or was cut short: the window may not match the database
        self.tidy = admission.stale if admission else ()
        self.content = ""  # the person's message (never empty once `record` took it)
        self.records: asyncio.Task | None = None
        self.run_stored = False
        self.unrecorded: Usage | None = None  # the last call, billed to the ledger but not yet to the run
        self.driver: asyncio.Task | None = None  # the task reading our events (`interrupt` may cancel it)
        self.calling = False  # the reader is waiting inside us for the model's next chunk
        self.interrupted = False
        _LIVE.setdefault(actor.id, weakref.WeakSet()).add(self)  # weak: a turn never read is simply forgotten

    def record(self, content: str) -> None:
        """Take the person's message; it and the run are stored in the background once the first token is out.

        Stored later, not now: on one event loop and one database those writes would go before the
        first token. With a real model they happen while it writes its answer. Anything that needs
        them stored (a tool call, the run's end, a refusal) starts them itself (`recorded`).
        """
        self.content = content
        if self.window is not None:  # stamped before it is stored: memory forgets it first, never last
            self.window.append(kept("user", content))

    def _store(self) -> None:
        """Start storing the run and the person's message (once); the run's own writes wait for them."""
        if self.records is not None or not self.content:  # started already, or nothing to store
            return
        self.records = asyncio.create_task(self._write_records(self.content), name=f"copilot-records-{self.run_id}")
        _background.add(self.records)
        self.records.add_done_callback(_recorded_in_background)

    async def recorded(self) -> bool:
        """Wait until the run and the person's message are stored; False if that failed."""
        self._store()
        if self.records is None:
            return True
        with contextlib.suppress(Exception):
            await asyncio.shield(self.records)
        return not self.records.cancelled() and self.records.exception() is None

    async def events(self) -> AsyncIterator[RunEvent]:
        """The run, as events; if the listener goes away mid-run, the run is recorded as aborted.

        A failure of our own (say, the ledger could not be read) ends the run as an `error` and goes on
        up to the caller, which tells the person; the run must not read as if they had stopped it.
        """
        ending: tuple[str, str | None] | None = ("aborted", None)  # the consumer stopped, or the task was cancelled
        self.driver = asyncio.current_task()
        try:
            try:
                # aclosing (here and around each step): when our consumer stops early, the step's upstream
                # call is closed and billed now, before the run is marked aborted, not later by the GC.
                async with contextlib.aclosing(self._loop()) as loop:
                    async for event in loop:
                        yield event
            except asyncio.CancelledError:
                if not self._take_back_interrupt():
                    raise
                ending = None
                status = await self._finish("aborted")
                yield MessageDone(run_id=self.run_id, status=status, notice=INTERRUPTED)
            else:
                ending = None
        except Exception:
            ending = ("error", "internal")
            raise
        finally:
            mine = _LIVE.get(self.actor.id)
            if mine is not None:
                mine.discard(self)
                if not mine:
                    _LIVE.pop(self.actor.id, None)
            # One task for the whole wind-down: a second cancel (Stop pressed twice, a server's cancel
            # scope) interrupts only our wait for it, never the release that lets the next message in.
            closing = asyncio.ensure_future(self._close(ending))
            _background.add(closing)
            closing.add_done_callback(_closed_in_background)
            await asyncio.shield(closing)

    def interrupt(self) -> None:
        """Stop: the run was ended elsewhere (a logout, a deactivation, the sweeper; see `interrupt` below).

        While the reader waits inside us for the model's next chunk, its task is cancelled there, so the
        call is cut short at once, and `events` takes that cancel back. Anywhere else the run stops at
        its next look at `interrupted` (the next chunk, step, or poll of an approval): a cancel must never
        land in the reader's own code. Either way the stream ends with `message_done` (`aborted`).
        """
        if self.interrupted:
            return
        self.interrupted = True
        if self.calling and self.driver is not None and not self.driver.done():
            self.driver.cancel()

    def _take_back_interrupt(self) -> bool:
        """True when the cancel being handled is `interrupt`'s alone; it is then withdrawn (as asyncio.timeout does)."""
        task = asyncio.current_task()
        return self.interrupted and task is not None and task.uncancel() == 0

    async def _close(self, ending: tuple[str, str | None] | None) -> None:
        try:
            if ending is not None:
                await self._finish(*ending)
        finally:
            await self._release()

    async def _loop(self) -> AsyncIterator[RunEvent]:
        messages = await self._history()
        tools = [tool.schema() for tool in REGISTRY.allowed("copilot", self.actor)]
        try:
            for _ in range(self.settings.ai_max_steps_per_run):
                async with contextlib.aclosing(self._step(messages, tools)) as step:  # see events()
                    async for event in step:
                        yield event
                if self.finished:
                    return
        except RunEnded as ended:
            status = await self._finish(ended.status, ended.code)
            if ended.event is not None:
                yield ended.event
            yield MessageDone(run_id=self.run_id, status=status, notice=INTERRUPTED if self.interrupted else None)
            return
        status = await self._finish("budget_exceeded", "step_cap")
        yield Error(code=ErrorCode.AI_BUDGET_EXCEEDED, message="The assistant used all its steps for this message.")
        yield MessageDone(run_id=self.run_id, status=status)

    async def _step(self, messages: list[dict], tools: list[dict]) -> AsyncIterator[RunEvent]:
        """One model call and its tool calls; sets `finished` when the run ended in this step."""
        refusal = await self._before_call(messages)
        if refusal is not None:
            status = "budget_exceeded" if refusal.code == ErrorCode.AI_BUDGET_EXCEEDED else "error"
            raise RunEnded(status, refusal, refusal.code.value)
        text, completed, billed = "", None, False
        keeper = asyncio.create_task(self._keep_lease(), name=f"copilot-lease-{self.run_id}")
        try:
            async with contextlib.aclosing(self.provider.stream(messages, tools)) as stream:
                while (chunk := await self._next(stream)) is not None:  # leaving early closes the upstream call
                    if self.interrupted:  # ended elsewhere while the last chunk was with the reader
                        raise RunEnded("aborted")
                    if isinstance(chunk, Completed):
                        completed = chunk
                    else:
                        text += chunk.text
                        yield Token(text=chunk.text)
                        self._store()  # the first token is out: now the run and the message may be written
                    if self.records is not None and self.records.done():
                        await self._require_records()  # they failed: stop the answer now, not at its end
        except AIUnavailable as failure:
            billed = True
            await self._bill(failure.usage)
            raise RunEnded(
                "error", Error(code=ErrorCode.AI_UNAVAILABLE, message=failure.message), "AI_UNAVAILABLE"
            ) from None
        finally:  # every call bills (spec §4.7), before anything else can end the run
            keeper.cancel()
            if completed is not None:  # the ledger now; the run with its next write (`unrecorded`)
                self.unrecorded = completed.usage  # first: a cancel during the charge must not lose it
                await asyncio.shield(self._charge(completed.usage))
            elif not billed:  # cut short: estimated
                await asyncio.shield(self._bill(Usage(_tokens(messages), len(text) // CHARS_PER_TOKEN)))
        assert completed is not None
        await self._require_records()
        if not completed.tool_calls:
            await self._say("assistant", text)
            notice = None if text.strip() else "The assistant finished without an answer."
            status = await self._finish("complete")  # with the call's usage: one write, not two
            self.finished = True
            yield MessageDone(run_id=self.run_id, status=status, notice=notice)
            return
        messages.append(_assistant_message(text, completed.tool_calls))
        await _together(
            self._record_usage(),
            self._say("assistant", text, toolCalls=[c.name for c in completed.tool_calls]),
        )
        async for event in self._tool_calls(completed.tool_calls, messages):
            yield event

    async def _next(self, stream: AsyncIterator) -> Any:
        """The model call's next chunk (None at its end); only while the reader waits here may `interrupt` cancel it."""
        self.calling = True
        try:
            return await anext(stream, None)
        finally:
            self.calling = False

    async def _keep_lease(self) -> None:
        """While a model call takes its time: keep the run's lease, and stop the run if it was ended elsewhere.

        The sweeper ends a run whose lease ran out and frees a session whose run it cannot find, and a
        call may stream for minutes. So every third of a lease the run is stored (if its first token has
        not come yet) and its lease renewed; a run no longer running (a logout in another web process,
        the sweeper) is interrupted.
        """
        try:
            while True:
                await asyncio.sleep(LEASE.total_seconds() / 3)
                if not await self.recorded():
                    return  # the step ends the run for that itself (`_require_records`)
                if not await runs.renew_lease(self.db, self.run["_id"], LEASE):
                    self.interrupt()
                    return
        except Exception as error:  # nobody awaits this task: say it here (the type only, as everywhere)
            log.warning("could not keep a copilot run's lease (%s)", type(error).__name__)

    # --- one step's tool calls -------------------------------------------------------------

    async def _tool_calls(self, calls: list[ToolCallRequest], messages: list[dict]) -> AsyncIterator[RunEvent]:
        """Reads run in order; at most one write per step is staged; every call gets a tool message."""
        wrote = False
        for call in calls:
            # The desk's own id for the call, in every event about it: the one its record is stored under
            # (GET /runs/{id}) and, for a change, the one to decide on. The model's id may repeat.
            answer: dict[str, Any] = {"id": ObjectId()}
            yield ToolCallStart(tool_call_id=str(answer["id"]), tool=call.name[:80])
            started = time.monotonic()
            async for event in self._one_call(call, wrote, answer):
                yield event
            wrote = wrote or answer.get("staged", False)
            content = answer["content"]
            messages.append({"role": "tool", "tool_call_id": call.id, "content": content})
            await self._say("tool", content, toolCallId=call.id, name=call.name[:80])
            if answer.get("record", True):
                await self._record(call, answer, started)
            yield ToolResult(
                tool_call_id=str(answer["id"]),
                tool=call.name[:80],
                outcome=answer["outcome"],
                summary=answer["summary"],
            )

    async def _one_call(self, call: ToolCallRequest, wrote: bool, answer: dict) -> AsyncIterator[RunEvent]:
        person = await self._person_now()  # as stored now: turned off, deactivated or demoted since the run began
        gated = REGISTRY.gate(call.name, mode="copilot", actor=person or self.actor, ai_enabled=person is not None)
        if isinstance(gated, Refusal):
            if gated.outcome == "unknown_tool":
                self.state.unknown_tools += 1
                if self.state.unknown_tools >= 3:
                    raise RunEnded(
                        "error",
                        Error(
                            code=ErrorCode.INTERNAL,
                            message="The assistant kept asking for tools that do not exist, so it was stopped.",
                        ),
                        "unknown_tools",
                    )
            _fill(
                answer,
                gated.outcome,
                {"error": gated.message},
                "Refused a tool it may not use"
                if gated.outcome == "forbidden"
                else "Asked for a tool that does not exist",
            )
            return
        tool, context = gated, self._context(person)
        args = self._parse(tool, call, answer)
        if args is None:
            return
        answer["args"] = args
        key = _fingerprint(tool.name, args)
        if not tool.writes:
            await self._read(tool, args, key, answer, context=context)
            return
        if wrote:
            _fill(
                answer,
                "error",
                {
                    "error": "Only one change can be proposed at a time. Propose the next one after "
                    "the person decided on this one."
                },
                "Held back a second change",
            )
            return
        async for event in self._write(tool, call, args, key, answer, context=context):
            yield event

    def _parse(self, tool: Tool, call: ToolCallRequest, answer: dict) -> dict | None:
        """JSON-decode and validate the model's arguments; a failure is an error result, twice ends the run."""
        try:
            # pydantic's JSON parser, not json.loads: deeply nested arguments are a validation error
            # here, where json.loads raised RecursionError and crashed the run.
            args = tool.args.model_validate_json(call.arguments or "{}")
        except ValidationError as problem:
            self.state.bad_args += 1
            if self.state.bad_args >= 2:
                raise RunEnded(
                    "error",
                    Error(
                        code=ErrorCode.VALIDATION_ERROR,
                        message="The assistant sent invalid tool arguments twice, so it was stopped.",
                    ),
                    "malformed_args",
                ) from None
            invalid_json = any(e["type"] == "json_invalid" for e in problem.errors())
            detail = "not valid JSON" if invalid_json else _validation_text(problem)
            _fill(answer, "error", {"error": f"Invalid arguments: {detail}"}, "Sent invalid arguments to a tool")
            return None
        return args.model_dump(exclude_none=True)

    async def _read(self, tool: Tool, args: dict, key: str, answer: dict, *, context: ToolContext) -> None:
        if key in self.state.cache:  # convergence guard: the same question gets a short reminder, not a re-paste
            _fill(answer, "ok", {"note": "Same result as your earlier identical call."}, "Reused an earlier answer")
            return
        try:
            output = await tool.run(context, tool.args.model_validate(args))
        except DeskError as error:
            _fill(answer, "error", {"error": error.message}, f"Could not use {tool.name}")
            return
        self.state.versions.update(output.seen)
        self.state.seen_ids.update(output.seen)
        shown = json.dumps(output.result, sort_keys=True)
        self.state.seen_ids.update(OBJECT_ID.findall(shown))
        self.state.cache[key] = "done"
        digest = hashlib.sha256(shown.encode()).hexdigest()
        if earlier := self.state.pasted.get(digest):  # spec §4.7: an identical result is never pasted twice
            note = f"Same result as your earlier {earlier} call in this turn."
            _fill(answer, "ok", {"note": note}, "Reused an earlier answer")
            return
        self.state.pasted[digest] = tool.name
        _fill(answer, "ok", output.result, tool.say(output))

    async def _write(
        self, tool: Tool, call: ToolCallRequest, args: dict, key: str, answer: dict, *, context: ToolContext
    ):
        if key in self.state.executed:  # convergence guard: never put the same change to the person twice
            _fill(answer, "ok", {"note": "This exact change was already made."}, "Reused an earlier answer")
            return
        target = tool.target(tool.args.model_validate(args))
        if context.actor.role == "viewer":  # COP-5 (the gate already refuses; kept explicit for the audit)
            _fill(answer, "forbidden", {"error": "Viewers cannot change work orders."}, "Refused a change")
            return
        if target is not None and target not in self.state.seen_ids:
            _fill(
                answer,
                "blocked",
                {
                    "error": ErrorCode.AI_INJECTION_BLOCKED.value,
                    "message": "That work order did "
                    "not appear in any result of this conversation, so it cannot be changed.",
                },
                "Blocked a change to a work order it had not looked up",
            )
            return
        if target is not None and target not in self.state.versions:
            _fill(
                answer,
                "need_read_first",
                {"error": "need_read_first", "message": "Look this work order up with a list or search tool first."},
                "Needs to look the work order up first",
            )
            return
        async for event in self._stage_and_wait(tool, call, args, key, answer, context=context):
            yield event

    async def _stage_and_wait(
        self, tool: Tool, call: ToolCallRequest, args: dict, key: str, answer: dict, *, context: ToolContext
    ):
        pre, version = None, None
        if tool.preimage is not None:
            image = await tool.preimage(context, tool.args.model_validate(args))
            if image is None:
                _fill(answer, "error", {"error": "That work order no longer exists."}, "Found the work order gone")
                return
            pre, version = image.fields, image.version
        shown = approvals.diff(tool.name, args, pre)
        if not shown.changed:  # nothing to show the person, nothing to make
            _fill(answer, "error", {"error": "This change would change nothing."}, "Proposed a change of nothing")
            return
        answer["staged"] = True
        answer["record"] = False  # the staged tool call is its own record
        self.staged = True
        ttl = timedelta(milliseconds=self.settings.ai_approval_ttl_ms)
        while True:
            staged = await approvals.stage(
                self.db,
                record_id=answer["id"],
                run_id=self.run["_id"],
                user_id=self.run["userId"],
                tool=tool.name,
                call_id=call.id,
                args=args,
                pre_image=pre,
                version=version,
                ttl=ttl,
            )
            yield ToolApprovalRequired(
                tool_call_id=str(staged["_id"]),
                tool=tool.name,
                args=args,
                diff=shown,
                expires_at=staged["approval"]["expiresAt"],
            )
            decided = await self._wait_for_decision(staged)
            status = decided["approval"]["status"]
            if status == "expired":
                raise RunEnded("expired", ToolApprovalExpired(tool_call_id=str(staged["_id"])))
            if status == "rejected":
                await self._rejected(tool, staged, key, decided, answer)
                return
            person, running = await asyncio.gather(
                self._person_now(), runs.renew_lease(self.db, self.run["_id"], LEASE)
            )
            if self.interrupted or not running:  # ended since the click (a logout, the sweeper): nothing is made
                await runs.update_tool_call(self.db, staged["_id"], {"outcome": "aborted"})
                raise RunEnded("aborted")
            if person is None or person.role not in tool.roles:  # turned off, deactivated or demoted meanwhile
                await runs.update_tool_call(self.db, staged["_id"], {"outcome": "forbidden"})
                _fill(answer, "forbidden", {"error": "This account can no longer make changes."}, "Refused a change")
                return
            context = self._context(person)
            # Shielded: a change under way is finished and recorded even if the run is stopped meanwhile
            # (Stop, a closed tab, a logout); cut off halfway, its record would not say what happened.
            execution = asyncio.ensure_future(
                self._execute(tool, staged, args, version, answer, key=key, context=context)
            )
            try:
                refreshed = await asyncio.shield(execution)
            except asyncio.CancelledError:
                await asyncio.wait([execution])
                raise
            if refreshed is None:
                return
            pre, version = refreshed  # stale: stage again with the fresh pre-image,
            shown = approvals.diff(tool.name, args, pre)
            answer["id"] = ObjectId()  # as a new proposal with its own id (the stale one keeps its record)

    async def _wait_for_decision(self, staged: dict) -> dict:
        while True:
            await asyncio.sleep(POLL_SECONDS)
            current = await runs.get_tool_call(self.db, staged["_id"])
            if current["approval"]["status"] != "pending":
                return current
            if current["approval"]["expiresAt"] <= now():
                await approvals.expire_for_run(self.db, self.run["_id"])
                return {**current, "approval": {**current["approval"], "status": "expired"}}
            if self.interrupted or not await runs.renew_lease(self.db, self.run["_id"], LEASE):  # ended elsewhere
                raise RunEnded("aborted")

    async def _rejected(self, tool: Tool, staged: dict, key: str, decided: dict, answer: dict) -> None:
        self.state.rejected[key] = self.state.rejected.get(key, 0) + 1
        await runs.update_tool_call(self.db, staged["_id"], {"outcome": "rejected"})
        if self.state.rejected[key] >= 2:
            raise RunEnded(
                "error",
                Error(
                    code=ErrorCode.VALIDATION_ERROR,
                    message="The assistant proposed the same rejected change again, so it was stopped.",
                ),
                "loop_detected",
            )
        reason = decided["approval"].get("reason")
        result = {"rejected": True, "reason": reason} if reason else {"rejected": True}
        _fill(answer, "rejected", result, "You rejected the change")

    async def _execute(
        self, tool: Tool, staged: dict, args: dict, version: int | None, answer: dict, *, key: str, context: ToolContext
    ):
        """Run an approved write at the staged version; a moved version re-stages instead (never executes stale)."""
        started = time.monotonic()
        parsed = tool.args.model_validate(args)  # frozen args, validated again at execution
        if tool.preimage is not None:
            image = await tool.preimage(context, parsed)
            if image is None:
                await runs.update_tool_call(self.db, staged["_id"], {"outcome": "error", "result": {"error": "gone"}})
                _fill(answer, "error", {"error": "That work order no longer exists."}, "Found the work order gone")
                return None
            if image.version != version:
                await runs.update_tool_call(self.db, staged["_id"], {"outcome": "stale", "approval.status": "stale"})
                return image.fields, image.version
        try:
            output = await tool.run(context, parsed, version)
        except Conflict:
            await runs.update_tool_call(self.db, staged["_id"], {"outcome": "stale", "approval.status": "stale"})
            image = await tool.preimage(context, parsed) if tool.preimage else None
            if image is None:
                _fill(answer, "error", {"error": "That work order changed and is gone."}, "Found the work order gone")
                return None
            return image.fields, image.version
        except DeskError as error:
            await runs.update_tool_call(
                self.db, staged["_id"], {"outcome": "error", "result": {"error": error.message}}
            )
            _fill(answer, "error", {"error": error.message}, "The change could not be made")
            return None
        executed = next(iter(output.seen.values()), None)
        await runs.update_tool_call(
            self.db,
            staged["_id"],
            {
                "outcome": "executed",
                "result": output.result,
                "executedVersion": executed,
                "latencyMs": int((time.monotonic() - started) * 1000),
            },
        )
        self.state.versions.update(output.seen)
        self.state.seen_ids.update(output.seen)
        self.state.executed.add(key)
        self.state.cache.clear()  # earlier reads no longer describe the desk: answering from them would be stale
        self.state.pasted.clear()
        _fill(answer, "executed", output.result, tool.say(output))
        return None

    # --- bookkeeping ---------------------------------------------------------------------

    def _context(self, person: Actor) -> ToolContext:
        """What a tool runs as: the person as `_person_now` just read them, in this run."""
        return ToolContext(db=self.db, actor=person, run_id=self.run_id)

    async def _person_now(self) -> Actor | None:
        """The person with the role stored now, or None when AI is off for them (or the desk), or they are gone.

        Read again before every model call, every tool call and every approved change: someone turned
        off, deactivated or demoted while the run went on must not keep what they had when it began.
        """
        user = await users_service.get_user(db=self.db, actor=self.actor, user_id=self.actor.id)
        if not (self.settings.ai_enabled and user and user.ai_enabled and user.active):
            return None
        return Actor(id=self.actor.id, role=Role(user.role))

    async def _before_call(self, messages: list[dict]) -> Error | None:
        """Checks between steps: still running (not aborted), still allowed, budget left, context fits."""
        if self.interrupted:
            raise RunEnded("aborted")
        if self.fresh:
            self.fresh = False
            return self._context_too_long(messages)
        leased, person, within_budget = await asyncio.gather(
            runs.renew_lease(self.db, self.run["_id"], LEASE),
            self._person_now(),
            budget.check(self.db, self.settings, user_id=self.actor.id, agent=AGENT),
            return_exceptions=True,
        )
        for outcome in (leased, person):
            if isinstance(outcome, BaseException):
                raise outcome
        if not leased:
            raise RunEnded("aborted")  # ended elsewhere (logout, the sweeper): stop
        if person is None:
            return Error(code=ErrorCode.FORBIDDEN, message="AI assistance was turned off.")
        if isinstance(within_budget, budget.BudgetExceeded):
            return Error(code=ErrorCode.AI_BUDGET_EXCEEDED, message=within_budget.message)
        if isinstance(within_budget, BaseException):
            raise within_budget
        return self._context_too_long(messages)

    def _context_too_long(self, messages: list[dict]) -> Error | None:
        if _tokens(messages) > self.settings.ai_max_context_tokens:
            return Error(code=ErrorCode.AI_BUDGET_EXCEEDED, message="This conversation is too long; start a new one.")
        return None

    async def _require_records(self) -> None:
        """The run ends here, as an error, when its own record or the person's message could not be stored."""
        if not await self.recorded():
            raise _not_stored()

    async def _charge(self, usage: Usage) -> None:
        """The spend ledger, for one model call (the first also drops the person's stale rate counters).

        Shielded, as is every bill: a call made is a call paid, even when the listener leaves meanwhile.
        """
        tidy, self.tidy = self.tidy, ()
        usd = self.provider.cost(usage)
        await asyncio.shield(budget.charge(self.db, user_id=self.actor.id, agent=AGENT, usd=usd, tidy=tidy))

    async def _bill(self, usage: Usage) -> None:
        """One model call, to the ledger and to its run (if the run could be stored)."""
        await self.recorded()
        writes = [self._charge(usage)]
        if self.run_stored:
            writes.append(runs.record_usage(self.db, self.run["_id"], self._usage(usage)))
        await asyncio.shield(_together(*writes))

    async def _record_usage(self) -> None:
        """Add the call already charged to the ledger to its run."""
        usage, self.unrecorded = self.unrecorded, None
        if usage is not None and self.run_stored:
            await asyncio.shield(runs.record_usage(self.db, self.run["_id"], self._usage(usage)))

    def _usage(self, usage: Usage) -> dict:
        cost = self.provider.cost(usage)
        return {"inputTokens": usage.input_tokens, "outputTokens": usage.output_tokens, "costUsd": cost}

    async def _history(self) -> list[dict]:
        """System prompt, earlier turns of this session (oldest dropped first to fit), this message."""
        if self.window is None:  # not kept in this process (or not current): the database knows
            earlier = await runs.session_messages(self.db, self.session["_id"], limit=WINDOW)
            # this run's own message may be stored already (it is written meanwhile): it is added below
            mine = self.run["_id"]
            self.window = [kept(m["role"], m["content"], m["createdAt"]) for m in earlier if m.get("runId") != mine]
            self.window.append(kept("user", self.content))
        turns = [{"role": role, "content": content} for role, content, _ in self.window[-WINDOW:] if content]
        messages = [{"role": "system", "content": SYSTEM_PROMPT}, *turns]
        while len(messages) > 2 and _tokens(messages) > self.settings.ai_max_context_tokens * 3 // 4:
            del messages[1]
        return messages

    async def _write_records(self, content: str) -> None:
        # In order: a message never points at a run that was not stored.
        await runs.insert_run(self.db, self.run)
        self.run_stored = True
        await self._say("user", content, into_window=False)  # `record` put it there: the model call must not wait

    async def _say(self, role: str, content: str, *, into_window: bool = True, **extra: Any) -> None:
        """Store one message of the run; one that cannot be stored ends the run (`record_failed`)."""
        message_id = ObjectId()
        self.unsure = True
        message = {"_id": message_id, "sessionId": self.session["_id"], "runId": self.run["_id"], "role": role}
        try:
            stored_at = await runs.add_message(self.db, {**message, "content": content, **extra})
        except (PyMongoError, InvalidDocument) as error:
            # the type only: a driver's message may quote the document, and with it the person's words (SEC-1)
            log.error("could not store a copilot message (%s)", type(error).__name__)
            raise _not_stored() from None
        self.unsure = False
        self.last_message = message_id
        if into_window and self.window is not None:  # stamped as stored: it leaves memory when it leaves the database
            self.window.append(kept(role, content, stored_at))

    async def _record(self, call: ToolCallRequest, answer: dict, started: float) -> None:
        await runs.insert_tool_call(
            self.db,
            {
                "_id": answer["id"],
                "runId": self.run["_id"],
                "userId": self.run["userId"],
                "tool": call.name[:80],
                "callId": call.id,
                "args": answer.get("args", {}),
                "outcome": answer["outcome"],
                "result": answer.get("result_doc"),
                "latencyMs": int((time.monotonic() - started) * 1000),
            },
        )

    async def _finish(self, status: str, code: str | None = None) -> str:
        """End the run as `status` unless someone else (a logout, the sweeper) ended it first; returns how it ended."""
        if not await self.recorded():
            status, code = "error", "record_failed"  # what was stored of it (if anything) says why it stopped
        usage = self._usage(self.unrecorded) if self.unrecorded is not None else None
        self.unrecorded = None
        moved = await runs.finish_run(self.db, self.run["_id"], status, error_code=code, usage=usage)
        if self.staged:  # whoever ended the run, none of its approvals may stay pending
            await approvals.expire_for_run(self.db, self.run["_id"])
        if moved:
            return status
        stored = await runs.get_run(self.db, self.run["_id"])
        return stored["status"] if stored else status

    async def _release(self) -> None:
        """Free the session, leaving the mark that tells the next turn whether our window is still current."""
        if not await self.recorded() or self.unsure or self.window is None:
            mark = ObjectId()  # matches no window anywhere: the next turn reads the database
            history.HISTORIES.drop(self.session["_id"])
        else:
            mark = self.last_message
            history.HISTORIES.put(self.session["_id"], mark, self.window)
        await runs.release_session(self.db, self.session["_id"], self.run["_id"], history_mark=mark)


_background: set[asyncio.Task] = set()  # record and wind-down tasks nobody may await (strong refs until done)
_LIVE: dict[str, weakref.WeakSet[CopilotTurn]] = {}  # person id -> their turns in this process
INTERRUPTED = "Stopped: this conversation was ended elsewhere (you signed out, or your access changed)."


def interrupt(user_id: str) -> None:
    """Stop this process's turns of `user_id` at once; `sessions.abort_runs` has ended their runs in the database.

    On its own a turn notices that only at its next check, which may come after a long model call
    (or, in another web process, at its lease keeper's next renewal: a third of a lease). A turn in
    another process that has not stored its run yet (no first token so far) is not found there: it
    stops at its next step's check only if its person lost AI access, else it runs to its end.
    """
    for turn in tuple(_LIVE.get(user_id, ())):
        turn.interrupt()


def _recorded_in_background(task: asyncio.Task) -> None:
    _background.discard(task)
    if not task.cancelled() and not isinstance(error := task.exception(), (RunEnded, type(None))):
        log.error("could not store a copilot run (%s)", type(error).__name__)  # the type only, as in _say


def _closed_in_background(task: asyncio.Task) -> None:
    _background.discard(task)
    if not task.cancelled() and (error := task.exception()) is not None:
        log.error("could not end a copilot run (%s)", type(error).__name__)


def _not_stored() -> "RunEnded":
    message = "Your message or its answer could not be saved, so the assistant stopped."
    return RunEnded("error", Error(code=ErrorCode.INTERNAL, message=message), "record_failed")


async def _together(*writes: Awaitable[Any]) -> None:
    """Side by side, all awaited to their end (none left running unseen); then the first failure is raised."""
    for outcome in await asyncio.gather(*writes, return_exceptions=True):
        if isinstance(outcome, BaseException):
            raise outcome


def _fill(answer: dict, outcome: str, result: dict, summary: str) -> None:
    answer.update(outcome=outcome, content=json.dumps(result, ensure_ascii=False), summary=summary, result_doc=result)


def _fingerprint(tool: str, args: dict) -> str:
    return hashlib.sha256(f"{tool}:{json.dumps(args, sort_keys=True)}".encode()).hexdigest()


def _validation_text(error: Exception) -> str:
    if isinstance(error, ValidationError):
        return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}" for e in error.errors()[:3])
    return "wrong shape"


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
