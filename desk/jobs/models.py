"""Job shapes: the stored job (the spec's OutboxEvent) as admins see it."""

from datetime import datetime
from typing import Literal

from pydantic import Field

from desk.schema import IdStr, ReadModel

EventStatus = Literal["pending", "processing", "done", "failed", "skipped"]


class OutboxEventRead(ReadModel):
    """A job: `type` names its task, `payload_ref` the thing it is about (its key)."""

    id: IdStr = Field(validation_alias="_id")
    type: str
    payload_ref: IdStr
    status: EventStatus
    attempts: int
    strikes: int = 0  # transient failures that may be its own, not counted in `attempts` (desk/jobs/table.py)
    available_at: datetime
    leased_until: datetime | None = None
    lease_owner: str | None = None
    last_error: str | None = None
    created_at: datetime
    updated_at: datetime | None = None
