"""Helpers for the copilot's HTTP tests (tests/agent/test_api_*.py): reading SSE answers, refusals."""

import contextlib
from collections.abc import AsyncIterator

import httpx
import pytest
from bson import ObjectId
from httpx_sse import ServerSentEvent, aconnect_sse
from pydantic import TypeAdapter

from desk.agent.core.events import EVENT_KINDS, RunEvent
from desk.errors import ErrorCode
from tests.fake_provider import FAKE_SECRET, FakeProvider, Turn

EVENTS: TypeAdapter[RunEvent] = TypeAdapter(RunEvent)
AI = "/api/v1/ai"
PROMPT_MARKER = "zebra-prompt-7781"  # planted in prompts: it must never come back in an error envelope


def oid(user: dict) -> ObjectId:
    return ObjectId(user["id"])


def parse(sse: ServerSentEvent) -> RunEvent:
    """An SSE event as the client gets it: a known name, one line of JSON that validates as that event."""
    assert sse.event in EVENT_KINDS, sse.event
    assert "\n" not in sse.data and "\r" not in sse.data
    event = EVENTS.validate_json(sse.data)
    assert event.kind == sse.event
    return event


async def open_session(client: httpx.AsyncClient) -> str:
    response = await client.post(f"{AI}/sessions")
    assert response.status_code == 201, response.text
    return response.json()["id"]


async def sam_in_a_session(client_for, make_user) -> tuple[dict, httpx.AsyncClient, str]:
    """Sam, a user, signed in through `client_for` (in process, or `live_client_for`), a conversation open."""
    sam = await make_user("user")
    client = await client_for(sam)
    return sam, client, await open_session(client)


async def send(
    client: httpx.AsyncClient, session_id: str, content: str, headers: dict | None = None
) -> tuple[httpx.Response, list[RunEvent]]:
    """POST a message and read the whole answer: (response, validated events); events are [] on a refusal.

    The response is read to its end either way, so `response.text` is what the client received.
    """
    url = f"{AI}/sessions/{session_id}/messages"
    async with client.stream("POST", url, json={"content": content}, headers=headers or {}) as response:
        await response.aread()
    if response.status_code != 200:
        return response, []
    return response, frames(response.text)


def frames(body: str) -> list[RunEvent]:
    """Every event of a finished SSE body, checked frame by frame: `event: <name>` then one `data:` line."""
    assert "\r" not in body
    chunks = body.split("\n\n")
    assert chunks[-1] == "", "the body must end with a complete frame"
    events = []
    for chunk in chunks[:-1]:
        lines = chunk.split("\n")
        assert len(lines) == 2 and lines[0].startswith("event: ") and lines[1].startswith("data: "), chunk
        events.append(parse(ServerSentEvent(event=lines[0][7:], data=lines[1][6:])))
    return events


async def next_of(events: AsyncIterator[ServerSentEvent], kind: str, seen: list[RunEvent]) -> RunEvent:
    """Read (and validate) events until one of `kind` arrives; everything read lands in `seen`."""
    async for sse in events:
        event = parse(sse)
        seen.append(event)
        if event.kind == kind:
            return event
    pytest.fail(f"the stream ended without a {kind} event; got {[e.kind for e in seen]}")


@contextlib.asynccontextmanager
async def waiting_for_approval(
    client: httpx.AsyncClient, session_id: str, fake_provider: FakeProvider, order_id: str
) -> AsyncIterator[tuple[AsyncIterator[ServerSentEvent], list[RunEvent], RunEvent]]:
    """Ask for the order to be made urgent; inside, the answer's stream is open at the approval request.

    Yields (the rest of the stream, the events read so far, the approval request).
    """
    fake_provider.script(*staged_update(order_id))
    url = f"{AI}/sessions/{session_id}/messages"
    async with aconnect_sse(client, "POST", url, json={"content": "make it urgent"}) as source:
        seen: list[RunEvent] = []
        events = source.aiter_sse()
        staged = await next_of(events, "tool_approval_required", seen)
        yield events, seen, staged


def refused(response: httpx.Response, status: int, code: ErrorCode) -> dict:
    """The JSON envelope of a refusal (never the prompt, never the API key)."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"error"} and body["error"]["code"] == code.value
    assert_clean(response.text)
    return body["error"]


def assert_clean(text: str) -> None:
    assert PROMPT_MARKER not in text
    assert FAKE_SECRET not in text
    assert "sk-test-key" not in text


def staged_update(order_id: str, priority: str = "urgent") -> tuple[Turn, Turn, Turn]:
    """The model reads the person's orders, proposes one update, then answers."""
    return (
        Turn.tool_calls(("list_my_work_orders", {})),
        Turn.tool_calls(("update_work_order", {"id": order_id, "priority": priority})),
        Turn.text("Done."),
    )


async def run_docs(db) -> list[dict]:
    return await db["agent_runs"].find({}).to_list()
