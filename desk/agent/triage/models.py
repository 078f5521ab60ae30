"""Triage shapes: the model's one tool call, suggestions, the policy, and the admin API's bodies."""

from datetime import UTC, date, datetime
from typing import Annotated, Literal
from zoneinfo import available_timezones

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
)
from pydantic_core import PydanticCustomError

from desk import hours
from desk.jobs.models import OutboxEventRead
from desk.schema import (
    DAY,
    FULL_DATE,
    RFC3339,
    WHEN,
    ApiModel,
    IdStr,
    Keep,
    ObjectIdStr,
    PageQuery,
    ReadModel,
    Timestamp,
    WholeNumber,
    after,
    midnight,
)
from desk.work_orders.models import Priority, Version, WorkOrderRead

Mode = Literal["suggest", "auto_apply"]
ApplyWhen = Literal["any", "raise_only"]  # raise_only: auto-apply never lowers what a person chose
AllowedField = Literal["priority"]  # v1: the triage may change priority and nothing else


DATA_MARKER = "WORK_ORDER_DATA"  # the prompt's delimiters of the order's text (prompt.BEGIN, prompt.END)


def _no_prompt(summary: str) -> str:
    # A summary that quotes the prompt's data markers is the prompt echoed back (a broken or steered model),
    # never a summary: it would put the prompt and half a JSON document on every screen that shows it.
    if DATA_MARKER.casefold() in summary.casefold():
        raise ValueError("must not quote the prompt")
    return summary


class TriageProposal(BaseModel):
    """What the triage proposes for one work order."""

    # The arguments of `triage_propose`, strictly: these three fields and nothing else (no status, no owner).

    model_config = ConfigDict(extra="forbid", strict=True)

    summary: Annotated[
        str, StringConstraints(strip_whitespace=True, min_length=1, max_length=280), AfterValidator(_no_prompt)
    ]
    suggestedPriority: Priority  # camelCase: the names the model sees, like the rest of the API
    flagForDispatcher: bool


def _hours(value: str) -> str:
    hours.parse(value)  # its ValueError says what is wrong
    return value


WorkingHours = Annotated[
    str, AfterValidator(_hours), Field(max_length=200, json_schema_extra={"pattern": hours.SCHEMA_PATTERN})
]


def _day_off(value: str) -> str:
    if not FULL_DATE.match(value):
        raise ValueError(DAY)
    try:
        date.fromisoformat(value)
    except ValueError:  # 2026-02-30
        raise ValueError(DAY) from None
    return value


DayOff = Annotated[str, AfterValidator(_day_off), Field(json_schema_extra={"format": "date"})]
# Stored as ISO text (BSON has no date without a time), sorted and once each.
DaysOff = Annotated[list[DayOff], AfterValidator(lambda days: sorted(set(days))), Field(max_length=1000)]


def _zone(value: str) -> str:
    if value not in available_timezones():
        raise ValueError("must be an IANA time zone such as Europe/Berlin")
    return value


def _zones(schema: dict[str, object]) -> None:
    schema["enum"] = sorted(available_timezones())


TimeZone = Annotated[str, AfterValidator(_zone), Field(json_schema_extra=_zones)]


def _once_each(fields: list[str]) -> list[str]:
    if len(set(fields)) != len(fields):
        raise ValueError("must name each field once")
    return fields


AllowedFields = Annotated[
    list[AllowedField], AfterValidator(_once_each), Field(json_schema_extra={"uniqueItems": True})
]


class AgentConfigRead(ReadModel):
    name: str = Field("triage", validation_alias="_id")
    enabled: bool
    mode: Mode
    allowed_fields: list[AllowedField]
    daily_action_cap: int
    flag_threshold: Priority
    working_hours: str
    time_zone: str
    days_off: list[str] = Field(default_factory=list)  # ISO dates in the time zone, on which no working hours start
    apply_when: ApplyWhen = "any"  # a policy stored before the option applies whatever the direction
    version: int
    updated_by: str | None = None
    updated_at: datetime


class AgentConfigUpdate(ApiModel):
    """PATCH …/triage/config: policy fields only (never the provider's URL or key), at the version read."""

    model_config = ConfigDict(json_schema_extra={"minProperties": 2})  # the version and something to change

    version: Version
    enabled: Keep[bool] = None  # the triage agent's own switch; the desk-wide one is POST …/disable, unversioned
    mode: Keep[Mode] = None
    allowed_fields: Keep[AllowedFields] = None
    daily_action_cap: Keep[Annotated[int, Field(ge=0, le=100_000), WholeNumber]] = None
    flag_threshold: Keep[Priority] = None
    working_hours: Keep[WorkingHours] = None
    time_zone: Keep[TimeZone] = None
    days_off: Keep[DaysOff] = None
    apply_when: Keep[ApplyWhen] = None


class AgentConfigAuditRead(ReadModel):
    id: IdStr = Field(validation_alias="_id")
    agent_name: str
    actor_id: str
    action: str
    before: dict | None = None
    after: dict | None = None
    created_at: datetime


class TriageSuggestionRead(ReadModel):
    id: IdStr = Field(validation_alias="_id")
    work_order_id: IdStr
    run_id: IdStr
    summary: str
    suggested_priority: Priority
    priority_before: Priority | None = None  # the order's priority when it was triaged (None: not kept then)
    flag_for_dispatcher: bool
    applied: bool
    applied_note: str | None = None
    decision: Literal["accepted", "dismissed"] | None = None
    decided_by: str | None = None
    decided_at: datetime | None = None
    created_at: datetime


def overtaken(suggestion: "TriageSuggestionRead", order: WorkOrderRead) -> bool:
    """Someone set the order's priority since the triage (to another than the suggested one): accepting would
    undo a person's decision with the agent's older one, so it is refused (the service) and not offered (the card)."""
    return priority_overtaken(suggestion.priority_before, suggestion.suggested_priority, order.priority)


def priority_overtaken(before: str | None, suggested: str, current: str) -> bool:
    """Someone set the priority since the triage read `before`, to another than the one it suggested."""
    return before not in (None, current) and suggested != current


class DecideSuggestionIn(ApiModel):
    accept: bool
    # The order's version an accept was made on: when given, an order changed since is a 409 (as on a PATCH).
    version: Version | None = None


class ManualRunIn(ApiModel):
    work_order_id: ObjectIdStr


class ManualRunOut(ReadModel):
    """What a manual run came to: suggested, applied, skipped (the person has AI off) or failed (and why)."""

    outcome: str
    run_id: IdStr | None = None
    error: str | None = None
    suggestion: TriageSuggestionRead | None = None


class AiSwitchRead(ReadModel):
    """The desk-wide AI switch (`POST /admin/agents/disable`, `/enable`): off, no agent runs; who flipped it, when."""

    enabled: bool
    changed_by: str | None = None  # None: never flipped
    changed_at: datetime | None = None


class ProviderStatus(ReadModel):
    """The AI provider as the agents last found it: `unreachable` while its breaker is open, since when, and why
    (the kind of failure: a status such as `status 503`, or a connection error's name)."""

    state: Literal["ok", "unreachable"]
    since: datetime | None = None
    last_error: str | None = None


class TriageOverview(AgentConfigRead):
    """GET /admin/agents/triage: the AgentConfig, plus whether AI is on at all, the queue and its dead letters.

    Three switches, each its own field: `enabled` (the policy's: the triage agent alone), `aiSwitch` (the
    admins' desk-wide switch: every agent), `aiEnabled` (AI_ENABLED, the environment's hard off). The
    triage agent runs while all three are on.
    """

    ai_enabled: bool
    ai_switch: AiSwitchRead
    events: dict[str, int]
    failed: list[OutboxEventRead]
    acceptance: list["AcceptanceDay"]
    provider: ProviderStatus


class RetryEventsIn(ApiModel):
    """Which events to put back in the queue: every dead letter (`failed`), the only kind an admin retries."""

    status: Literal["failed"]


class Requeued(ReadModel):
    requeued: int


class AcceptanceDay(ReadModel):
    day: str
    accepted: int
    dismissed: int


class AttentionItem(ReadModel):
    """One entry of the dispatcher's attention list: a flagged suggestion and its open order."""

    suggestion: TriageSuggestionRead
    order: WorkOrderRead


# The schema says both forms (the moment's format alone would call a day invalid).
MOMENT_OR_DAY = WithJsonSchema(
    {"anyOf": [{"type": "string", "format": "date-time"}, {"type": "string", "format": "date"}, {"type": "null"}]}
)


class RunQuery(PageQuery):
    """GET /admin/agents/runs filters: which agent, which status, started from `since` until before `until`.

    Each a moment, or a UTC day as the metrics take one (and the runs page's address shows one): `since`
    a day from its midnight, `until` a day through its end.
    """

    agent: Literal["copilot", "triage"] | None = None
    status: Literal["running", "complete", "error", "budget_exceeded", "expired", "aborted"] | None = None
    since: Annotated[Timestamp | None, MOMENT_OR_DAY] = None
    until: Annotated[Timestamp | None, MOMENT_OR_DAY] = None

    @field_validator("since", "until", mode="before")
    @classmethod
    def _a_day(cls, value: object, info: ValidationInfo) -> object:
        """A day as the moment it stands for; a moment is the Timestamp's to judge."""
        if not isinstance(value, str) or RFC3339.match(value):
            return value
        if not FULL_DATE.match(value):
            raise PydanticCustomError("datetime_format", f"{WHEN}, or a day such as 2026-01-31")
        try:
            day = date.fromisoformat(value)
        except ValueError:  # 2026-02-30
            raise PydanticCustomError("date_format", DAY) from None
        if info.field_name == "since":
            return midnight(day)
        return after(day) or datetime.max.replace(tzinfo=UTC)
