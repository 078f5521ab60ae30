"""Six orders whose metrics are worked out by hand (tests/triage/eval/test_*.py), and the model's answers to them."""

import json
import re
from pathlib import Path
from typing import Any

from tests.fake_provider import Turn

ORDERS = [
    ("a", "Smoke coming from the server room", "urgent", True),
    ("b", "Printer on floor 2 is broken", "high", False),
    ("c", "Replace the kitchen kettle", "medium", False),
    ("d", "Would like a plant for reception", "low", False),
    ("e", "Water pouring through the ceiling onto desks", "high", True),
    ("f", "Desk drawer sticks", "medium", False),
]
# what the scripted model answers: right, one low, right with a needless flag, broken, one high, one low
ANSWERS: dict[str, tuple[str, bool] | None] = {
    "a": ("urgent", True),
    "b": ("medium", False),
    "c": ("medium", True),
    "d": None,
    "e": ("urgent", True),
    "f": ("low", False),
}
USAGE = (100, 10)  # each call's tokens: $0.000021 at the default prices


def write_set(path: Path) -> Path:
    lines = [
        {"id": id_, "title": title, "description": "", "priority": priority, "flag": flag, "note": "hand set"}
        for id_, title, priority, flag in ORDERS
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def title_of(request: dict[str, Any]) -> str:
    found = re.search(r'"title": "([^"]*)"', request["messages"][1]["content"])
    assert found is not None
    return found[1]


def answer(request: dict[str, Any]) -> Turn:
    """The scripted model: each order's answer by its title, as a forced tool call or as text."""
    (id_,) = [id_ for id_, title, *_ in ORDERS if title == title_of(request)]
    said = ANSWERS[id_]
    if said is None:
        args = '{"summary": "cut off'  # not JSON: an invalid answer
    else:
        args = json.dumps({"summary": f"Order {id_}.", "suggestedPriority": said[0], "flagForDispatcher": said[1]})
    if "response_format" in request:
        return Turn.text(args, usage=USAGE)
    return Turn.tool_calls(("triage_propose", args), usage=USAGE)
