"""User shapes: what admins send, what the API returns."""

import re
import unicodedata
from datetime import datetime
from typing import Annotated, Literal

from pydantic import AfterValidator, ConfigDict, Field, StringConstraints, field_validator

from desk import state
from desk.auth import passwords
from desk.schema import SPACE, ApiModel, IdStr, Keep, PageQuery, ReadModel, char_class, single_line

RoleName = Literal["admin", "user", "viewer"]
EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")


def _email(value: str) -> str:
    if not value:  # nothing but spaces, or nothing: not a wrong address
        raise ValueError("required")
    if not EMAIL.match(value):  # as sent, as the schema's pattern says (NFKC may turn a "¨" into a space)
        raise ValueError("must be an email address")
    return email_key(value)


def email_key(email: str) -> str:
    """An address as the desk stores and looks it up: NFKC and lower case, so that look-alikes typed with a
    ligature ("ﬁ") or full-width letters are the one address they read as, not a second account."""
    return unicodedata.normalize("NFKC", email.strip()).lower()


_S, _NOT_S = f"[{char_class(SPACE)}]", f"[^@{char_class(SPACE)}]"  # what strip() drops, and what EMAIL's \s means
# The length counts the address as sent; the schema's pattern is EMAIL with the whitespace strip() drops around it.
Email = Annotated[
    str,
    StringConstraints(max_length=254),
    AfterValidator(str.strip),
    AfterValidator(_email),
    Field(json_schema_extra={"pattern": f"^{_S}*{_NOT_S}+@{_NOT_S}+\\.{_NOT_S}+{_S}*$"}),
]
Name = single_line(min_length=1, max_length=100)


def _password_policy(schema: dict[str, object]) -> None:
    schema.update(passwords.json_schema())  # the service checks it (its words reach the pages); the schema states it


Password = Annotated[str, Field(min_length=1, max_length=128, json_schema_extra=_password_policy)]


class UserCreate(ApiModel):
    email: Email
    name: Name
    role: RoleName = "user"
    password: Password


class UserAdminUpdate(ApiModel):
    """What an admin may change; `password` resets it, ends the user's sessions and revokes their API tokens."""

    model_config = ConfigDict(json_schema_extra={"minProperties": 1})  # something to change

    name: Keep[Name] = None
    email: Keep[Email] = None  # lower-cased; another person's is a 409
    role: Keep[RoleName] = None
    ai_enabled: Keep[bool] = None
    active: Keep[bool] = None
    password: Keep[Password] = None

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
    last_login_at: datetime | None = None  # null: never logged in (or not since the desk began keeping it)

    @field_validator("locked_until")
    @classmethod
    def _only_while_locked(cls, value: datetime | None) -> datetime | None:
        return value if value is not None and value > state.current().clock.now() else None  # the lockout's clock


class PersonRead(ReadModel):
    """Someone of the desk as anyone signed in may see them: the name behind a requester, owner or author id."""

    id: IdStr = Field(validation_alias="_id")
    name: str
    active: bool


class UserQuery(PageQuery):
    """The people list: `q` finds names and emails containing it (any case); sorted by name."""

    q: str | None = Field(None, max_length=100)
