"""The DeskError family and the one error envelope every response uses."""

from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel
from pydantic.json_schema import SkipJsonSchema
from pydantic_core import to_jsonable_python


class ErrorCode(StrEnum):
    VALIDATION_ERROR = "VALIDATION_ERROR"
    UNAUTHORIZED = "UNAUTHORIZED"
    FORBIDDEN = "FORBIDDEN"
    NOT_FOUND = "NOT_FOUND"
    METHOD_NOT_ALLOWED = "METHOD_NOT_ALLOWED"
    CONFLICT = "CONFLICT"
    RATE_LIMITED = "RATE_LIMITED"
    INTERNAL = "INTERNAL"
    AI_UNAVAILABLE = "AI_UNAVAILABLE"
    AI_BUDGET_EXCEEDED = "AI_BUDGET_EXCEEDED"
    AI_APPROVAL_PENDING = "AI_APPROVAL_PENDING"
    AI_APPROVAL_RESOLVED = "AI_APPROVAL_RESOLVED"
    AI_APPROVAL_STALE = "AI_APPROVAL_STALE"
    AI_APPROVAL_EXPIRED = "AI_APPROVAL_EXPIRED"
    AI_MESSAGE_DUPLICATE = "AI_MESSAGE_DUPLICATE"
    AI_INJECTION_BLOCKED = "AI_INJECTION_BLOCKED"
    AI_TURNED_OFF = "AI_TURNED_OFF"
    TOKEN_SCOPE_REQUIRED = "TOKEN_SCOPE_REQUIRED"  # noqa: S105 - a code, not a secret
    RECENT_LOGIN_REQUIRED = "RECENT_LOGIN_REQUIRED"


STATUS = {
    ErrorCode.VALIDATION_ERROR: 400,
    ErrorCode.UNAUTHORIZED: 401,
    ErrorCode.FORBIDDEN: 403,
    ErrorCode.NOT_FOUND: 404,
    ErrorCode.METHOD_NOT_ALLOWED: 405,
    ErrorCode.CONFLICT: 409,
    ErrorCode.RATE_LIMITED: 429,
    ErrorCode.INTERNAL: 500,
    ErrorCode.AI_UNAVAILABLE: 503,
    ErrorCode.AI_BUDGET_EXCEEDED: 429,
    ErrorCode.AI_APPROVAL_PENDING: 409,
    ErrorCode.AI_APPROVAL_RESOLVED: 409,
    ErrorCode.AI_APPROVAL_STALE: 409,
    ErrorCode.AI_APPROVAL_EXPIRED: 410,
    ErrorCode.AI_MESSAGE_DUPLICATE: 409,
    ErrorCode.AI_INJECTION_BLOCKED: 400,
    ErrorCode.AI_TURNED_OFF: 503,  # for now: an admin turns it on again, and nothing about the request was wrong
    ErrorCode.TOKEN_SCOPE_REQUIRED: 403,
    ErrorCode.RECENT_LOGIN_REQUIRED: 403,
}


class FieldProblem(BaseModel):
    """One field's problem: `field` is its camelCase name (dotted when nested, "body" for the whole body)."""

    field: str
    message: str
    type: str


class ErrorDetails(BaseModel):
    """`details`, one object everywhere: each error sets the keys it has something to say in."""

    model_config = ConfigDict(alias_generator=to_camel, serialize_by_alias=True, extra="forbid")

    fields: list[FieldProblem] | SkipJsonSchema[None] = Field(None, description="what is wrong with which field")
    retry_after: int | SkipJsonSchema[None] = Field(None, description="seconds to wait (as in Retry-After)")
    locked_until: datetime | SkipJsonSchema[None] = Field(None, description="when a locked account opens again")
    current: dict[str, Any] | SkipJsonSchema[None] = Field(None, description="the resource as stored now (409)")
    run_id: str | SkipJsonSchema[None] = Field(None, description="the run a duplicate message started")
    tool_call_id: str | SkipJsonSchema[None] = Field(None, description="the proposal that replaced a stale one")
    scope: str | SkipJsonSchema[None] = Field(None, description="the API token scope the request needs")


class ErrorBody(BaseModel):
    code: ErrorCode
    message: str
    details: ErrorDetails | SkipJsonSchema[None] = None


class ErrorEnvelope(BaseModel):
    """`{"error": {"code", "message", "details?"}}`"""

    error: ErrorBody


class DeskError(Exception):
    """An error a person can act on: a code from the closed set and a human message."""

    code = ErrorCode.INTERNAL
    default_message = "Something went wrong on our side."

    def __init__(self, message: str | None = None, *, details: Any = None, headers: dict[str, str] | None = None):
        super().__init__(message or self.default_message)
        self.message = message or self.default_message
        self.details = details
        self.headers = headers or {}

    @property
    def status(self) -> int:
        return STATUS[self.code]

    def envelope(self) -> dict[str, Any]:
        body = {"code": self.code.value, "message": self.message}
        if details := self.wire_details():
            body["details"] = to_jsonable_python(details)
        return {"error": body}

    def wire_details(self) -> dict[str, Any] | None:
        """`details` as the API sends it: a service's `{"field": name}` becomes the one `fields` list."""
        details = dict(self.details or {})
        if (field := details.pop("field", None)) is not None:
            details["fields"] = [{"field": field, "message": self.message, "type": self.code.value.lower()}]
        return details or None


class ValidationFailed(DeskError):
    code = ErrorCode.VALIDATION_ERROR
    default_message = "The request is not valid."


class NothingToChange(ValidationFailed):
    """An update that names no field to change (a PATCH with only its version, or `{}`)."""

    default_message = "Nothing to change."


class Unauthorized(DeskError):
    code = ErrorCode.UNAUTHORIZED
    default_message = "Please log in."

    def __init__(self, message: str | None = None, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        # RFC 9110: a 401 names a scheme the request could use (the session cookie, the other, no header can name)
        self.headers = {"WWW-Authenticate": 'Bearer realm="desk"'} | self.headers


class Forbidden(DeskError):
    code = ErrorCode.FORBIDDEN
    default_message = "You are not allowed to do that."


class TokenScopeRequired(DeskError):
    """An API token without the scope a request needs (`details.scope`: read, write or admin)."""

    code = ErrorCode.TOKEN_SCOPE_REQUIRED

    def __init__(self, scope: str) -> None:
        message = f"This API token lacks the '{scope}' scope; make a token with it on your profile page."
        super().__init__(message, details={"scope": scope})
        self.scope = scope


class RecentLoginRequired(DeskError):
    """A browser session that logged in too long ago for what it asks (creating an admin, raising a role)."""

    code = ErrorCode.RECENT_LOGIN_REQUIRED
    default_message = "Log in again to do this: it needs a login within the last 15 minutes."


class NotFound(DeskError):
    code = ErrorCode.NOT_FOUND
    default_message = "Not found."


class Conflict(DeskError):
    code = ErrorCode.CONFLICT
    default_message = "Someone else changed this first."


class AiTurnedOff(DeskError):
    """An admin turned AI off for the whole desk (the agents page's switch, `POST /admin/agents/disable`)."""

    code = ErrorCode.AI_TURNED_OFF
    default_message = "An admin turned AI assistance off for the whole desk. It is back once they turn it on again."


class RateLimited(DeskError):
    code = ErrorCode.RATE_LIMITED
    default_message = "Too many requests; try again shortly."

    def __init__(self, what: str | None = None, *, retry_after: int):
        """`what` was too much ("Too many login attempts"); when to try again is said after it, as Retry-After says."""
        again = f"{what}; try again in {retry_after} second{'' if retry_after == 1 else 's'}." if what else None
        super().__init__(again, headers={"Retry-After": str(retry_after)}, details={"retryAfter": retry_after})
        self.retry_after = retry_after
