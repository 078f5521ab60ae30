"""SEC-1, watched over whole suites: no log line holds a message, a work-order text or a model answer.

`no_sent_text_in_logs` is autouse through tests/agent/conftest.py and active in WATCHED modules (the
injection suite and the approval tests). It records every turn the test scripts into the fake provider
(the model's answers and tool arguments) and, afterwards, reads every request the fake received (the
person's messages, the tool results with the work orders' texts). Then it searches what was logged,
raw and as the desk's JSON lines, for each of those texts and for the start of each (pydantic cuts a
long quoted input short).
"""

import json
import logging
import re
from collections.abc import Iterator
from typing import Any

import pytest

from desk.logs import JsonFormatter, RedactingFilter
from tests.fake_provider import FakeProvider, Turn

WATCHED = frozenset({"tests.agent.test_injection", "tests.agent.test_approvals"})
SHORTEST = 12  # shorter texts ("open", "high", a name) are words a log line may hold for its own reasons
CUT, PREFIX = 50, 24  # pydantic quotes an input longer than 50 characters as its first 24, "..." and its end
# Ids (quoted too: a tool argument may be a JSON string) and times are fine in a log line; ids made in
# the same second share most of their digits, so a prefix of one is no sign of another.
PLAIN = re.compile(r'^"?[0-9a-f]{24}"?$|^\d{4}-\d\d-\d\dT')


@pytest.fixture(autouse=True)
def no_sent_text_in_logs(
    request: pytest.FixtureRequest, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    if request.module.__name__ not in WATCHED:
        yield
        return
    fake: FakeProvider = request.getfixturevalue("fake_provider")
    scripted: list[Turn] = []
    script = fake.script

    def recording(*turns: Turn) -> None:
        scripted.extend(turns)
        script(*turns)

    monkeypatch.setattr(fake, "script", recording)
    caplog.set_level(logging.INFO)
    yield
    texts = {text for turn in scripted for text in _turn_texts(turn)}
    texts |= {text for body in fake.requests if body for text in _request_texts(body)}
    records = [*caplog.get_records("setup"), *caplog.get_records("call"), *caplog.records]  # in teardown: its own
    plain = logging.Formatter("%(name)s %(levelname)s %(message)s")  # as raised, before any redaction
    written = _written(records) + "\n".join(plain.format(logging.makeLogRecord(r.__dict__)) for r in records)
    leaked = sorted(text for text in texts if _leaks(text, written))
    assert not leaked, f"sent text reached the logs: {[t[:60] for t in leaked]}"


def _leaks(text: str, written: str) -> bool:
    """The whole text is in the logs, or the start of a long one as pydantic shows it, cut short (a JSON
    document's start is its structure, not its text: its values are searched one by one)."""
    cut = len(text) > CUT and not text.startswith(("{", "[")) and text[:PREFIX] in written
    return text in written or cut


def _written(records: list[logging.LogRecord]) -> str:
    """The records as the desk writes them: redacted, one JSON object per line."""
    formatter, redacting = JsonFormatter(), RedactingFilter()
    lines = []
    for record in records:
        copy = logging.makeLogRecord(record.__dict__)
        redacting.filter(copy)
        lines.append(formatter.format(copy))
    return "\n".join(lines)


def _turn_texts(turn: Turn) -> Iterator[str]:
    """The model's text and each tool call's arguments (whole and each value) in a scripted turn."""
    content, arguments = [], {}
    for frame in turn.frames:
        data = frame.decode().removeprefix("data: ").strip()
        try:
            chunk = json.loads(data)
        except json.JSONDecodeError:
            continue
        for choice in chunk.get("choices", []) if isinstance(chunk, dict) else []:
            delta = choice.get("delta") or {}
            content.append(delta.get("content") or "")
            for call in delta.get("tool_calls") or []:
                arguments[call["index"]] = arguments.get(call["index"], "") + call["function"].get("arguments", "")
    yield from _worth_finding("".join(content))
    for raw in arguments.values():
        yield from _worth_finding(raw)
        yield from _leaves(raw)


def _request_texts(body: dict[str, Any]) -> Iterator[str]:
    """Every message the desk sent the model (but the system prompt, the desk's own words), and its values."""
    for message in body.get("messages", []):
        if message.get("role") == "system":
            continue
        content = message.get("content")
        if isinstance(content, str):
            yield from _worth_finding(content)
            yield from _leaves(content)
        for call in message.get("tool_calls") or []:
            yield from _leaves(call["function"].get("arguments", ""))


def _leaves(raw: str) -> Iterator[str]:
    """The string values inside `raw` when it is JSON (tool arguments and results)."""
    try:
        value = json.loads(raw)
    except (json.JSONDecodeError, RecursionError):
        return
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str):
            yield from _worth_finding(item)


def _worth_finding(text: str) -> Iterator[str]:
    text = text.strip()
    if len(text) >= SHORTEST and not PLAIN.match(text):
        yield text
