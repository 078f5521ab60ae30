"""What a copilot run tells its listener, one small frozen model per kind.

The SSE route JSON-encodes these (`event: <kind>`, `data: <json>`) and the copilot drawer renders
the same objects; event names come from this closed set, never from model text.
"""

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from desk.errors import ErrorCode

# How a run can stand: `running` until it moves, once, to one of the others (store.agent_runs.finish_run).
RunStatus = Literal["running", "complete", "aborted", "expired", "error", "budget_exceeded"]
# What became of one tool call: refused by a guard, answered, staged for the person, or what was made of it.
ToolOutcome = Literal[
    "ok",
    "error",
    "unknown_tool",
    "forbidden",
    "blocked",
    "need_read_first",
    "pending",
    "executed",
    "rejected",
    "stale",
    "expired",
    "aborted",
    "invalid",  # the triage agent's call whose output did not validate
]
ApprovalStatus = Literal["pending", "approved", "rejected", "expired", "stale"]


class _Event(BaseModel):
    # snake_case attributes for the Python that reads them (the drawer), camelCase on the wire like every
    # other JSON the desk sends (`toolCallId`, `runId`, `expiresAt`).
    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
    )


class Token(_Event):
    kind: Literal["token"] = "token"
    text: str


class ToolCallStart(_Event):
    kind: Literal["tool_call_start"] = "tool_call_start"
    tool_call_id: str
    tool: str


class Diff(_Event):
    """Before/after of a staged write, rendered by the server from the frozen args and the pre-image."""

    action: Literal["create", "update", "delete"]
    before: dict[str, Any] | None
    after: dict[str, Any] | None
    changed: list[str]


class ToolApprovalRequired(_Event):
    kind: Literal["tool_approval_required"] = "tool_approval_required"
    tool_call_id: str
    tool: str
    args: dict[str, Any]
    diff: Diff
    expires_at: datetime  # UTC; ISO 8601 on the wire, like every time the API sends


class ToolApprovalExpired(_Event):
    kind: Literal["tool_approval_expired"] = "tool_approval_expired"
    tool_call_id: str


class ToolResult(_Event):
    kind: Literal["tool_result"] = "tool_result"
    tool_call_id: str
    tool: str
    outcome: ToolOutcome
    summary: str  # plain words for people ("Looked up 3 of your work orders")


class MessageDone(_Event):
    kind: Literal["message_done"] = "message_done"
    run_id: str
    status: RunStatus
    notice: str | None = None


class Error(_Event):
    kind: Literal["error"] = "error"
    code: ErrorCode
    message: str


class Ping(_Event):
    kind: Literal["ping"] = "ping"


RunEvent = Annotated[
    Token | ToolCallStart | ToolApprovalRequired | ToolApprovalExpired | ToolResult | MessageDone | Error | Ping,
    Field(discriminator="kind"),
]
EVENT_KINDS = (
    "token",
    "tool_call_start",
    "tool_approval_required",
    "tool_approval_expired",
    "tool_result",
    "message_done",
    "error",
    "ping",
)
