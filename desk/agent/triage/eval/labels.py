"""A labelled set: JSON Lines, one work order a line with the priority and flag a person would give it.

    {"id": "fac-001", "title": "...", "description": "...", "priority": "high", "flag": false, "note": "why"}

The whole file is checked before any model call: a bad line stops the eval, naming its line and field.
"""

import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from desk.work_orders.models import Description, Priority, Title

SHIPPED = Path(__file__).with_name("orders.jsonl")  # the desk's own set, used when no --set is given


class LabelledOrder(BaseModel):
    """One order as a person labelled it; the text as the desk would accept it from a person."""

    model_config = ConfigDict(extra="forbid", strict=True)

    id: str = Field(min_length=1, max_length=100)
    title: Title
    description: Description
    priority: Priority
    flag: bool
    note: str = Field(min_length=1, max_length=300)


class BadSet(Exception):
    """The set cannot be used; the message names the file, the line and the field."""


def load(path: Path) -> list[LabelledOrder]:
    """Every order of the set, in its order; BadSet at the first bad line (blank lines are skipped)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise BadSet(f"{path}: cannot be read ({type(error).__name__})") from None
    orders: list[LabelledOrder] = []
    first_seen: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        order = _order(path, number, line)
        if order.id in first_seen:
            raise BadSet(f"{path} line {number}: id: {order.id!r} is already on line {first_seen[order.id]}")
        first_seen[order.id] = number
        orders.append(order)
    if not orders:
        raise BadSet(f"{path}: has no orders")
    return orders


def _order(path: Path, number: int, line: str) -> LabelledOrder:
    try:
        data = json.loads(line)
    except json.JSONDecodeError as error:
        raise BadSet(f"{path} line {number}: is not JSON ({error.msg} at column {error.colno})") from None
    if not isinstance(data, dict):
        raise BadSet(f"{path} line {number}: must be one JSON object")
    try:
        return LabelledOrder.model_validate(data)
    except ValidationError as error:
        first = error.errors()[0]
        field = ".".join(str(part) for part in first["loc"]) or "line"
        raise BadSet(f"{path} line {number}: {field}: {first['msg']}") from None
