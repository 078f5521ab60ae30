"""Login, session and API-token shapes."""

from datetime import datetime
from typing import Annotated

from pydantic import AfterValidator, Field

from desk.actors import SCOPES, Scope
from desk.schema import ApiModel, IdStr, ReadModel, WholeNumber, single_line, stripped
from desk.users.models import Password

TokenName = single_line(min_length=1, max_length=100)
TOKEN_DAYS = 90  # a token's life when its maker names none
MAX_TOKEN_DAYS = 365


def _in_order(scopes: list[Scope]) -> list[Scope]:
    """Each scope once, in the order read, write, admin (`["write", "read", "write"]` is read and write)."""
    return [scope for scope in SCOPES if scope in scopes]


class LoginRequest(ApiModel):
    email: stripped(min_length=1, max_length=254)
    password: Annotated[str, Field(min_length=1, max_length=1024)]


class PasswordChange(ApiModel):
    """One's own new password; `revokeTokens` also revokes every personal API token (other sessions always end)."""

    current_password: Annotated[str, Field(min_length=1, max_length=1024)]
    new_password: Password
    revoke_tokens: bool = False


class ProfileUpdate(ApiModel):
    """What a person may change about themselves through the profile."""

    ai_enabled: bool


class TokenCreate(ApiModel):
    """A new token: what it may do (default: read and write, and admin for an admin) and for how many days."""

    name: TokenName
    scopes: Annotated[list[Scope], Field(min_length=1, max_length=9), AfterValidator(_in_order)] | None = None
    expires_in_days: Annotated[int, Field(ge=1, le=MAX_TOKEN_DAYS), WholeNumber] = TOKEN_DAYS


class TokenRead(ReadModel):
    id: IdStr = Field(validation_alias="_id")
    name: str
    prefix: str
    scopes: list[Scope]
    created_at: datetime
    expires_at: datetime
    last_used_at: datetime | None = None


class TokenCreated(TokenRead):
    """Returned once, at creation: the only time the secret is shown."""

    secret: str
