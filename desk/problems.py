"""A request's validation problems in words written for people (not pydantic's "Input should be ...")."""

import re
from collections.abc import Callable
from typing import Any, get_args

from pydantic_core.core_schema import ErrorType

from desk.schema import DAY, OBJECT_ID_PATTERN, WHEN


def problems(items: list[dict[str, Any]]) -> list[dict[str, str]]:
    """One problem per field: a value that fits none of a union's forms is one problem ("... or ...")."""
    merged: dict[str, dict[str, str]] = {}
    for item in items:
        found = problem(item)
        if (earlier := merged.get(found["field"])) is None:
            merged[found["field"]] = found
        elif found["message"] not in earlier["message"]:
            earlier["message"] += f", or {found['message']}"
    return list(merged.values())


def problem(item: dict[str, Any]) -> dict[str, str]:
    """`{field, message, type}` for one pydantic error; the value sent is never echoed back (it may be a password)."""
    loc = item.get("loc") or ()
    if item["type"] == "json_invalid":
        loc = loc[:1]  # ("body", 1): the rest is the character position of the JSON error, not a field
    names = []
    for part in loc[1:]:
        if isinstance(part, str) and not (NAME.fullmatch(part) or (loc[0] == "header" and HEADER.fullmatch(part))):
            break  # pydantic's name for a union member ("constrained-str", "literal['none']"), not a field
        if isinstance(part, int) and loc[0] == "query":
            continue  # ?status=a&status=b: the parameter is named, not its place among its repeats ("status.0")
        names.append(str(part))
    field = ".".join(names) or (str(loc[0]) if loc else "")
    return {"field": field, "message": message(item), "type": item["type"]}


NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
HEADER = re.compile(r"[A-Za-z][A-Za-z0-9-]*")  # a header's name has hyphens ("idempotency-key")


def message(item: dict[str, Any]) -> str:
    context = item.get("ctx") or {}
    where = (item.get("loc") or ("",))[0]
    if item["type"] == "missing" and where in _SENT_IN:
        return _SENT_IN[where](item["loc"])  # a bare "required" sends a client looking for it in the JSON body
    words = _MESSAGES.get(item["type"])
    if words is None:
        if item["type"] in _PYDANTICS_OWN:
            return "is not valid"  # a check of pydantic's with no words of ours yet: never its "Input should be ..."
        return str(item["msg"]).removeprefix("Value error, ")  # our own validators speak for themselves
    return words(context) if callable(words) else words


_PYDANTICS_OWN = frozenset(get_args(ErrorType))
_SENT_IN: dict[str, Callable[[tuple], str]] = {
    "query": lambda loc: f"required, in the query string (?{loc[-1]}=...)",
    "header": lambda loc: f"required, as the {loc[-1]} header",
}


def _too_short(context: dict[str, Any]) -> str:
    least = context.get("min_length", 1)
    return "must not be empty" if least == 1 else f"must have at least {least} characters"


def _pattern(context: dict[str, Any]) -> str:
    return "must be an id of 24 hexadecimal digits" if context.get("pattern") == OBJECT_ID_PATTERN else "is not valid"


_MESSAGES: dict[str, str | Callable[[dict[str, Any]], str]] = {
    "missing": "required",
    "extra_forbidden": "unknown field",
    "json_invalid": "not valid JSON",
    "json_type": "must be JSON",
    "model_type": "must be a JSON object",
    "model_attributes_type": "must be a JSON object",
    "dict_type": "must be a JSON object",
    "list_type": "must be a list",
    "string_type": "must be text",
    "string_unicode": "must be text (Unicode)",
    "int_type": "must be a whole number",
    "int_parsing": "must be a whole number",
    "int_from_float": "must be a whole number",
    "float_type": "must be a number",
    "float_parsing": "must be a number",
    "bool_type": "must be true or false",
    "bool_parsing": "must be true or false",
    "literal_error": lambda c: f"must be one of {c.get('expected', 'the listed values')}",
    "enum": lambda c: f"must be one of {c.get('expected', 'the listed values')}",
    "string_too_short": _too_short,
    "string_too_long": lambda c: f"may have at most {c.get('max_length')} characters",
    "too_short": lambda c: f"must have at least {c.get('min_length')} items",
    "too_long": lambda c: f"may have at most {c.get('max_length')} items",
    "greater_than_equal": lambda c: f"must be at least {c.get('ge')}",
    "greater_than": lambda c: f"must be more than {c.get('gt')}",
    "less_than_equal": lambda c: f"may be at most {c.get('le')}",
    "less_than": lambda c: f"must be less than {c.get('lt')}",
    "string_pattern_mismatch": _pattern,
    "value_error": lambda c: str(c.get("error", "is not valid")),
    "datetime_type": WHEN,
    "datetime_parsing": WHEN,
    "datetime_from_date_parsing": WHEN,
    "timezone_aware": WHEN,
    "date_type": DAY,
    "date_parsing": DAY,
    "date_from_datetime_parsing": DAY,
    "date_from_datetime_inexact": DAY,
}
