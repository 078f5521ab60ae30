"""Work-order shapes. The agent's tool schemas are derived from the write models here."""

from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from desk.schema import (
    MAX_LIMIT,
    MAX_OFFSET,
    ApiModel,
    IdStr,
    Keep,
    ObjectIdStr,
    ReadModel,
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
Version = Annotated[int, Field(ge=1, le=2**31)]


class WorkOrderCreate(ApiModel):
    title: Title
    description: Description = ""
    priority: Priority = "medium"
    owner_id: ObjectIdStr | None = None  # admins only: create on someone's behalf


class WorkOrderUpdate(ApiModel):
    """A change to some fields; `version` is the one the person saw (optimistic concurrency)."""

    model_config = ConfigDict(json_schema_extra={"minProperties": 2})  # the version and something to change

    version: Version
    title: Keep[Title] = None
    description: Keep[Description] = None
    priority: Keep[Priority] = None
    status: Keep[Status] = None
    owner_id: Keep[ObjectIdStr] = None  # admins only

    def changes(self) -> dict[str, object]:
        """The fields to change, as stored (camelCase), without `version`."""
        return self.model_dump(exclude_none=True, by_alias=True, exclude={"version"})


class WorkOrderRead(ReadModel):
    id: IdStr = Field(validation_alias="_id")
    title: str
    description: str
    priority: Priority
    status: Status
    owner_id: IdStr
    version: int
    created_at: datetime
    updated_at: datetime
    closed_at: datetime | None = None


Sort = Literal["-createdAt", "createdAt", "-updatedAt", "updatedAt", "-priority", "priority", "title", "-title"]


class WorkOrderQuery(BaseModel):
    """List filters from the query string."""

    model_config = ConfigDict(extra="forbid")

    q: str | None = Field(None, max_length=200)
    status: Status | None = None
    priority: Priority | None = None
    owner_id: ObjectIdStr | None = Field(None, alias="ownerId")
    sort: Sort = "-createdAt"
    offset: int = Field(0, ge=0, le=MAX_OFFSET)
    limit: int = Field(25, ge=1, le=MAX_LIMIT)

    @field_validator("q")
    @classmethod
    def _blank_is_none(cls, value: str | None) -> str | None:
        return value.strip() or None if value else None


class ActivityRead(ReadModel):
    id: IdStr = Field(validation_alias="_id")
    work_order_id: IdStr
    actor_id: str
    actor_kind: Literal["human", "system"]
    action: Literal["created", "updated", "deleted"]
    before: dict | None = None
    after: dict | None = None
    run_id: str | None = None
    at: datetime
