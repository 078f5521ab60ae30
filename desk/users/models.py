"""User shapes: what admins send, what the API returns."""

import re
from datetime import datetime
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, StringConstraints, field_validator

from desk.schema import ApiModel, IdStr, ReadModel, not_null, now, single_line

RoleName = Literal["admin", "user", "viewer"]
EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")


def _email(value: str) -> str:
    if not EMAIL.match(value):
        raise ValueError("must be an email address")
    return value.lower()


Email = Annotated[str, StringConstraints(strip_whitespace=True, max_length=254), AfterValidator(_email)]
Name = single_line(min_length=1, max_length=100)
Password = Annotated[str, Field(min_length=1, max_length=128)]


class UserCreate(ApiModel):
    email: Email
    name: Name
    role: RoleName = "user"
    password: Password


class UserAdminUpdate(ApiModel):
    """What an admin may change; `password` resets it, ends the user's sessions and revokes their API tokens."""

    name: Name | None = None
    role: RoleName | None = None
    ai_enabled: bool | None = None
    active: bool | None = None
    password: Password | None = None

    _not_null = field_validator("*", mode="before")(not_null)

    def changes(self) -> dict[str, object]:
        """The fields sent, as stored (camelCase)."""
        return self.model_dump(exclude_unset=True, by_alias=True)


class UserRead(ReadModel):
    id: IdStr = Field(validation_alias="_id")
    email: str
    name: str
    role: RoleName
    ai_enabled: bool
    active: bool
    created_at: datetime
    updated_at: datetime
    locked_until: datetime | None = None  # after too many failed logins; null when it can log in

    @field_validator("locked_until")
    @classmethod
    def _only_while_locked(cls, value: datetime | None) -> datetime | None:
        return value if value is not None and value > now() else None
