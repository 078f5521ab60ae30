"""The tool registry: what each tool accepts, who may use it, whether it writes, and the gate.

Every check here runs after the model answered, in code (spec §4.2, SEC-5): the model can ask for
anything; it gets only what the mode allowlist, the person's role and their AI switch permit.
A copilot tool is for people (by role), a triage tool for the System Actor with the `triage`
capability (SEC-6): never the other way round.
"""

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import cache
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model
from pymongo.asynchronous.database import AsyncDatabase

from desk.access import AI_OFF_FOR_YOU
from desk.actors import Actor
from desk.schema import without_text_patterns

Mode = Literal["copilot", "triage"]
MAX_ITEMS = 10  # spec §4.7: at most 10 documents from a list or search
MAX_CHARS = 4000  # ... and at most 4,000 characters each


@dataclass(frozen=True)
class ToolContext:
    db: AsyncDatabase
    actor: Actor
    run_id: str


@dataclass(frozen=True)
class ToolOutput:
    """What the model is shown, and the work-order versions it saw (kept by the runtime, never shown)."""

    result: dict[str, Any]
    seen: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class PreImage:
    """The target as it was when a write was staged: the diff's "before" and the version to write at."""

    fields: dict[str, Any]
    version: int


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    args: type[BaseModel]
    kind: Literal["read", "write"]
    roles: frozenset[str]
    mode: Mode
    run: Callable[..., Awaitable[ToolOutput]]  # reads: run(ctx, args); writes: run(ctx, args, version)
    say: Callable[[ToolOutput], str]  # what happened, in plain words for the person
    target: Callable[[BaseModel], str | None] = lambda _: None  # the work order a write names
    preimage: Callable[[ToolContext, BaseModel], Awaitable[PreImage | None]] | None = None

    @property
    def writes(self) -> bool:
        return self.kind == "write"

    def schema(self) -> dict[str, Any]:
        """The OpenAI `tools` entry the model sees (built once: it sits in front of every first token)."""
        return _schema(self.name, self.description, self.args)


@cache
def _schema(name: str, description: str, args: type[BaseModel]) -> dict[str, Any]:
    parameters = without_text_patterns(args.model_json_schema())  # the model sees what it did before the patterns
    parameters.pop("title", None)
    return {"type": "function", "function": {"name": name, "description": description, "parameters": parameters}}


class ToolArgs(BaseModel):
    """Arguments from the model: strict types, nothing unknown."""

    # By name too: frozen arguments are stored by field name and validated again at execution (`dueAt`: due_at).
    model_config = ConfigDict(extra="forbid", strict=True, validate_by_name=True, validate_by_alias=True)
    # Fields whose null the model may send to empty them (a due day taken away); other nulls mean "left out".
    clearable: ClassVar[frozenset[str]] = frozenset()


ObjectIdText = Field(pattern=r"^[0-9a-f]{24}$", description="A work-order id from an earlier tool result")


def derive(
    name: str,
    source: type[BaseModel],
    *,
    drop: set[str],
    with_id: bool = False,
    clearable: frozenset[str] = frozenset(),
) -> type[ToolArgs]:
    """A tool's argument model made from a write model: the same fields and rules, minus `drop`."""
    fields: dict[str, Any] = {"id": (str, ObjectIdText)} if with_id else {}
    for field_name, info in source.model_fields.items():
        if field_name not in drop:
            fields[field_name] = (info.annotation, info)
    model = create_model(name, __base__=ToolArgs, **fields)
    model.clearable = clearable
    return model


@dataclass(frozen=True)
class Refusal:
    outcome: Literal["unknown_tool", "forbidden"]
    message: str


class Registry:
    def __init__(self, tools: list[Tool]) -> None:
        self.tools = {tool.name: tool for tool in tools}

    def allowed(self, mode: Mode, actor: Actor) -> list[Tool]:
        """The tools offered to the model for this mode and actor."""
        return [t for t in self.tools.values() if t.mode == mode and _admits(t, actor)]

    def gate(self, name: str, *, mode: Mode, actor: Actor, ai_enabled: bool) -> Tool | Refusal:
        """The tool if this person may use it now, else why not (checked again for every call)."""
        tool = self.tools.get(name)
        if tool is None or tool.mode != mode:
            return Refusal("unknown_tool", f"There is no tool named {name[:60]!r}.")
        if not ai_enabled:
            return Refusal("forbidden", AI_OFF_FOR_YOU)
        if not _admits(tool, actor):
            return Refusal("forbidden", f"The tool {name} is not available to this person.")
        return tool


def _admits(tool: Tool, actor: Actor) -> bool:
    """A person by role, copilot tools only; the system by capability, triage tools only (SEC-6)."""
    if actor.is_human:
        return tool.mode != "triage" and actor.role in tool.roles
    return tool.mode == "triage" and actor.capability == "triage"


def clip(value: Any) -> Any:
    """Cap every string in a tool result at MAX_CHARS."""
    if isinstance(value, str):  # the ellipsis counts too: a clipped string is exactly MAX_CHARS long
        return value if len(value) <= MAX_CHARS else value[: MAX_CHARS - 1] + "…"
    if isinstance(value, dict):
        return {k: clip(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clip(v) for v in value]
    return value
