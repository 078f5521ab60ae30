"""Notification shapes: what the bell and its page list, marking read, and each person's preferences."""

from datetime import datetime
from typing import Annotated, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, model_validator

from desk.schema import MAX_LIMIT, MAX_OFFSET, ApiModel, IdStr, Keep, ObjectIdStr, ReadModel, WholeNumber

Kind = Literal["assigned", "commented", "statusChanged", "flagged"]
KINDS: tuple[Kind, ...] = get_args(Kind)
Channel = Literal["email", "inApp"]
CHANNELS: tuple[Channel, ...] = get_args(Channel)
# Everything on but `flagged`: the triage agent's flags are for the admins who ask for them.
DESK_DEFAULTS: dict[str, dict[str, bool]] = {channel: {k: k != "flagged" for k in KINDS} for channel in CHANNELS}


class NotificationRead(ReadModel):
    id: IdStr = Field(validation_alias="_id")
    kind: Kind
    work_order_id: IdStr
    text: str
    read: bool
    created_at: datetime


class NotificationPage(ReadModel):
    items: list[NotificationRead]
    total: int
    unread: int


class NotificationQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")

    unread: bool | None = None  # true: only the unread ones
    offset: Annotated[int, Field(ge=0, le=MAX_OFFSET), WholeNumber] = 0
    limit: Annotated[int, Field(ge=1, le=MAX_LIMIT), WholeNumber] = 25


class MarkRead(ApiModel):
    """Either some of your notifications by id, or all of them."""

    model_config = ConfigDict(json_schema_extra={"oneOf": [{"required": ["ids"]}, {"required": ["all"]}]})

    ids: Keep[Annotated[list[ObjectIdStr], Field(min_length=1, max_length=MAX_LIMIT)]] = None
    all: Keep[Literal[True]] = None

    @model_validator(mode="after")
    def _one_of(self) -> "MarkRead":
        if (self.ids is None) == (self.all is None):
            raise ValueError("send either ids or all: true")
        return self


class Unread(ReadModel):
    unread: int


class KindSwitches(ApiModel):
    assigned: bool
    commented: bool
    status_changed: bool
    flagged: bool


class KindChanges(ApiModel):
    model_config = ConfigDict(json_schema_extra={"minProperties": 1})

    assigned: Keep[bool] = None
    commented: Keep[bool] = None
    status_changed: Keep[bool] = None
    flagged: Keep[bool] = None

    @model_validator(mode="after")
    def _some(self) -> "KindChanges":
        if not self.model_fields_set:
            raise ValueError("name at least one kind to switch")
        return self


class Preferences(ApiModel):
    """Which kinds of notification reach a person, by email and in the desk."""

    email: KindSwitches
    in_app: KindSwitches


class PreferencesUpdate(ApiModel):
    """Some switches to change; those left out stay as they are."""

    model_config = ConfigDict(json_schema_extra={"minProperties": 1})

    email: Keep[KindChanges] = None
    in_app: Keep[KindChanges] = None

    def switches(self) -> dict[str, dict[str, bool]]:
        """The switches sent, as stored: {channel: {kind: on}}."""
        sent = {"email": self.email, "inApp": self.in_app}
        return {
            channel: {kind: on for kind, on in changes.model_dump(by_alias=True).items() if on is not None}
            for channel, changes in sent.items()
            if changes is not None
        }


class Unsubscribed(ReadModel):
    """The kinds of email the link turned off."""

    kinds: list[Kind]
