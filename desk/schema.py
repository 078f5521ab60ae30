"""Shared pieces of the HTTP/JSON shape: camelCase models, text fields and the OffsetPage."""

import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Annotated, Any, Generic, TypeVar

from bson import ObjectId
from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, StringConstraints
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

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


def not_null(value: object) -> object:
    """For update models, on the fields a request names: left out means "keep", null is a mistake."""
    if value is None:
        raise PydanticCustomError("not_null", "must not be null; leave the field out to keep it as it is")
    return value


def single_line(*, max_length: int, min_length: int | None = None) -> Any:
    """A one-line text field: surrounding whitespace dropped, no control characters at all."""
    return Annotated[
        str,
        StringConstraints(strip_whitespace=True, min_length=min_length, max_length=max_length),
        AfterValidator(_refuse(CONTROL)),
    ]


def multi_line(*, max_length: int, min_length: int | None = None) -> Any:
    """A text of several lines: line breaks stored as LF, tabs kept, no other control characters."""
    return Annotated[
        str,
        StringConstraints(strip_whitespace=True, min_length=min_length, max_length=max_length),
        BeforeValidator(_newlines),  # wraps the constraints, so it runs before them
        AfterValidator(_refuse(CONTROL_BUT_TAB_AND_LF)),
    ]


# C0, DEL and C1 (Unicode category Cc): invisible, they break display, search and exports.
# Single-line fields also refuse the bidirectional embedding, override and isolate controls (the
# Trojan Source class): in a name or a title they make text read differently from what it is.
CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
CONTROL_BUT_TAB_AND_LF = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _newlines(value: object) -> object:
    # Line breaks come as CR LF from some clients and as CR from old ones; one form is stored,
    # before the length limit, so a break counts as one character however it was sent.
    return value.replace("\r\n", "\n").replace("\r", "\n") if isinstance(value, str) else value


def _refuse(pattern: re.Pattern[str]) -> Callable[[str], str]:
    def check(value: str) -> str:
        if found := pattern.search(value):
            raise PydanticCustomError(
                "control_character",
                "must not contain a control character (found U+{code})",
                {"code": f"{ord(found.group()):04X}"},
            )
        return value

    return check


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
