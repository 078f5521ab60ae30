"""Login, session and API-token shapes."""

from datetime import datetime
from typing import Annotated

from pydantic import Field

from desk.schema import ApiModel, IdStr, ReadModel, single_line, stripped
from desk.users.models import Password

TokenName = single_line(min_length=1, max_length=100)


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
    name: TokenName


class TokenRead(ReadModel):
    id: IdStr = Field(validation_alias="_id")
    name: str
    prefix: str
    created_at: datetime
    last_used_at: datetime | None = None


class TokenCreated(TokenRead):
    """Returned once, at creation: the only time the secret is shown."""

    secret: str
