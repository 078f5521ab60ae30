"""The DeskError family and the one error envelope every response uses."""

from enum import StrEnum
from typing import Any

from pydantic import BaseModel


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
}


class ErrorBody(BaseModel):
    code: ErrorCode
    message: str
    details: Any | None = None


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
        body = ErrorBody(code=self.code, message=self.message, details=self.details)
        return {"error": body.model_dump(mode="json", exclude_none=True)}


class ValidationFailed(DeskError):
    code = ErrorCode.VALIDATION_ERROR
    default_message = "The request is not valid."


class NothingToChange(ValidationFailed):
    """An update that names no field to change (a PATCH with only its version, or `{}`)."""

    default_message = "Nothing to change."


class Unauthorized(DeskError):
    code = ErrorCode.UNAUTHORIZED
    default_message = "Please log in."


class Forbidden(DeskError):
    code = ErrorCode.FORBIDDEN
    default_message = "You are not allowed to do that."


class NotFound(DeskError):
    code = ErrorCode.NOT_FOUND
    default_message = "Not found."


class Conflict(DeskError):
    code = ErrorCode.CONFLICT
    default_message = "Someone else changed this first."


class RateLimited(DeskError):
    code = ErrorCode.RATE_LIMITED
    default_message = "Too many requests; try again shortly."

    def __init__(self, message: str | None = None, *, retry_after: int):
        super().__init__(message, headers={"Retry-After": str(retry_after)}, details={"retryAfter": retry_after})
        self.retry_after = retry_after
