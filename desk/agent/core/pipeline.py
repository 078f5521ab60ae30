"""The guards every tool call passes (spec §4.2, §4.6, §4.7), each one small step with a frozen answer.

A call goes gate -> parse -> either `read`, or the `WRITE_GUARDS` in order and then staging
(`staging.Staging`). A step that stops the call answers with a `ToolAnswer` (what the model is
shown, what the person reads); one that lets it pass returns what the next step needs, or None.
The steps count the run's mistakes in its `RunState` and end the run (`RunEnded`) when the model
keeps making them.
"""

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from bson import ObjectId
from pydantic import ValidationError

from desk.actors import Actor
from desk.agent.core.events import ToolOutcome
from desk.agent.core.provider import ToolCallRequest
from desk.agent.core.state import RunState, stopped
from desk.agent.core.tools import Mode, Refusal, Registry, Tool, ToolArgs, ToolContext
from desk.errors import DeskError, ErrorCode, ValidationFailed


@dataclass(frozen=True)
class ToolAnswer:
    """What one tool call came to; `id` is the desk's id for it (the record's, and the approval's when staged)."""

    id: ObjectId
    outcome: ToolOutcome
    result: dict[str, Any]  # what the model is shown (and the record keeps)
    summary: str  # what the person reads
    args: dict[str, Any] = field(default_factory=dict)
    staged: bool = False  # put before the person: this step's one write, and its own record

    @property
    def content(self) -> str:
        return json.dumps(self.result, ensure_ascii=False)


@dataclass(frozen=True)
class Call:
    """A tool call past the gate and the parser: the tool, its validated arguments, what it runs as."""

    id: ObjectId
    request: ToolCallRequest
    tool: Tool
    args: dict[str, Any]
    context: ToolContext
    wrote: bool = False  # a change was staged earlier in this step

    @cached_property
    def key(self) -> str:
        """The call's fingerprint: the same tool with the same arguments."""
        return hashlib.sha256(f"{self.tool.name}:{json.dumps(self.args, sort_keys=True)}".encode()).hexdigest()

    @cached_property
    def target(self) -> str | None:
        """The work order a write names (None for a create)."""
        return self.tool.target(self.parsed())

    def parsed(self) -> ToolArgs:
        """The frozen arguments validated again (SEC-1: a failure carries no value; see `revalidate`)."""
        return revalidate(self.tool, self.args)

    def answer(self, outcome: ToolOutcome, result: dict[str, Any], summary: str, **more: Any) -> ToolAnswer:
        return ToolAnswer(self.id, outcome, result, summary, args=self.args, **more)


def gate(
    request: ToolCallRequest,
    registry: Registry,
    *,
    id: ObjectId,
    mode: Mode,
    person: Actor | None,
    actor: Actor,
    state: RunState,
) -> Tool | ToolAnswer:
    """The tool from `registry` if `person` (as stored now; None: `access.can_use_ai` says no) may use it;
    three unknown tools end the run."""
    gated = registry.gate(request.name, mode=mode, actor=person or actor, ai_enabled=person is not None)
    if not isinstance(gated, Refusal):
        return gated
    if gated.outcome == "unknown_tool":
        state.unknown_tools += 1
        if state.unknown_tools >= 3:
            message = "The assistant kept asking for tools that do not exist, so it was stopped."
            raise stopped(ErrorCode.INTERNAL, message, "unknown_tools")
    summary = (
        "Refused a tool it may not use" if gated.outcome == "forbidden" else "Asked for a tool that does not exist"
    )
    return ToolAnswer(id, gated.outcome, {"error": gated.message}, summary)


def parse(
    request: ToolCallRequest, tool: Tool, *, id: ObjectId, context: ToolContext, state: RunState, wrote: bool
) -> Call | ToolAnswer:
    """JSON-decode and validate the model's arguments; a failure is an error result, twice ends the run."""
    try:
        # pydantic's JSON parser, not json.loads: deeply nested arguments are a validation error
        # here, where json.loads raised RecursionError and crashed the run.
        args = tool.args.model_validate_json(request.arguments or "{}")
    except ValidationError as problem:
        state.bad_args += 1
        if state.bad_args >= 2:
            message = "The assistant sent invalid tool arguments twice, so it was stopped."
            raise stopped(ErrorCode.VALIDATION_ERROR, message, "malformed_args") from None
        invalid_json = any(e["type"] == "json_invalid" for e in problem.errors())
        detail = "not valid JSON" if invalid_json else _validation_text(problem)
        return ToolAnswer(id, "error", {"error": f"Invalid arguments: {detail}"}, "Sent invalid arguments to a tool")
    dumped = args.model_dump(mode="json", exclude_none=True)  # frozen as JSON text: a due moment as RFC 3339
    dumped |= {key: None for key in args.clearable & args.model_fields_set if getattr(args, key) is None}
    return Call(id=id, request=request, tool=tool, args=dumped, context=context, wrote=wrote)


async def read(call: Call, state: RunState) -> ToolAnswer:
    """Run a read; the same question gets a short reminder, and a result already shown is never pasted twice."""
    if call.key in state.cache:  # convergence guard: the same question gets a short reminder, not a re-paste
        return call.answer("ok", {"note": "Same result as your earlier identical call."}, "Reused an earlier answer")
    tool = call.tool
    try:
        output = await tool.run(call.context, call.parsed())
    except DeskError as error:
        return call.answer("error", {"error": error.message}, f"Could not use {tool.name}")
    state.versions.update(output.seen)
    # Only the objects a tool returned count as seen; an id quoted in their text (a description naming
    # another order) is an attacker's word, not a result.
    state.seen_ids.update(output.seen)
    shown = json.dumps(output.result, sort_keys=True)
    state.cache[call.key] = "done"
    digest = hashlib.sha256(shown.encode()).hexdigest()
    if earlier := state.pasted.get(digest):  # spec §4.7: an identical result is never pasted twice
        note = f"Same result as your earlier {earlier} call in this turn."
        return call.answer("ok", {"note": note}, "Reused an earlier answer")
    state.pasted[digest] = tool.name
    return call.answer("ok", output.result, tool.say(output))


# --- before a write is staged: each guard refuses the call, or passes it on (None) --------------


def one_write_per_step(call: Call, state: RunState) -> ToolAnswer | None:
    if not call.wrote:
        return None
    message = "Only one change can be proposed at a time. Propose the next one after the person decided on this one."
    return call.answer("error", {"error": message}, "Held back a second change")


def made_already(call: Call, state: RunState) -> ToolAnswer | None:
    """Convergence guard: never put the same change to the person twice."""
    if call.key not in state.executed:
        return None
    return call.answer("ok", {"note": "This exact change was already made."}, "Reused an earlier answer")


def viewers_change_nothing(call: Call, state: RunState) -> ToolAnswer | None:
    """COP-5 (the gate already refuses; kept explicit for the audit)."""
    if call.context.actor.role != "viewer":
        return None
    return call.answer("forbidden", {"error": "Viewers cannot change work orders."}, "Refused a change")


def pin_ids(call: Call, state: RunState) -> ToolAnswer | None:
    """A write may name only a work order that appeared in a result of this run (else `blocked`)."""
    if call.target is None or call.target in state.seen_ids:
        return None
    message = "That work order did not appear in any result of this conversation, so it cannot be changed."
    return call.answer(
        "blocked",
        {"error": ErrorCode.AI_INJECTION_BLOCKED.value, "message": message},
        "Blocked a change to a work order it had not looked up",
    )


def read_first(call: Call, state: RunState) -> ToolAnswer | None:
    """A write needs a read of its target in this run: the version is never the model's."""
    if call.target is None or call.target in state.versions:
        return None
    return call.answer(
        "need_read_first",
        {"error": "need_read_first", "message": "Look this work order up with a list or search tool first."},
        "Needs to look the work order up first",
    )


Guard = Callable[[Call, RunState], ToolAnswer | None]
WRITE_GUARDS: tuple[Guard, ...] = (one_write_per_step, made_already, viewers_change_nothing, pin_ids, read_first)


def revalidate(tool: Tool, args: dict[str, Any]) -> ToolArgs:
    """The frozen `args` validated again; ValidationFailed, naming fields and rules only, when they no longer pass.

    Never pydantic's own error: its text quotes the input (`input_value=...`), which is the model's
    answer or a work order's text, and an exception's text ends up in a log line (SEC-1).
    """
    try:
        return tool.args.model_validate(args)
    except ValidationError as problem:
        raise ValidationFailed(f"Invalid arguments: {_validation_text(problem)}") from None


def _validation_text(error: Exception) -> str:
    if isinstance(error, ValidationError):
        return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}" for e in error.errors()[:3])
    return "wrong shape"


# --- the toolset the loop calls: the registry's tools, each behaviour a wrapper around them ------


@dataclass(frozen=True)
class Deferred:
    """A write past every guard: it runs only once the person approves it (the copilot's `Staging`)."""

    call: Call


@dataclass(frozen=True)
class Asked:
    """One tool call as the loop hands it over: the model's request, and who it runs for as stored now."""

    request: ToolCallRequest
    id: ObjectId  # the desk's id for the call (its record's; the approval's when staged)
    person: Actor | None  # as stored now; None: AI is off for them, or they are gone
    actor: Actor
    context: ToolContext
    wrote: bool  # a change was staged earlier in this step


class Toolset:
    """An agent's tools from `registry`: a call is gated and parsed, then `run`; a read answers at once.

    Behaviour around the tools (approval, the write guards) comes as wrappers (`Wrapper`), in the
    manner of pydantic-ai's toolsets: the loop sees only an answer or a `Deferred` approval.
    """

    def __init__(self, registry: Registry, mode: Mode) -> None:
        self.registry, self.mode = registry, mode

    async def call(self, asked: Asked, state: RunState) -> ToolAnswer | Deferred:
        tool = gate(
            asked.request, self.registry, id=asked.id, mode=self.mode, person=asked.person, actor=asked.actor,
            state=state,
        )  # fmt: skip
        if isinstance(tool, ToolAnswer):
            return tool
        call = parse(asked.request, tool, id=asked.id, context=asked.context, state=state, wrote=asked.wrote)
        if isinstance(call, ToolAnswer):
            return call
        return await self.run(call, state)

    async def run(self, call: Call, state: RunState) -> ToolAnswer | Deferred:
        """The tool itself: only reads get here (a write is deferred by `ApprovalRequired` first)."""
        if call.tool.writes:  # no wrapper held it back: a write never runs without the person's approval
            raise RuntimeError(f"{call.tool.name} writes: its toolset needs ApprovalRequired")
        return await read(call, state)


class Wrapper(Toolset):
    """A toolset around another: the same gate and parser, its own step before the inner `run`."""

    def __init__(self, inner: Toolset) -> None:
        super().__init__(inner.registry, inner.mode)
        self.inner = inner

    async def run(self, call: Call, state: RunState) -> ToolAnswer | Deferred:
        return await self.inner.run(call, state)


class ApprovalRequired(Wrapper):
    """Every write waits for the person: it comes back `Deferred`, never run here."""

    async def run(self, call: Call, state: RunState) -> ToolAnswer | Deferred:
        return Deferred(call) if call.tool.writes else await self.inner.run(call, state)


class Guarded(Wrapper):
    """A write the guard refuses is answered with the refusal (one write a step, id pinning, read-first...)."""

    def __init__(self, inner: Toolset, guard: Guard) -> None:
        super().__init__(inner)
        self.guard = guard

    async def run(self, call: Call, state: RunState) -> ToolAnswer | Deferred:
        if call.tool.writes and (refused := self.guard(call, state)) is not None:
            return refused
        return await self.inner.run(call, state)


def guarded_toolset(registry: Registry, mode: Mode) -> Toolset:
    """The registry's tools with every write guard, in `WRITE_GUARDS` order, and then the person's approval."""
    toolset: Toolset = ApprovalRequired(Toolset(registry, mode))
    for guard in reversed(WRITE_GUARDS):  # the first guard is the outermost: it answers first
        toolset = Guarded(toolset, guard)
    return toolset
