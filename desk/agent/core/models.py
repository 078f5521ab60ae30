"""The AI surface's HTTP shapes (spec §8.3)."""

from datetime import datetime
from typing import Any, Literal

from pydantic import AliasChoices, Field, model_validator

from desk.agent.core.events import ApprovalStatus, RunStatus, ToolOutcome
from desk.schema import ApiModel, IdStr, ReadModel, multi_line, stripped

MessageText = multi_line(min_length=1, max_length=4000)


class MessageIn(ApiModel):
    content: MessageText


class DecideIn(ApiModel):
    approve: bool
    reason: stripped(max_length=300) | None = None


class CopilotSessionRead(ReadModel):
    id: IdStr = Field(validation_alias="_id")
    user_id: IdStr
    status: str
    created_at: datetime
    updated_at: datetime


class SessionMessage(ReadModel):
    role: str
    content: str
    created_at: datetime


class CopilotSessionWithMessages(CopilotSessionRead):
    messages: list[SessionMessage] = Field(default_factory=list)


class Approval(ReadModel):
    status: ApprovalStatus
    expires_at: datetime
    decided_at: datetime | None = None
    reason: str | None = None


class AgentToolCallRead(ReadModel):
    id: IdStr = Field(validation_alias="_id")
    run_id: IdStr
    tool: str
    args: dict[str, Any]
    outcome: ToolOutcome
    result: dict[str, Any] | None = None
    latency_ms: int = 0
    created_at: datetime
    staged_version: int | None = None
    executed_version: int | None = None
    pre_image: dict[str, Any] | None = None
    approval: Approval | None = None


class AgentRunRead(ReadModel):
    """A run; `actorId` is whom it ran as: the person (`actorKind` human), or the System Actor for the triage agent."""

    id: IdStr = Field(validation_alias="_id")
    mode: str
    actor_id: IdStr | None = Field(None, validation_alias=AliasChoices("actorId", "userId"))
    actor_kind: Literal["human", "system"] | None = Field(None, validation_alias="actorKind")
    agent_name: str | None = None
    status: RunStatus
    model: str
    input_tokens: int
    output_tokens: int
    started_at: datetime
    finished_at: datetime | None = None
    error_code: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _a_person_runs_as_themselves(cls, data: Any) -> Any:
        # a copilot run names its person as userId alone; a triage run stores actorId and actorKind
        if isinstance(data, dict) and data.get("userId") and "actorKind" not in data:
            return {**data, "actorKind": "human"}
        return data


class RunMessage(SessionMessage):
    content: str | None = None  # a run's messages include its assistant steps that only called tools


class AgentRunDetail(ReadModel):
    """GET /runs/{id}: the run, its messages (tool results included) and its tool calls, oldest first."""

    run: AgentRunRead
    messages: list[RunMessage]
    tool_calls: list[AgentToolCallRead]
