"""Shared pieces of the HTTP/JSON shape (camelCase models, text fields, the OffsetPage) and of what is stored
beside it (the sort key of names and titles, UTC now)."""

import re
import unicodedata
from collections.abc import Awaitable, Callable
from datetime import UTC, date, datetime, time, timedelta
from functools import cache
from typing import Annotated, Any, Generic, TypeVar

from bson import ObjectId
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    GetJsonSchemaHandler,
    StringConstraints,
)
from pydantic.alias_generators import to_camel
from pydantic.json_schema import JsonSchemaValue
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

    @classmethod
    def __get_pydantic_json_schema__(cls, core_schema: Any, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        schema = handler(core_schema)
        resolved = handler.resolve_ref_schema(schema)
        for spec in resolved.get("properties", {}).values():
            if "default" in spec and spec["default"] is None:
                del spec["default"]  # "default": null would tell a client that null is a value to send
        return schema


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


# A MongoDB ObjectId as the API writes it (24 hex digits): in bodies and query strings, a value of
# another form is a 400; in a path it is a 404 like any id that names nothing.
OBJECT_ID_PATTERN = "^[0-9a-fA-F]{24}$"
# Lower-cased as read: the desk writes ids in lower case and compares them as text (an owner, a counter's key).
ObjectIdStr = Annotated[str, StringConstraints(pattern=OBJECT_ID_PATTERN, to_lower=True)]


def _rfc3339(value: object) -> object:
    if isinstance(value, str) and not RFC3339.match(value):
        raise PydanticCustomError("datetime_format", WHEN)
    return value


WHEN = "must be a date and time with its offset, such as 2026-01-31T09:00:00Z"
RFC3339 = re.compile(
    r"^[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?([Zz]|[+-][0-9]{2}:[0-9]{2})$"
)
FULL_DATE = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$")


def _in_utc(value: datetime) -> datetime:
    """The moment in UTC, as it is stored and compared; one its offset takes past year 1 or 9999 is out of range."""
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise PydanticCustomError("datetime_range", WHEN_RANGE) from None


WHEN_RANGE = "must be between 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z"
# A moment in a query string: RFC 3339 with its offset, what the schema's date-time format means (pydantic
# alone would also take a bare date, a number of seconds or no offset at all).
Timestamp = Annotated[datetime, BeforeValidator(_rfc3339), AfterValidator(_in_utc)]


DAY = "must be a day such as 2026-01-31"


def _full_date(value: object) -> object:
    if isinstance(value, str) and not FULL_DATE.match(value):
        raise PydanticCustomError("date_format", DAY)
    return value


# A day in a query string: YYYY-MM-DD, what the schema's date format means (pydantic would take "0").
Day = Annotated[date, BeforeValidator(_full_date)]


def midnight(day: date) -> datetime:
    """Where `day` begins in UTC: the days of lists and filters (the triage counts its days in its policy's zone)."""
    return datetime.combine(day, time(), tzinfo=UTC)


def after(day: date) -> datetime | None:
    """Where a range of days ending with `day` ends: the next midnight; None after the last day there is."""
    return midnight(day + timedelta(days=1)) if day < date.max else None


def during(start: datetime, end: datetime | None) -> dict[str, datetime]:
    """A filter for the moments from `start` until before `end` (no end: from `start` on)."""
    return {"$gte": start} | ({"$lt": end} if end is not None else {})


def _whole(value: object) -> object:
    if isinstance(value, str) and not DIGITS.fullmatch(value):  # a query's text: pydantic took "5_0", " 7" and "+7"
        raise PydanticCustomError("int_parsing", "must be a whole number")
    return int(value) if isinstance(value, float) and value.is_integer() else value


DIGITS = re.compile(r"-?[0-9]+(\.0+)?")  # "7.0" stays 7, as 7.0 does in a body
# JSON Schema counts 824.0 as an integer, and so does the API: a whole number sent with a point is taken.
WholeNumber = BeforeValidator(_whole)


def not_null(value: object) -> object:
    """For update models, on the fields a request names: left out means "keep", null is a mistake."""
    if value is None:
        raise PydanticCustomError("not_null", "must not be null; leave the field out to keep it as it is")
    return value


# An update's field that may be left out (its default, None, is never validated) but not sent as null: the
# schema offers no null and no default. Not `T | None`: a union would report a bad value once per member.
Keep = Annotated[T, BeforeValidator(not_null)]


def single_line(*, max_length: int, min_length: int | None = None) -> Any:
    """A one-line text field: surrounding whitespace dropped, no control characters at all.

    `max_length` counts the text as sent; `min_length=1` means "not blank" (something is left once the
    whitespace is dropped). The OpenAPI schema states both, and the refused characters, as a pattern.
    """
    return _text(CONTROL, max_length=max_length, required=bool(min_length))


def multi_line(*, max_length: int, min_length: int | None = None) -> Any:
    """A text of several lines: line breaks stored as LF, tabs kept, no other control characters."""
    return _text(CONTROL_BUT_TAB_AND_LF, max_length=max_length, required=bool(min_length), lines=True)


def stripped(*, max_length: int, min_length: int | None = None) -> Any:
    """Text with its surrounding whitespace dropped and no other rule (what is typed into a login form)."""
    return _text(None, max_length=max_length, required=bool(min_length))


def _text(refused: re.Pattern[str] | None, *, max_length: int, required: bool, lines: bool = False) -> Any:
    # The limit is on the text as sent, before whitespace is dropped or CR LF becomes LF, so the schema's
    # maxLength and the API agree on every string: a client can check a text before sending it.
    checks: list[Any] = [StringConstraints(min_length=1 if required else None, max_length=max_length)]
    if lines:
        checks.append(AfterValidator(_newlines))
    checks.append(AfterValidator(_strip))
    if required:
        checks.append(AfterValidator(_not_blank))
    if refused is not None:
        checks.append(AfterValidator(_refuse(refused)))
    if refused is None and not required:
        return Annotated[str, *checks]  # every string is valid: no pattern to state
    pattern = text_pattern(refused, required=required, lines=lines)
    return Annotated[str, *checks, Field(json_schema_extra={"pattern": pattern})]


def _not_blank(value: str) -> str:
    if not value:
        raise PydanticCustomError("string_too_short", "must not be empty", {"min_length": 1})
    return value


# Every whitespace and refused character is in the Basic Multilingual Plane: looking there is enough.
BMP = [chr(code) for code in range(0x10000)]
# What str.strip() drops: Python's whitespace, some of which are control characters (TAB, LF, U+001C...).
SPACE = frozenset(char for char in BMP if char.isspace())
# What shows nothing on its own (a soft hyphen, zero-width spaces and joiners, the BOM, the Hangul fillers): at
# the edges of a text it goes like whitespace, so a title of nothing else is as empty as one of spaces.
INVISIBLE = frozenset(
    "\u00ad\u034f\u115f\u1160\u17b4\u17b5\u180e\u200b\u200c\u200d\u2060\u2061\u2062\u2063\u2064\u3164\ufeff\uffa0"
)
BLANK = "".join(sorted(SPACE | INVISIBLE))


def _strip(value: str) -> str:
    return value.strip(BLANK)


def without_text_patterns(schema: Any) -> Any:
    """`schema` without the text fields' patterns: a model given tools needs the limits, not the regexes."""
    if isinstance(schema, dict):
        return {k: without_text_patterns(v) for k, v in schema.items() if not (k == "pattern" and _is_text_pattern(v))}
    if isinstance(schema, list):
        return [without_text_patterns(item) for item in schema]
    return schema


@cache
def text_pattern(refused: re.Pattern[str] | None, *, required: bool, lines: bool = False) -> str:
    """The JSON-schema pattern of a text field, saying exactly what its validators do.

    Whitespace around a middle (what is kept) that has no refused character and, when `required`, is not
    empty; in a multi-line text a CR may be sent (it becomes an LF).
    """
    bad = {char for char in BMP if refused and refused.match(char)} - ({"\r"} if lines else set())
    blank = SPACE | INVISIBLE
    space, edge = char_class(blank), f"[^{char_class(bad | blank)}]"
    inner = f"[^{char_class(bad)}]" if bad else "[\\s\\S]"
    middle = f"{edge}(?:{inner}*{edge})?"
    return f"{_TEXT_OPENING}{middle if required else f'(?:{middle})?'}[{space}]*$"


def char_class(chars: set[str] | frozenset[str]) -> str:
    """A regex character-class body for `chars`: escaped code points and ranges, read alike by ECMA and Python."""
    runs: list[list[int]] = []
    for code in sorted(map(ord, chars)):
        if runs and code == runs[-1][1] + 1:
            runs[-1][1] = code
        else:
            runs.append([code, code])
    return "".join(_code(a) if a == b else f"{_code(a)}-{_code(b)}" for a, b in runs)


def _code(code: int) -> str:
    return chr(code) if chr(code).isascii() and chr(code).isalnum() else f"\\u{code:04x}"


_TEXT_OPENING = f"^[{char_class(SPACE | INVISIBLE)}]*"  # how every `text_pattern` opens: the blanks around the text


def _is_text_pattern(pattern: object) -> bool:
    """Whether `pattern` is one `text_pattern` wrote (a hand-written pattern never opens with all those blanks)."""
    return isinstance(pattern, str) and pattern.startswith(_TEXT_OPENING)


# C0, DEL and C1 (Unicode category Cc): invisible, they break display, search and exports.
# Single-line fields also refuse the bidirectional embedding, override and isolate controls (the
# Trojan Source class): in a name or a title they make text read differently from what it is; and the
# Unicode line and paragraph separators, line breaks to whatever shows the text.
CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
CONTROL_BUT_TAB_AND_LF = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


# The refused characters a person meets, named: a tab pasted from a spreadsheet into a title is no "U+0009" to them.
SEEN_AS = {
    "\t": "a tab, ",
    "\n": "a line break, ",
    "\r": "a line break, ",
    "\u2028": "a line break, ",
    "\u2029": "a paragraph break, ",
}


def _newlines(value: object) -> object:
    # Line breaks come as CR LF from some clients and as CR from old ones; one form is stored,
    # before the length limit, so a break counts as one character however it was sent.
    return value.replace("\r\n", "\n").replace("\r", "\n") if isinstance(value, str) else value


def _refuse(pattern: re.Pattern[str]) -> Callable[[str], str]:
    def check(value: str) -> str:
        if found := pattern.search(value):
            char = found.group()
            raise PydanticCustomError(
                "control_character",
                "must not contain a control character (found {name}U+{code})",
                {"code": f"{ord(char):04X}", "name": SEEN_AS.get(char, "")},
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

    offset: Annotated[int, Field(ge=0, le=MAX_OFFSET), WholeNumber] = 0
    limit: Annotated[int, Field(ge=1, le=MAX_LIMIT), WholeNumber] = 25


def sort_key(text: str) -> str:
    """What a sort by name or title compares: case and accents dropped ("Éclair" files with "eclair", after "apple").

    Compared by code point like any string, so MongoDB and the embedded engine sort it alike
    and a plain index serves it; letters without a decomposition (ø, ł) still sort after z.
    """
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(char for char in decomposed if not unicodedata.combining(char)).casefold()


def now() -> datetime:
    """UTC now, cut to milliseconds: what MongoDB stores, so values round-trip equal."""
    moment = datetime.now(UTC)
    return moment.replace(microsecond=moment.microsecond // 1000 * 1000)


def parse_object_id(value: str) -> ObjectId | None:
    """The ObjectId in `value`, or None when it is not one."""
    return ObjectId(value) if isinstance(value, str) and ObjectId.is_valid(value) and len(value) == 24 else None


async def by_id(value: str, fetch: Callable[[ObjectId], Awaitable[T | None]]) -> T | None:
    """What `fetch` finds under the id `value` names; None when it is not an id (it names nothing: a 404, not a 400)."""
    oid = parse_object_id(value)
    return await fetch(oid) if oid else None
