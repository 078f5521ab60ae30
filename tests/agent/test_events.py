"""The copilot's event stream as a client reads it: the documented contract, and the SSE encoding."""

import asyncio
import logging
import re
from collections.abc import AsyncIterator
from pathlib import Path

from desk.agent.copilot.api import EventStream
from desk.agent.core.events import EVENT_KINDS, MessageDone, RunEvent, Token, ToolCallStart
from desk.errors import ErrorCode
from tests.agent.api_helpers import EVENTS, frames

DOCS = Path(__file__).parents[2] / "docs" / "copilot.md"


def documented_fields() -> dict[str, set[str]]:
    """The event table of docs/copilot.md: kind -> field names, `?` marking one that may be null."""
    table = DOCS.read_text(encoding="utf-8").split("| event | fields |")[1].split("\n\n")[0]
    rows = re.findall(r"^\| `(\w+)`[^|]* \| (.*) \|$", table, flags=re.MULTILINE)
    return {kind: set(re.findall(r"`(\w+\??)`", cells)) - {"create", "update", "delete"} for kind, cells in rows}


def model_fields() -> dict[str, set[str]]:
    """The same, read from the models' JSON schema (what a strict client would validate against)."""
    definitions = EVENTS.json_schema()["$defs"]
    fields = {}
    for name, schema in definitions.items():
        if schema.get("type") != "object":  # ErrorCode, an enum
            continue
        assert schema["additionalProperties"] is False, f"{name} would accept fields no client knows"
        kind = schema["properties"].get("kind", {}).get("const", name.lower())
        names = set()
        for field, spec in schema["properties"].items():
            if field == "kind":
                continue
            nullable = {"type": "null"} in spec.get("anyOf", [])
            # A field that may not be null has no default: the event cannot be built without it.
            assert nullable or field in schema.get("required", []), f"{name}.{field} could silently default"
            names.add(f"{field}?" if nullable else field)
        fields[kind] = names
    return fields


def test_the_documented_event_table_is_what_clients_receive():
    documented, modelled = documented_fields(), model_fields()

    assert set(documented) - {"diff"} == set(EVENT_KINDS)
    assert {kind: documented[kind] for kind in modelled} == modelled


async def _events(*items: RunEvent | Exception) -> AsyncIterator[RunEvent]:
    for item in items:
        if isinstance(item, Exception):
            raise item
        yield item


async def _written(events: AsyncIterator[RunEvent], written: list[str] | None = None) -> list[str]:
    """What the stream writes for `events`, one item per write, to a client that stays to the end."""
    written = [] if written is None else written

    async def receive() -> dict:
        await asyncio.Event().wait()  # the client never leaves
        return {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        if message["type"] == "http.response.body" and message["body"]:
            written.append(message["body"].decode())

    await EventStream(events, keepalive=5)({"type": "http"}, receive, send)
    return written


async def test_a_run_that_breaks_ends_its_stream_with_an_error_event_and_a_log_line(caplog):
    caplog.set_level(logging.ERROR, logger="desk.agent.copilot.api")

    written = await _written(_events(Token(text="Hel"), RuntimeError("the ledger is unreadable")))

    events = frames("".join(written))
    assert [e.kind for e in events] == ["token", "error"]
    assert events[1].code == ErrorCode.INTERNAL
    assert events[1].message == "Something went wrong on our side; it has been logged."
    assert "ledger" not in "".join(written)  # the details are for the log, not for the client
    failed = [r.getMessage() for r in caplog.records if r.getMessage().startswith("copilot run failed")]
    # the type and the place only: a message may quote a person's words
    assert len(failed) == 1 and re.fullmatch(
        r"copilot run failed \(RuntimeError at test_events\.py:\d+ in _events, from api\.py:\d+ in _run\)", failed[0]
    )
    assert "ledger" not in caplog.text


async def test_each_event_is_on_the_wire_before_the_run_goes_on():
    written: list[str] = []
    seen_by_the_run: list[list[str]] = []

    async def run() -> AsyncIterator[RunEvent]:
        for text in ("a", "b", "c"):  # a burst: the run has the next chunk at once, and waits for nothing
            yield Token(text=text)
            seen_by_the_run.append([e.text for e in frames("".join(written))])

    await _written(run(), written)

    # the person sees the first token while the run goes on with its answer, not after it
    assert seen_by_the_run == [["a"], ["a", "b"], ["a", "b", "c"]]


async def test_event_fields_are_camel_case_on_the_wire_like_every_json_the_desk_sends():
    started = ToolCallStart(tool_call_id="6b0e00000000000000000001", tool="list_work_orders")
    done = MessageDone(run_id="6b0e00000000000000000002", status="complete")

    written = "".join(await _written(_events(started, done)))

    assert '"toolCallId": "6b0e00000000000000000001"' in written and '"runId": "6b0e00000000000000000002"' in written
    assert "tool_call_id" not in written and "run_id" not in written
    assert [e.tool_call_id if e.kind == "tool_call_start" else e.run_id for e in frames(written)] == [
        started.tool_call_id,
        done.run_id,
    ]  # the Python attributes stay snake_case for the drawer
