"""Audit entries: what admins did to people and tokens, and which orders were deleted, by whom and when."""

from datetime import datetime
from typing import Literal

from pydantic import Field

from desk.schema import IdStr, ObjectIdStr, PageQuery, ReadModel

Action = Literal[
    "work_order_deleted",
    "user_created",
    "user_details_changed",
    "role_changed",
    "activation_changed",
    "ai_access_changed",
    "password_reset",
    "account_locked",
    "account_unlocked",
    "token_created",
    "token_revoked",
    "tokens_revoked",
    "orders_returned_to_queue",
]
ACTIONS: tuple[Action, ...] = Action.__args__  # type: ignore[attr-defined]


class AuditRead(ReadModel):
    id: IdStr = Field(validation_alias="_id")
    at: datetime
    action: Action
    actor_id: str | None = None  # None: the desk itself
    actor_kind: Literal["human", "system"] = "human"
    subject_id: str | None = None  # the person or work order acted on
    details: dict = Field(default_factory=dict)  # e.g. the deleted order as it was; never a secret


class AuditQuery(PageQuery):
    """Filters, all optional and combined: what happened, who did it, whom (or which order) it was done to."""

    action: Action | None = None
    actor_id: ObjectIdStr | None = Field(None, alias="actorId")
    subject_id: ObjectIdStr | None = Field(None, alias="subjectId")

    def filter(self) -> dict:
        """The stored entries this query selects (offset and limit aside)."""
        chosen = {"action": self.action, "actorId": self.actor_id, "subjectId": self.subject_id}
        return {field: value for field, value in chosen.items() if value is not None}
