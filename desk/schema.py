"""Shared pieces of the HTTP/JSON shape: camelCase models and the OffsetPage."""

from datetime import UTC, datetime
from typing import Annotated, Generic, TypeVar

from bson import ObjectId
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field
from pydantic.alias_generators import to_camel

MAX_LIMIT = 100
MAX_OFFSET = 10_000  # deeper pages cost a scan on the embedded engine; narrow the filter instead


class ApiModel(BaseModel):
    """Requests: strict types, unknown fields rejected, camelCase on the wire."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
        extra="forbid",
        strict=True,
    )


class ReadModel(BaseModel):
    """Responses: built from stored documents, camelCase on the wire."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
        from_attributes=True,
    )


def _id_string(value: object) -> object:
    return str(value) if isinstance(value, ObjectId) else value


IdStr = Annotated[str, BeforeValidator(_id_string)]
T = TypeVar("T")


class OffsetPage(ReadModel, Generic[T]):
    """One page of a list. `totalExact` is false when a search stopped counting at its cap."""

    items: list[T]
    total: int
    offset: int
    limit: int
    total_exact: bool = True


class PageQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")

    offset: int = Field(0, ge=0, le=MAX_OFFSET)
    limit: int = Field(25, ge=1, le=MAX_LIMIT)


def now() -> datetime:
    """UTC now, cut to milliseconds: what MongoDB stores, so values round-trip equal."""
    moment = datetime.now(UTC)
    return moment.replace(microsecond=moment.microsecond // 1000 * 1000)


def parse_object_id(value: str) -> ObjectId | None:
    """The ObjectId in `value`, or None when it is not one."""
    return ObjectId(value) if isinstance(value, str) and ObjectId.is_valid(value) and len(value) == 24 else None
