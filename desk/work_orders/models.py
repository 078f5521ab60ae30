"""Work-order shapes. The agent's tool schemas are derived from the write models here."""

import re
from datetime import datetime
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, Strict, field_validator
from pydantic_core import PydanticCustomError

from desk.schema import (
    MAX_LIMIT,
    MAX_OFFSET,
    OBJECT_ID_PATTERN,
    WHEN,
    ApiModel,
    Day,
    IdStr,
    Keep,
    ObjectIdStr,
    ReadModel,
    Timestamp,
    WholeNumber,
    multi_line,
    single_line,
)

Priority = Literal["low", "medium", "high", "urgent"]
Status = Literal["pending", "in_progress", "done", "cancelled"]
PRIORITIES: tuple[Priority, ...] = ("low", "medium", "high", "urgent")
STATUSES: tuple[Status, ...] = ("pending", "in_progress", "done", "cancelled")
CLOSED: tuple[Status, ...] = ("done", "cancelled")
# What a person (and the copilot on their behalf) edits on an order; the owner is given, not edited.
EDITABLE: tuple[str, ...] = ("title", "description", "priority", "status")

Title = single_line(min_length=1, max_length=200)
Description = multi_line(max_length=5000)


def _moment(value: object) -> object:
    """Text in RFC 3339 (checked by `Timestamp`) or a datetime: not a number of seconds, which lax mode would take."""
    if not isinstance(value, str | datetime):
        raise PydanticCustomError("datetime_type", WHEN)
    return value


def _to_milliseconds(value: datetime) -> datetime:
    return value.replace(microsecond=value.microsecond // 1000 * 1000)  # what MongoDB keeps: it reads back equal


# When the order must be done by: a moment with its offset, stored in UTC (the forms pick a day: its end in the
# desk's time zone). Null on an update clears it.
DueAt = Annotated[Timestamp, Strict(False), BeforeValidator(_moment), AfterValidator(_to_milliseconds)]
Due = Literal["overdue", "today", "week"]  # the list's due views, of open orders (see repository.due_filter)
Version = Annotated[int, Field(ge=1, le=2**31), WholeNumber]  # the constraints first, for the schema


class WorkOrderCreate(ApiModel):
    title: Title
    description: Description = ""
    priority: Priority = "medium"
    # Left out: the creator works on it; null: the unassigned queue; someone else's id: admins only.
    owner_id: ObjectIdStr | None = None
    due_at: DueAt | None = None

    def owner_given(self) -> bool:
        """Whether the request named an owner (null included), rather than leaving the field out."""
        return "owner_id" in self.model_fields_set


class WorkOrderUpdate(ApiModel):
    """A change to some fields; `version` is the one the person saw (optimistic concurrency)."""

    model_config = ConfigDict(json_schema_extra={"minProperties": 2})  # the version and something to change

    version: Version
    title: Keep[Title] = None
    description: Keep[Description] = None
    priority: Keep[Priority] = None
    status: Keep[Status] = None
    # Your own id takes an order from the queue; admins give it to anyone who can work. Null puts it back in
    # the queue: its owner, or an admin.
    owner_id: ObjectIdStr | None = None
    due_at: DueAt | None = None  # null: no longer due by any day

    def changes(self) -> dict[str, object]:
        """The fields to change, as stored (camelCase), without `version`; `ownerId` and `dueAt` null when sent null."""
        found = self.model_dump(exclude_none=True, by_alias=True, exclude={"version"})
        for field, stored in (("owner_id", "ownerId"), ("due_at", "dueAt")):
            if field in self.model_fields_set and getattr(self, field) is None:
                found[stored] = None
        return found


class WorkOrderRead(ReadModel):
    id: IdStr = Field(validation_alias="_id")
    title: str
    description: str
    priority: Priority
    status: Status
    requester_id: IdStr
    owner_id: IdStr | None  # None: in the unassigned queue
    version: int
    created_at: datetime
    updated_at: datetime
    closed_at: datetime | None = None
    due_at: datetime | None = None


def _owner_filter(value: str) -> str:
    if value != "none" and not re.fullmatch(OBJECT_ID_PATTERN, value):
        # the pattern in the context words it as for any id ("must be an id of 24 hexadecimal digits")
        raise PydanticCustomError("string_pattern_mismatch", "not an id", {"pattern": OBJECT_ID_PATTERN})
    return value.lower()  # ids are compared as the desk writes them (your own id in capitals is still yours)


# A person's id, or "none": the unassigned queue.
OwnerFilter = Annotated[
    str, AfterValidator(_owner_filter), Field(json_schema_extra={"pattern": f"^(none|{OBJECT_ID_PATTERN[1:-1]})$"})
]


Sort = Literal[
    "-createdAt", "createdAt", "-updatedAt", "updatedAt", "-priority", "priority", "title", "-title", "dueAt"
]  # dueAt: soonest first, orders due by no day last


TIMELINE_PAGE = 200  # a timeline's entries per read: more than any order gathers in a normal life


class TimelineQuery(BaseModel):
    """A page of a timeline, newest first: page back by raising `offset` until fewer than `limit` come back."""

    model_config = ConfigDict(extra="forbid")

    offset: Annotated[int, Field(ge=0, le=MAX_OFFSET), WholeNumber] = 0
    limit: Annotated[int, Field(ge=1, le=TIMELINE_PAGE), WholeNumber] = TIMELINE_PAGE


class WorkOrderQuery(BaseModel):
    """List filters from the query string."""

    model_config = ConfigDict(extra="forbid")

    q: str | None = Field(None, max_length=200)
    status: list[Status] | None = Field(None, max_length=len(STATUSES))  # repeats: any of them ("open": 2)
    priority: Priority | None = None
    owner_id: OwnerFilter | None = Field(None, alias="ownerId")
    requester_id: ObjectIdStr | None = Field(None, alias="requesterId")  # who asked for the orders
    opened: Day | None = None  # orders opened on this UTC day (the metrics' per-day chart links here)
    due: Due | None = None  # open orders past their due moment, due today or in the 7 days from today (desk's zone)
    sort: Sort = "-createdAt"
    offset: Annotated[int, Field(ge=0, le=MAX_OFFSET), WholeNumber] = 0
    limit: Annotated[int, Field(ge=1, le=MAX_LIMIT), WholeNumber] = 25

    @field_validator("q")
    @classmethod
    def _blank_is_none(cls, value: str | None) -> str | None:
        return value.strip() or None if value else None

    @field_validator("status", mode="before")
    @classmethod
    def _one_or_many(cls, value: object) -> object:
        """One status (the copilot's tools) or several (the query string); the same status twice is once."""
        found = [value] if isinstance(value, str) else value
        return list(dict.fromkeys(found)) or None if isinstance(found, list) else found


class ActivityRead(ReadModel):
    id: IdStr = Field(validation_alias="_id")
    work_order_id: IdStr
    actor_id: str
    actor_kind: Literal["human", "system"]
    action: Literal["created", "updated", "deleted", "commented", "attached", "detached"]
    before: dict | None = None
    after: dict | None = None
    text: str | None = None  # a comment's words (plain text)
    # "attached", "detached": `after` names the file ({attachmentId, name, size})
    run_id: str | None = None
    at: datetime


Comment = multi_line(min_length=1, max_length=2000)


class CommentCreate(ApiModel):
    text: Comment


class CommentRead(ReadModel):
    id: IdStr = Field(validation_alias="_id")
    work_order_id: IdStr
    author_id: IdStr = Field(validation_alias="actorId")
    text: str
    at: datetime
