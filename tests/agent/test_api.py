"""The copilot's HTTP surface (/api/v1/ai): sessions, the SSE message stream, decisions, one's own runs.

Streams that must be read while the run is still going (keepalive, approvals, disconnects) go through
a real uvicorn server on loopback (httpx's ASGI transport buffers a response until it ends); the rest
use the in-process client. What is asserted is what a client or the database sees.
"""

import asyncio
import contextlib
import json
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta

import httpx
import pytest
import uvicorn
from bson import ObjectId
from httpx_sse import ServerSentEvent, aconnect_sse
from pydantic import TypeAdapter
from pymongo import AsyncMongoClient, MongoClient, monitoring

from desk.agent.copilot import start
from desk.agent.copilot.sessions import current_session
from desk.agent.core import budget, runs
from desk.agent.core.client import get_provider, use_provider
from desk.agent.core.events import EVENT_KINDS, RunEvent
from desk.auth import service as auth_service
from desk.errors import DeskError, ErrorCode
from desk.http import CSRF_HEADER, session_cookie_name
from desk.schema import now
from desk.users import service as users_service
from desk.users.models import UserAdminUpdate
from tests.fake_provider import FAKE_SECRET, FakeProvider, Turn
from tests.helpers import actor, reconfigure, until

EVENTS: TypeAdapter[RunEvent] = TypeAdapter(RunEvent)
AI = "/api/v1/ai"
PROMPT_MARKER = "zebra-prompt-7781"  # planted in prompts: it must never come back in an error envelope


# --- fixtures and helpers ---------------------------------------------------------------------


@pytest.fixture
async def live(app) -> AsyncIterator[str]:
    """The same API served by uvicorn on loopback, in this event loop (so it shares the database client)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(app, lifespan="off", access_log=False, log_config=None, timeout_graceful_shutdown=1)
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    await until(lambda: server.started, what="the live server to start")
    yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    server.should_exit = True
    await asyncio.wait_for(task, 10)


@pytest.fixture
async def live_client_for(live, db) -> AsyncIterator[Callable[[dict], Awaitable[httpx.AsyncClient]]]:
    """A logged-in client (session cookie + CSRF header) talking to the live server."""
    clients: list[httpx.AsyncClient] = []

    async def login(user: dict) -> httpx.AsyncClient:
        secret = await auth_service.open_session(db=db, user_id=_oid(user))
        client = httpx.AsyncClient(base_url=live, timeout=10)
        client.headers[CSRF_HEADER] = "1"
        client.cookies.set(session_cookie_name(), secret)
        clients.append(client)
        return client

    yield login
    for client in clients:
        await client.aclose()


def _oid(user: dict) -> ObjectId:
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


# --- sessions ---------------------------------------------------------------------------------


async def test_open_session_is_201_and_archives_the_previous_one(provider, client_for, make_user, db):
    sam = await make_user("user")
    client = await client_for(sam)

    response = await client.post(f"{AI}/sessions")
    second = await client.post(f"{AI}/sessions")

    assert response.status_code == 201 and second.status_code == 201
    body = second.json()
    assert body["userId"] == sam["id"] and body["status"] == "active"
    assert set(body) == {"id", "userId", "status", "createdAt", "updatedAt"}
    stored = {str(s["_id"]): s["status"] for s in await db["copilot_sessions"].find({}).to_list()}
    assert stored == {response.json()["id"]: "archived", body["id"]: "active"}


async def test_open_session_is_403_when_the_desk_has_ai_off(settings, client_for, make_user, db):
    assert settings.ai_enabled is False  # the default: a fresh checkout has no AI
    sam = await make_user("user")
    client = await client_for(sam)

    refused(await client.post(f"{AI}/sessions"), 403, ErrorCode.FORBIDDEN)
    # no provider is configured either: the message route must still say "off", not "unavailable"
    refused(await client.post(f"{AI}/sessions/{'a' * 24}/messages", json={"content": "hi"}), 403, ErrorCode.FORBIDDEN)
    # and it says so before it looks at the message: the whole feature is off, whatever is sent
    refused(await client.post(f"{AI}/sessions/{'a' * 24}/messages", json={"content": ""}), 403, ErrorCode.FORBIDDEN)
    assert await db["copilot_sessions"].count_documents({}) == 0


async def test_open_session_is_403_when_the_person_turned_ai_off(provider, client_for, make_user, db):
    sam = await make_user("user")
    client = await client_for(sam)
    session_id = await open_session(client)
    await users_service.set_own_ai(db=db, actor=actor(sam), enabled=False)

    refused(await client.post(f"{AI}/sessions"), 403, ErrorCode.FORBIDDEN)
    response, _ = await send(client, session_id, f"hello {PROMPT_MARKER}")
    refused(response, 403, ErrorCode.FORBIDDEN)
    assert await db["agent_runs"].count_documents({}) == 0


async def test_ten_concurrent_opens_leave_exactly_one_active_session(provider, client_for, make_user, db):
    sam = await make_user("user")
    client = await client_for(sam)

    responses = await asyncio.gather(*(client.post(f"{AI}/sessions") for _ in range(10)))

    created = {r.json()["id"] for r in responses if r.status_code == 201}
    assert created, [r.text for r in responses]
    for response in responses:
        if response.status_code != 201:
            refused(response, 409, ErrorCode.AI_APPROVAL_PENDING)
    active = await db["copilot_sessions"].find({"userId": _oid(sam), "status": "active"}).to_list()
    assert len(active) == 1 and str(active[0]["_id"]) in created


async def test_new_session_while_a_run_waits_for_approval_is_409(
    provider, fake_provider, live_client_for, make_user, make_order, db
):
    sam = await make_user("user")
    order = await make_order(sam, "Leaking tap")
    client = await live_client_for(sam)
    session_id = await open_session(client)

    async with waiting_for_approval(client, session_id, fake_provider, order.id) as (events, seen, staged):
        busy = refused(await client.post(f"{AI}/sessions"), 409, ErrorCode.AI_APPROVAL_PENDING)
        assert busy["message"] == "Your last conversation is still running or waiting for your approval."

        decided = await client.post(f"{AI}/tool-calls/{staged.tool_call_id}/decide", json={"approve": False})
        assert decided.status_code == 200
        done = await next_of(events, "message_done", seen)
    assert done.status == "complete"
    assert (await client.post(f"{AI}/sessions")).status_code == 201  # idle again: a new one may start


async def test_list_sessions_shows_recent_sessions_with_at_most_50_messages(
    ai_settings, provider, fake_provider, client_for, make_user
):
    reconfigure(ai_settings, ai_rate_limit_max=1000)
    sam, other = await make_user("user"), await make_user("user")
    client = await client_for(sam)
    first = await open_session(client)
    fake_provider.script(Turn.text("an old answer"))
    await send(client, first, "an old question")
    session_id = await open_session(client)
    for n in range(1, 27):  # 26 turns: 52 messages
        fake_provider.script(Turn.text(f"answer {n}"))
        response, events = await send(client, session_id, f"question {n}")
        assert response.status_code == 200 and events[-1].status == "complete"
    other_client = await client_for(other)
    await open_session(other_client)

    listed = (await client.get(f"{AI}/sessions")).json()

    assert [s["id"] for s in listed] == [session_id, first]  # newest first, only sam's
    messages = listed[0]["messages"]
    assert len(messages) == 50
    # the newest 50, oldest first: question 1 and answer 1 fell off the front
    assert [m["content"] for m in messages[:2]] == ["question 2", "answer 2"]
    assert [m["content"] for m in messages[-2:]] == ["question 26", "answer 26"]
    assert [m["role"] for m in messages[:4]] == ["user", "assistant", "user", "assistant"]
    assert [m["content"] for m in listed[1]["messages"]] == ["an old question", "an old answer"]
    assert (await other_client.get(f"{AI}/sessions")).json()[0]["messages"] == []


async def test_a_long_history_lists_the_20_newest_conversations_and_the_50_newest_runs(
    provider, client_for, make_user, db
):
    sam = await make_user("user")
    client = await client_for(sam)
    opened, started, day_one = [], [], now() - timedelta(days=1)
    for n in range(21):
        opened.append(await open_session(client))
        a_minute_apart = {"$set": {"createdAt": day_one + timedelta(minutes=n)}}  # no two in one millisecond
        await db["copilot_sessions"].update_one({"_id": ObjectId(opened[-1])}, a_minute_apart)
    for n in range(51):  # runs as the runtime writes them (the turns themselves are not the point here)
        run = runs.new_run(
            session_id=ObjectId(opened[-1]), user_id=_oid(sam), mode="copilot", model="m", lease=timedelta(0)
        )
        await runs.insert_run(db, {**run, "startedAt": day_one + timedelta(minutes=n)})
        await runs.finish_run(db, run["_id"], "complete")
        started.append(str(run["_id"]))

    sessions_listed = (await client.get(f"{AI}/sessions")).json()
    runs_listed = (await client.get(f"{AI}/runs")).json()

    assert [s["id"] for s in sessions_listed] == opened[::-1][:20]
    assert [r["id"] for r in runs_listed] == started[::-1][:50]
    oldest = await client.get(f"{AI}/runs/{started[0]}")  # off the list, still there by its id
    assert oldest.status_code == 200 and oldest.json()["run"]["id"] == started[0]


async def test_messages_written_in_the_same_millisecond_keep_their_order(
    provider, fake_provider, client_for, make_user, monkeypatch
):
    frozen = now()
    monkeypatch.setattr(runs, "now", lambda: frozen)  # every message of the turn gets one timestamp
    sam = await make_user("user")
    client = await client_for(sam)
    session_id = await open_session(client)
    fake_provider.script(Turn.tool_calls(("get_profile", {}), text="Let me look."), Turn.text("You are Sam."))

    _, events = await send(client, session_id, "who am I?")

    listed = (await client.get(f"{AI}/sessions")).json()[0]["messages"]
    assert [m["content"] for m in listed] == ["who am I?", "Let me look.", "You are Sam."]
    detail = (await client.get(f"{AI}/runs/{events[-1].run_id}")).json()
    assert [m["role"] for m in detail["messages"]] == ["user", "assistant", "tool", "assistant"]


async def test_a_step_that_only_called_tools_is_not_listed_as_an_empty_message(
    provider, fake_provider, client_for, make_user, db
):
    sam = await make_user("user")
    client = await client_for(sam)
    session_id = await open_session(client)
    fake_provider.script(Turn.tool_calls(("get_profile", {})), Turn.text("You are Sam."))

    await send(client, session_id, "who am I?")

    listed = (await client.get(f"{AI}/sessions")).json()[0]["messages"]
    assert [(m["role"], m["content"]) for m in listed] == [("user", "who am I?"), ("assistant", "You are Sam.")]
    silent = await db["agent_messages"].find_one({"role": "assistant", "content": ""})
    assert silent["toolCalls"] == ["get_profile"]  # stored with the run, only not shown in the conversation


# --- the message stream -----------------------------------------------------------------------


async def test_stream_headers_and_every_event_is_closed_set_json(
    provider, fake_provider, client_for, make_user, make_order, db
):
    sam = await make_user("user")
    await make_order(sam, "Leaking tap")
    client = await client_for(sam)
    session_id = await open_session(client)
    fake_provider.script(
        Turn.tool_calls(("list_my_work_orders", {})), Turn.text("You have one: the leaking tap.", chunks=4)
    )

    response, events = await send(client, session_id, "What do I have?")

    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.headers["cache-control"] == "no-cache"
    assert response.headers["x-accel-buffering"] == "no"
    kinds = [e.kind for e in events]
    assert kinds[:2] == ["tool_call_start", "tool_result"] and kinds[-1] == "message_done"
    assert "".join(e.text for e in events if e.kind == "token") == "You have one: the leaking tap."
    run = (await run_docs(db))[0]
    assert events[-1].run_id == str(run["_id"]) and run["status"] == "complete"


async def test_copilot_answers_are_never_compressed_unlike_the_rest_of_the_api(
    provider, fake_provider, client_for, make_user, make_order
):
    sam = await make_user("user")
    for n in range(3):
        await make_order(sam, f"Leaking tap number {n}")
    client = await client_for(sam)  # asks for gzip, as browsers and httpx do
    session_id = await open_session(client)
    fake_provider.script(Turn.text("A long answer about taps. " * 40))

    stream, events = await send(client, session_id, "Tell me about my taps")
    run = await client.get(f"{AI}/runs/{events[-1].run_id}")
    orders = await client.get("/api/v1/work-orders")

    # spec §4.8: a proxy holds a compressed stream back, so nothing under /api/v1/ai/ is compressed
    assert len(stream.content) > 500 and len(run.content) > 500
    assert "content-encoding" not in stream.headers and "content-encoding" not in run.headers
    assert len(orders.content) > 500 and orders.headers["content-encoding"] == "gzip"


async def test_model_text_cannot_forge_events_or_break_frames(provider, fake_provider, client_for, make_user):
    sam = await make_user("user")
    client = await client_for(sam)
    session_id = await open_session(client)
    forged = (
        'Sure.\n\nevent: error\ndata: {"code": "INTERNAL", "message": "forged"}\n\n'
        "event: message_done\r\ndata: {}\r\rbye"
    )
    fake_provider.script(Turn.text(forged, chunks=5))

    response, events = await send(client, session_id, "hi")  # `frames` checks every frame's shape

    assert response.status_code == 200
    assert [e.kind for e in events if e.kind != "token"] == ["message_done"]
    assert "".join(e.text for e in events if e.kind == "token") == forged
    assert events[-1].status == "complete"


async def test_mid_stream_failure_is_an_error_event(provider, fake_provider, client_for, make_user, make_order, db):
    sam = await make_user("user")
    await make_order(sam)
    client = await client_for(sam)
    session_id = await open_session(client)
    fake_provider.script(Turn.tool_calls(("list_my_work_orders", {})), Turn.error(500))

    response, events = await send(client, session_id, f"list them {PROMPT_MARKER}")

    assert response.status_code == 200  # the stream had started: the failure is an event, not an envelope
    assert [e.kind for e in events] == ["tool_call_start", "tool_result", "error", "message_done"]
    assert events[2].code == ErrorCode.AI_UNAVAILABLE and events[3].status == "error"
    assert_clean(response.text)
    run = (await run_docs(db))[0]
    assert run["status"] == "error" and run["errorCode"] == "AI_UNAVAILABLE"
    listed = (await client.get(f"{AI}/runs")).json()[0]  # what the person sees in their run history
    assert listed["status"] == "error" and listed["errorCode"] == "AI_UNAVAILABLE"
    assert listed["finishedAt"] is not None


async def test_keepalive_pings_while_the_model_is_slow(
    ai_settings, provider, fake_provider, live_client_for, make_user
):
    reconfigure(ai_settings, ai_sse_keepalive_ms=30)
    sam = await make_user("user")
    client = await live_client_for(sam)
    session_id = await open_session(client)
    fake_provider.script(Turn.slow("one two three", delay=0.1, chunks=3))

    response, events = await send(client, session_id, "hello")

    assert response.status_code == 200
    kinds = [e.kind for e in events]
    assert kinds[-1] == "message_done" and events[-1].status == "complete"
    first_token = kinds.index("token")
    assert "ping" in kinds[:first_token], kinds  # pinged while the model had not said anything yet
    assert kinds.count("ping") >= 3


async def test_keepalive_pings_while_waiting_for_approval(
    ai_settings, provider, fake_provider, live_client_for, make_user, make_order
):
    reconfigure(ai_settings, ai_sse_keepalive_ms=30)
    sam = await make_user("user")
    order = await make_order(sam)
    client = await live_client_for(sam)
    session_id = await open_session(client)

    async with waiting_for_approval(client, session_id, fake_provider, order.id) as (events, seen, staged):
        for _ in range(3):  # nothing happens until the person decides: the stream stays alive with pings
            await next_of(events, "ping", seen)
        await client.post(f"{AI}/tool-calls/{staged.tool_call_id}/decide", json={"approve": True})
        done = await next_of(events, "message_done", seen)
    assert done.status == "complete"


async def test_idempotency_key_replay_is_409_with_the_first_run(provider, fake_provider, client_for, make_user, db):
    sam = await make_user("user")
    client = await client_for(sam)
    session_id = await open_session(client)
    fake_provider.script(Turn.text("Hi there."))
    prefix = "nightly-import/3f1c9a7e/" + "x" * 150  # keys are compared whole, however long the shared start
    key = {"Idempotency-Key": f"{prefix}-1"}

    first, events = await send(client, session_id, "hello", headers=key)
    replay, _ = await send(client, session_id, "hello", headers=key)

    assert first.status_code == 200
    error = refused(replay, 409, ErrorCode.AI_MESSAGE_DUPLICATE)
    assert error["details"]["runId"] == events[-1].run_id
    assert [str(r["_id"]) for r in await run_docs(db)] == [events[-1].run_id]
    assert len(fake_provider.requests) == 1
    # another key is another message
    fake_provider.script(Turn.text("Again."))
    other, more = await send(client, session_id, "hello", headers={"Idempotency-Key": f"{prefix}-2"})
    assert other.status_code == 200 and more[-1].status == "complete"
    assert await db["agent_runs"].count_documents({}) == 2


async def test_concurrent_requests_with_one_idempotency_key_start_one_run(
    provider, fake_provider, client_for, make_user, db
):
    sam = await make_user("user")
    client = await client_for(sam)
    session_id = await open_session(client)
    fake_provider.script(Turn.text("Hi there."))
    key = {"Idempotency-Key": "same-key"}

    answers = await asyncio.gather(*(send(client, session_id, "hello", headers=key) for _ in range(3)))

    statuses = sorted(response.status_code for response, _ in answers)
    assert statuses == [200, 409, 409]
    for response, _ in answers:
        if response.status_code == 409:
            refused(response, 409, ErrorCode.AI_MESSAGE_DUPLICATE)
    assert await db["agent_runs"].count_documents({}) == 1
    assert len(fake_provider.requests) == 1


@pytest.mark.parametrize(("taken_again", "let_in"), [(0, True), (1, True), (2, False)])
async def test_a_key_given_back_under_a_retry_is_tried_again(mongo_uri, db, taken_again, let_in):
    """The earlier message with this key is refused and gives it back between the retry's insert and its read.

    Should other messages keep taking the key and giving it back under the retry, it stops after
    three tries and is refused as a duplicate (of itself: its run never starts) instead of spinning.
    """
    user_id, key, retry_run = ObjectId(), "3f1c9a7e-given-back", ObjectId()
    held = {"_id": f"{user_id}:{key}", "runId": ObjectId(), "expiresAt": now() + timedelta(days=1)}
    await db["agent_idempotency"].insert_one(held)

    class GiveBack(monitoring.CommandListener):
        given_back = 0

        def started(self, event) -> None:
            pass

        def failed(self, event) -> None:
            pass

        def succeeded(self, event) -> None:
            with MongoClient(mongo_uri) as other:
                keys = other[db.name]["agent_idempotency"]
                if event.command_name == "insert" and event.reply.get("writeErrors"):
                    self.given_back += 1  # the retry found the key taken: now its holder lets go of it
                    keys.delete_one({"_id": held["_id"]})
                elif event.command_name == "find" and self.given_back <= taken_again:
                    keys.insert_one(held)  # and another message with the key takes it before the retry's next try

    listener = GiveBack()
    client: AsyncMongoClient = AsyncMongoClient(mongo_uri, tz_aware=True, event_listeners=[listener])
    try:
        earlier = await runs.remember_key(client[db.name], user_id, key, retry_run)
    finally:
        await client.close()

    assert listener.given_back == taken_again + 1
    remembered = [doc["runId"] for doc in await db["agent_idempotency"].find().to_list()]
    if let_in:
        assert earlier is None  # not refused as a duplicate of a run that never started
        assert remembered == [retry_run]
    else:
        assert earlier == retry_run
        assert remembered == []  # the last holder gave it back: the person's next retry gets in


async def test_an_idempotency_key_is_remembered_for_one_day(provider, fake_provider, client_for, make_user, db):
    sam = await make_user("user")
    client = await client_for(sam)
    session_id = await open_session(client)
    fake_provider.script(Turn.text("Hi there."))
    sent_at = now()

    response, events = await send(client, session_id, "hello", headers={"Idempotency-Key": "3f1c9a7e-today"})

    assert response.status_code == 200
    (remembered,) = await db["agent_idempotency"].find().to_list()
    assert str(remembered["runId"]) == events[-1].run_id
    assert abs(remembered["expiresAt"] - (sent_at + timedelta(days=1))) < timedelta(minutes=1)


# --- refusals before the stream (the JSON envelope) ---------------------------------------------


async def test_someone_elses_session_is_404(provider, client_for, make_user, db):
    sam, eve = await make_user("user"), await make_user("user")
    sams_session = await open_session(await client_for(sam))
    eve_client = await client_for(eve)

    response, _ = await send(eve_client, sams_session, f"read sam's chat {PROMPT_MARKER}")
    refused(response, 404, ErrorCode.NOT_FOUND)
    for garbage in ("not-an-id", "0" * 24):
        response, _ = await send(eve_client, garbage, "hi")
        refused(response, 404, ErrorCode.NOT_FOUND)
    assert await db["agent_runs"].count_documents({}) == 0


@pytest.mark.parametrize("content", ["", "   ", "x" * (4001 - len(PROMPT_MARKER)) + PROMPT_MARKER])
async def test_message_length_outside_1_to_4000_is_400(provider, client_for, make_user, db, content):
    sam = await make_user("user")
    client = await client_for(sam)
    session_id = await open_session(client)

    response, _ = await send(client, session_id, content)

    refused(response, 400, ErrorCode.VALIDATION_ERROR)
    assert await db["agent_runs"].count_documents({}) == 0


JSON = {"Content-Type": "application/json"}
UNUSUAL_REQUESTS = {  # each goes FastAPI's own way (api.StreamRoute), and is answered as on any route
    "a query the route does not take": ({"params": {"draft": "1"}}, "draft: unknown field"),
    "a JSON body sent as text": ({"headers": {"Content-Type": "text/plain"}}, "Send the request body as JSON"),
    "an idempotency key over 200 characters": ({"headers": {"Idempotency-Key": "k" * 201}}, "idempotency-key: may"),
    "a body that is not JSON": ({"content": b'{"content": "hi"', "headers": JSON}, "not valid JSON"),
    "a field the message does not have": ({"json": {"content": "hi", "urgent": True}}, "urgent: unknown field"),
}


@pytest.mark.parametrize("unusual", UNUSUAL_REQUESTS.values(), ids=UNUSUAL_REQUESTS.keys())
async def test_an_unusual_message_request_is_refused_as_any_route_refuses_it(
    provider, fake_provider, client_for, make_user, db, unusual
):
    sam = await make_user("user")
    client = await client_for(sam)
    session_id = await open_session(client)
    request, says = unusual

    response = await client.post(f"{AI}/sessions/{session_id}/messages", **({"json": {"content": "hi"}} | request))

    assert says in refused(response, 400, ErrorCode.VALIDATION_ERROR)["message"] + response.text
    assert await db["agent_runs"].count_documents({}) == 0 and fake_provider.requests == []


async def test_a_message_sent_as_json_with_a_charset_streams_too(provider, fake_provider, client_for, make_user):
    sam = await make_user("user")
    client = await client_for(sam)
    session_id = await open_session(client)
    fake_provider.script(Turn.text("Three are open."), Turn.text("Still three."))
    url = f"{AI}/sessions/{session_id}/messages"

    plain = await client.post(url, json={"content": "what is open?"})
    with_charset = await client.post(
        url, content=b'{"content": "and now?"}', headers={"Content-Type": "application/json; charset=utf-8"}
    )

    assert [event.kind for event in frames(plain.text)] == [event.kind for event in frames(with_charset.text)]
    assert "".join(event.text for event in frames(with_charset.text) if event.kind == "token") == "Still three."
    assert fake_provider.requests[1]["messages"][-1] == {"role": "user", "content": "and now?"}


async def test_message_of_4000_chars_is_accepted(provider, fake_provider, client_for, make_user):
    sam = await make_user("user")
    client = await client_for(sam)
    session_id = await open_session(client)
    fake_provider.script(Turn.text("That is long."))

    response, events = await send(client, session_id, "x" * 4000)

    assert response.status_code == 200 and events[-1].status == "complete"
    assert fake_provider.requests[0]["messages"][-1] == {"role": "user", "content": "x" * 4000}


async def test_message_when_the_desk_turned_ai_off_is_403(ai_settings, provider, client_for, make_user, db):
    sam = await make_user("user")
    client = await client_for(sam)
    session_id = await open_session(client)
    reconfigure(ai_settings, ai_enabled=False)

    response, _ = await send(client, session_id, f"hello {PROMPT_MARKER}")

    refused(response, 403, ErrorCode.FORBIDDEN)
    assert await db["agent_runs"].count_documents({}) == 0


async def test_a_message_keeps_its_line_breaks_but_no_other_control_character(
    provider, fake_provider, client_for, make_user, db
):
    sam = await make_user("user")
    client = await client_for(sam)
    session_id = await open_session(client)

    response, _ = await send(client, session_id, f"hello\u001b[2J {PROMPT_MARKER}")

    error = refused(response, 400, ErrorCode.VALIDATION_ERROR)
    assert [problem["field"] for problem in error["details"]["fields"]] == ["content"]
    assert await db["agent_runs"].count_documents({}) == 0 and not fake_provider.requests
    fake_provider.script(Turn.text("Noted."))
    response, events = await send(client, session_id, "Two things:\r\n1. the tap\r\n2. the door")
    assert response.status_code == 200 and events[-1].status == "complete"
    assert fake_provider.requests[-1]["messages"][-1]["content"] == "Two things:\n1. the tap\n2. the door"


async def test_message_over_budget_is_429(ai_settings, provider, client_for, make_user, db):
    sam = await make_user("user")
    client = await client_for(sam)
    session_id = await open_session(client)
    await budget.charge(db, user_id=sam["id"], agent="copilot", usd=ai_settings.ai_daily_spend_usd)

    sent_at = now()
    response, _ = await send(client, session_id, f"hello {PROMPT_MARKER}")

    error = refused(response, 429, ErrorCode.AI_BUDGET_EXCEEDED)
    assert await db["agent_runs"].count_documents({}) == 0
    # try again when the ledger's day ends, at midnight UTC
    midnight = datetime(sent_at.year, sent_at.month, sent_at.day, tzinfo=UTC) + timedelta(days=1)
    wait = int(response.headers["Retry-After"])
    assert error["details"] == {"retryAfter": wait}
    assert abs(sent_at + timedelta(seconds=wait) - midnight) < timedelta(seconds=5)


def _minute() -> tuple[int, int]:
    """The limiter's window: it counts per calendar minute."""
    moment = now()
    return moment.hour, moment.minute


async def test_message_rate_is_limited_per_user_and_address(
    ai_settings, provider, fake_provider, app, db, make_user, client_for
):
    reconfigure(ai_settings, ai_rate_limit_max=2)
    sam, ann = await make_user("user"), await make_user("user")

    async def client(user: dict, ip: str) -> httpx.AsyncClient:
        logged_in = await client_for(user)
        logged_in._transport = httpx.ASGITransport(app, client=(ip, 4711))
        return logged_in

    sam_session = await open_session(await client(sam, "10.9.9.9"))
    for attempt in range(3):  # a burst that straddles a minute boundary is redone from a fresh address
        address = f"10.0.{attempt}.1"
        home, window, statuses = await client(sam, address), _minute(), []
        for _ in range(2):
            fake_provider.script(Turn.text("ok"))
            statuses.append((await send(home, sam_session, "hi"))[0].status_code)
        response, _ = await send(home, sam_session, f"hi {PROMPT_MARKER}")
        if _minute() == window:
            break
        fake_provider.unscripted = 0  # the third message may have got in, in the new minute

    assert statuses == [200, 200]
    error = refused(response, 429, ErrorCode.RATE_LIMITED)
    assert 1 <= int(response.headers["retry-after"]) <= 60 and error["details"]["retryAfter"] >= 1
    fake_provider.script(Turn.text("ok"), Turn.text("ok"))
    other_address = await client(sam, "10.1.1.1")
    assert (await send(other_address, sam_session, "hi"))[0].status_code == 200  # same person, other address
    ann_home = await client(ann, address)
    ann_session = await open_session(ann_home)
    assert (await send(ann_home, ann_session, "hi"))[0].status_code == 200  # same address, other person


async def test_second_message_while_a_run_waits_for_approval_is_409(
    provider, fake_provider, live_client_for, make_user, make_order, db
):
    sam = await make_user("user")
    order = await make_order(sam)
    client = await live_client_for(sam)
    session_id = await open_session(client)

    async with waiting_for_approval(client, session_id, fake_provider, order.id) as (events, seen, staged):
        response, _ = await send(client, session_id, f"and another thing {PROMPT_MARKER}")
        refused(response, 409, ErrorCode.AI_APPROVAL_PENDING)

        await client.post(f"{AI}/tool-calls/{staged.tool_call_id}/decide", json={"approve": True})
        await next_of(events, "message_done", seen)
    assert await db["agent_runs"].count_documents({}) == 1


async def test_a_message_to_ones_own_archived_session_is_409_closed(provider, client_for, make_user, db):
    sam = await make_user("user")
    client = await client_for(sam)
    old_session = await open_session(client)
    await open_session(client)  # a new conversation archives the old one

    response, _ = await send(client, old_session, f"hello again {PROMPT_MARKER}")

    error = refused(response, 409, ErrorCode.CONFLICT)
    assert error["message"] == "This conversation is closed; start a new one."
    assert await db["agent_runs"].count_documents({}) == 0


async def test_a_deactivated_person_is_refused_before_a_run_starts(db, ai_settings, provider, fake_provider, make_user):
    sam, boss = await make_user("user"), await make_user("admin")
    session = await current_session(db=db, settings=ai_settings, actor=actor(sam))
    await users_service.update_user(db=db, actor=actor(boss), user_id=sam["id"], data=UserAdminUpdate(active=False))

    with pytest.raises(DeskError) as caught:  # e.g. a request authenticated just before the deactivation
        await start.begin(
            db=db,
            settings=ai_settings,
            provider=provider,
            actor=actor(sam),
            session_id=session.id,
            content=f"hello {PROMPT_MARKER}",
            ip="127.0.0.1",
        )

    assert (caught.value.status, caught.value.code) == (403, ErrorCode.FORBIDDEN)
    assert await db["agent_runs"].count_documents({}) == 0
    assert (await db["copilot_sessions"].find_one({"_id": ObjectId(session.id)}))["runningRunId"] is None
    assert fake_provider.requests == []


# several refusals at once: the person sees the first in `start._rank`'s order, a failure of ours before any

KEY = "3f1c9a7e-retry"


async def _a_run_in_progress(*, db, session_id, **_) -> None:
    await runs.claim_session(db, ObjectId(session_id), ObjectId())  # another run holds the session


async def _a_closed_session(*, client, **_) -> None:
    await open_session(client)  # a new conversation archives the one the message goes to


async def _someone_elses_session(*, make_user, client_for, **_) -> str:
    return await open_session(await client_for(await make_user("user")))


async def _a_replayed_key(*, db, sam, **_) -> None:
    await runs.remember_key(db, _oid(sam), KEY, ObjectId())  # a message with this key started a run already


async def _the_budget_used_up(*, db, ai_settings, sam, **_) -> None:
    await budget.charge(db, user_id=sam["id"], agent="copilot", usd=ai_settings.ai_daily_spend_usd)


async def _the_rate_used_up(*, ai_settings, client, session_id, fake_provider, **_) -> None:
    reconfigure(ai_settings, ai_rate_limit_max=1)
    moment = now()
    if moment.second >= 55:  # the limiter counts per calendar minute: both messages must fall in one
        await asyncio.sleep(60.1 - moment.second - moment.microsecond / 1e6)
    fake_provider.script(Turn.text("ok"))
    response, _ = await send(client, session_id, "this minute's one message")
    assert response.status_code == 200


async def _a_failure_of_ours(*, db, sam, **_) -> None:
    sams_day = budget.keys(user_id=sam["id"], agent="copilot")[0]
    await db["agent_spend"].insert_one({"_id": sams_day, "starts": "not a counter"})  # counting the start fails


AT_ONCE = {
    "a run in progress, over budget": (_a_run_in_progress, _the_budget_used_up, 429, ErrorCode.AI_BUDGET_EXCEEDED),
    "a replayed key, over the rate": (_a_replayed_key, _the_rate_used_up, 429, ErrorCode.RATE_LIMITED),
    "a closed session, over budget": (_a_closed_session, _the_budget_used_up, 409, ErrorCode.CONFLICT),
    "someone else's session, over the rate": (_someone_elses_session, _the_rate_used_up, 404, ErrorCode.NOT_FOUND),
    "a run in progress, a failure of ours": (_a_run_in_progress, _a_failure_of_ours, 500, ErrorCode.INTERNAL),
    "a closed session, a failure of ours": (_a_closed_session, _a_failure_of_ours, 500, ErrorCode.INTERNAL),
}


@pytest.mark.parametrize(("claim", "admission", "status", "code"), AT_ONCE.values(), ids=AT_ONCE.keys())
async def test_several_refusals_at_once_answer_the_first_and_a_failure_of_ours_is_a_500(
    ai_settings, provider, fake_provider, app, client_for, make_user, db, claim, admission, status, code
):
    sam = await make_user("user")
    client = await client_for(sam)
    client._transport = httpx.ASGITransport(app, raise_app_exceptions=False)  # a 500 is an answer, as over a network
    session_id = await open_session(client)
    given = {"db": db, "ai_settings": ai_settings, "sam": sam, "client": client, "session_id": session_id}
    given |= {"make_user": make_user, "client_for": client_for, "fake_provider": fake_provider}
    await admission(**given)  # first: using up the rate takes a message on the open, idle session
    session_id = await claim(**given) or session_id
    calls, stored_runs = len(fake_provider.requests), await db["agent_runs"].count_documents({})

    response, _ = await send(client, session_id, f"hello {PROMPT_MARKER}", headers={"Idempotency-Key": KEY})

    assert response.status_code == status, response.text
    assert_clean(response.text)
    refused(response, status, code)
    assert len(fake_provider.requests) == calls
    assert await db["agent_runs"].count_documents({}) == stored_runs


async def test_a_failure_of_ours_is_a_500_in_the_envelope(provider, fake_provider, app, client_for, make_user, db):
    sam = await make_user("user")
    client = await client_for(sam)
    client._transport = httpx.ASGITransport(app, raise_app_exceptions=False)  # a 500 is an answer, as over a network
    session_id = await open_session(client)
    await _a_failure_of_ours(db=db, sam=sam)

    response, _ = await send(client, session_id, f"hello {PROMPT_MARKER}")

    error = refused(response, 500, ErrorCode.INTERNAL)
    assert error["message"] == "Something went wrong on our side; it has been logged."


# --- deciding over HTTP -------------------------------------------------------------------------


async def test_decide_over_http(provider, fake_provider, live_client_for, make_user, make_order, db, live):
    sam, eve = await make_user("user"), await make_user("user")
    order = await make_order(sam, "Leaking tap")
    client, eve_client = await live_client_for(sam), await live_client_for(eve)
    session_id = await open_session(client)

    async with waiting_for_approval(client, session_id, fake_provider, order.id) as (events, seen, staged):
        decide_url = f"{AI}/tool-calls/{staged.tool_call_id}/decide"

        refused(await eve_client.post(decide_url, json={"approve": True}), 404, ErrorCode.NOT_FOUND)
        no_csrf = await client.post(decide_url, json={"approve": True}, headers={CSRF_HEADER: ""})
        refused(no_csrf, 403, ErrorCode.FORBIDDEN)
        still = await db["agent_tool_calls"].find_one({"_id": ObjectId(staged.tool_call_id)})
        assert still["approval"]["status"] == "pending"

        decided = await client.post(decide_url, json={"approve": True})
        done = await next_of(events, "message_done", seen)

    assert decided.status_code == 200
    body = decided.json()
    assert body["id"] == staged.tool_call_id and body["approval"]["status"] == "approved"
    assert body["tool"] == "update_work_order" and body["args"] == {"id": order.id, "priority": "urgent"}
    assert done.status == "complete"
    assert [e.outcome for e in seen if e.kind == "tool_result"][-1] == "executed"
    stored = await db["work_orders"].find_one({})
    assert stored["priority"] == "urgent" and stored["version"] == 2
    again = await client.post(decide_url, json={"approve": True})  # a retried decide is harmless...
    assert again.status_code in (200, 410)
    assert (await db["work_orders"].find_one({}))["version"] == 2  # ...and never executes twice
    detail = (await client.get(f"{AI}/runs/{done.run_id}")).json()
    assert detail["run"]["finishedAt"] is not None and detail["run"]["errorCode"] is None
    assert detail["run"]["agentName"] == "copilot"
    write = detail["toolCalls"][-1]  # the audit trail of the write: what was approved, on what, and what came of it
    assert write["outcome"] == "executed" and write["preImage"]["priority"] == "medium"
    assert write["stagedVersion"] == 1 and write["executedVersion"] == 2
    assert write["result"]["updated"]["priority"] == "urgent" and isinstance(write["latencyMs"], int)
    assert write["approval"]["decidedAt"] is not None and write["approval"]["reason"] is None


async def test_a_rejection_over_http_changes_nothing_and_tells_the_assistant_why(
    provider, fake_provider, live_client_for, make_user, make_order, db
):
    sam = await make_user("user")
    order = await make_order(sam, "Leaking tap")
    client = await live_client_for(sam)
    session_id = await open_session(client)

    async with waiting_for_approval(client, session_id, fake_provider, order.id) as (events, seen, staged):
        decide_url = f"{AI}/tool-calls/{staged.tool_call_id}/decide"

        no_choice = await client.post(decide_url, json={"reason": "hmm"})  # approving is never the default
        too_long = await client.post(decide_url, json={"approve": False, "reason": "x" * 301})
        pending = await db["agent_tool_calls"].find_one({"_id": ObjectId(staged.tool_call_id)})
        rejected = await client.post(decide_url, json={"approve": False, "reason": "  not today  "})
        done = await next_of(events, "message_done", seen)

    refused(no_choice, 400, ErrorCode.VALIDATION_ERROR)
    refused(too_long, 400, ErrorCode.VALIDATION_ERROR)
    assert pending["approval"]["status"] == "pending"
    assert rejected.status_code == 200, rejected.text
    assert rejected.json()["approval"]["status"] == "rejected" and rejected.json()["approval"]["reason"] == "not today"
    assert done.status == "complete"
    assert [e.outcome for e in seen if e.kind == "tool_result"][-1] == "rejected"
    stored = await db["work_orders"].find_one({})
    assert stored["priority"] == "medium" and stored["version"] == 1
    told = fake_provider.requests[-1]["messages"][-1]  # what the model read back as the tool's result
    assert told["role"] == "tool" and json.loads(told["content"]) == {"rejected": True, "reason": "not today"}


async def test_client_disconnect_aborts_the_run(provider, fake_provider, live_client_for, make_user, db):
    sam = await make_user("user")
    client = await live_client_for(sam)
    session_id = await open_session(client)
    fake_provider.script(Turn.slow("a long and slow answer", delay=0.3, chunks=10))

    url = f"{AI}/sessions/{session_id}/messages"
    async with aconnect_sse(client, "POST", url, json={"content": "tell me a story"}) as source:
        seen: list[RunEvent] = []
        await next_of(source.aiter_sse(), "token", seen)
    # the response is closed: the person went away mid-answer

    async def status() -> str:
        return (await run_docs(db))[0]["status"]

    await until(lambda: _is(status(), "aborted"), what="the run to be aborted")
    assert await fake_provider.wait_for_disconnect()  # and the upstream call was dropped too
    session = await db["copilot_sessions"].find_one({})
    await until(lambda: _session_free(db, session["_id"]), what="the session to be released")
    fake_provider.script(Turn.text("Here I am."))
    response, events = await send(client, session_id, "still there?")
    assert response.status_code == 200 and events[-1].status == "complete"


async def _is(value: Awaitable[object], expected: object) -> bool:
    return await value == expected


async def _session_free(db, session_id) -> bool:
    return (await db["copilot_sessions"].find_one({"_id": session_id}))["runningRunId"] is None


async def test_logout_aborts_the_running_run(provider, fake_provider, live_client_for, make_user, db):
    sam = await make_user("user")
    client = await live_client_for(sam)
    session_id = await open_session(client)
    fake_provider.script(Turn.slow("slowly", delay=0.1, chunks=3))

    async def listen() -> list[RunEvent]:
        return (await send(client, session_id, "hello"))[1]

    listening = asyncio.create_task(listen())
    await until(lambda: _has_running_run(db), what="the run to start")

    logout = await client.post("/api/v1/auth/logout")

    assert logout.status_code == 204
    run = (await run_docs(db))[0]
    assert run["status"] == "aborted" and run["finishedAt"] is not None
    events = await asyncio.wait_for(listening, 10)
    assert events[-1].kind == "message_done" and events[-1].status == "aborted"
    refused(await client.get(f"{AI}/runs"), 401, ErrorCode.UNAUTHORIZED)  # and the session is gone


async def _has_running_run(db) -> bool:
    return await db["agent_runs"].count_documents({"status": "running"}) == 1


async def test_bearer_token_works_for_the_whole_flow_without_csrf(
    provider, fake_provider, live, make_user, make_order, db
):
    sam = await make_user("user")
    order = await make_order(sam, "Leaking tap")
    token = await auth_service.create_token(db=db, actor=actor(sam), name="script")
    fake_provider.script(*staged_update(order.id, "low"))

    async with httpx.AsyncClient(base_url=live, headers={"Authorization": f"Bearer {token.secret}"}) as client:
        assert CSRF_HEADER not in client.headers and not client.cookies
        session_id = await open_session(client)
        url = f"{AI}/sessions/{session_id}/messages"
        async with aconnect_sse(client, "POST", url, json={"content": "lower it"}) as source:
            seen: list[RunEvent] = []
            events = source.aiter_sse()
            staged = await next_of(events, "tool_approval_required", seen)
            decided = await client.post(f"{AI}/tool-calls/{staged.tool_call_id}/decide", json={"approve": True})
            done = await next_of(events, "message_done", seen)
        runs = (await client.get(f"{AI}/runs")).json()
        detail = (await client.get(f"{AI}/runs/{done.run_id}")).json()

    assert decided.status_code == 200 and done.status == "complete"
    assert (await db["work_orders"].find_one({}))["priority"] == "low"
    assert [r["id"] for r in runs] == [done.run_id]
    assert detail["run"]["status"] == "complete"
    assert [c["outcome"] for c in detail["toolCalls"]] == ["ok", "executed"]


# --- one's own runs -------------------------------------------------------------------------------


async def test_runs_are_listed_and_shown_to_their_owner_only(provider, fake_provider, client_for, make_user):
    sam, eve = await make_user("user"), await make_user("user")
    sam_client, eve_client = await client_for(sam), await client_for(eve)
    sam_session = await open_session(sam_client)
    fake_provider.script(Turn.tool_calls(("get_profile", {})), Turn.text("You are Sam."), Turn.text("Hi Eve."))
    _, sam_events = await send(sam_client, sam_session, "who am I?")
    _, eve_events = await send(eve_client, await open_session(eve_client), "hi")
    sam_run = sam_events[-1].run_id

    listed = (await sam_client.get(f"{AI}/runs")).json()
    detail = await sam_client.get(f"{AI}/runs/{sam_run}")

    assert [r["id"] for r in listed] == [sam_run]
    assert listed[0]["status"] == "complete" and listed[0]["mode"] == "copilot"
    assert listed[0]["actorId"] == sam["id"] and listed[0]["inputTokens"] == 200
    body = detail.json()
    assert body["run"]["id"] == sam_run
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert [c["tool"] for c in body["toolCalls"]] == ["get_profile"]
    refused(await sam_client.get(f"{AI}/runs/{eve_events[-1].run_id}"), 404, ErrorCode.NOT_FOUND)
    refused(await sam_client.get(f"{AI}/runs/nonsense"), 404, ErrorCode.NOT_FOUND)


async def test_ai_routes_need_a_login(provider, anonymous):
    for method, path in [
        ("POST", f"{AI}/sessions"),
        ("GET", f"{AI}/sessions"),
        ("POST", f"{AI}/sessions/{'a' * 24}/messages"),
        ("POST", f"{AI}/tool-calls/{'a' * 24}/decide"),
        ("GET", f"{AI}/runs"),
        ("GET", f"{AI}/runs/{'a' * 24}"),
    ]:
        body = {"content": "hi"} if path.endswith("messages") else {"approve": True}
        response = await anonymous.request(method, path, json=body if method == "POST" else None)
        refused(response, 401, ErrorCode.UNAUTHORIZED)


# --- the contract -------------------------------------------------------------------------------

EXPECTED_ERRORS = {  # route -> statuses it must document (besides 400 validation, 401 and 403)
    ("post", f"{AI}/sessions"): {409},
    ("get", f"{AI}/sessions"): set(),
    ("post", f"{AI}/sessions/{{session_id}}/messages"): {404, 409, 429},
    ("post", f"{AI}/tool-calls/{{tool_call_id}}/decide"): {404, 409, 410},
    ("get", f"{AI}/runs"): set(),
    ("get", f"{AI}/runs/{{run_id}}"): {404},
}


async def test_every_ai_route_documents_its_error_envelope(app, anonymous):
    spec = (await anonymous.get("/openapi.json")).json()

    routes = {
        (method, path): operation
        for path, item in spec["paths"].items()
        if path.startswith(AI)
        for method, operation in item.items()
    }
    assert set(routes) == set(EXPECTED_ERRORS)
    for route, operation in routes.items():
        # 422 is FastAPI's own entry; the desk answers validation with 400 (reported, not asserted here)
        documented = {int(s) for s in operation["responses"] if s.isdigit() and int(s) >= 400 and s != "422"}
        assert documented >= {400, 401, 403} | EXPECTED_ERRORS[route], (route, documented)
        for status in documented:
            schema = operation["responses"][str(status)]["content"]["application/json"]["schema"]
            assert schema == {"$ref": "#/components/schemas/ErrorEnvelope"}, (route, status)
    messages = routes[("post", f"{AI}/sessions/{{session_id}}/messages")]
    assert "text/event-stream" in messages["responses"]["200"]["content"]
    described = " ".join(r.get("description", "") for r in messages["responses"].values())
    for code in ("AI_APPROVAL_PENDING", "AI_MESSAGE_DUPLICATE", "AI_BUDGET_EXCEEDED", "RATE_LIMITED"):
        assert code in described
    envelope = spec["components"]["schemas"]["ErrorEnvelope"]
    assert envelope["required"] == ["error"]


async def test_ai_routes_are_json_everywhere_on_errors(provider, client_for, make_user):
    """Unknown sub-paths and wrong methods under /api/v1/ai answer in the envelope too."""
    client = await client_for(await make_user("user"))
    refused(await client.get(f"{AI}/nothing-here"), 404, ErrorCode.NOT_FOUND)
    wrong_method = await client.delete(f"{AI}/sessions")
    refused(wrong_method, 405, ErrorCode.METHOD_NOT_ALLOWED)
    assert wrong_method.headers["Allow"] == "GET, HEAD, POST"
    refused(
        await client.post(f"{AI}/tool-calls/{'a' * 24}/decide", json={"approve": "yes"}),
        400,
        ErrorCode.VALIDATION_ERROR,
    )


async def test_messages_reach_the_model_over_one_kept_connection(ai_settings, fake_provider, client_for, make_user):
    use_provider(None)  # the routes build the process's provider client themselves, as in production
    try:
        client = await client_for(await make_user("user"))
        session_id = await open_session(client)
        for n in range(2):
            fake_provider.script(Turn.text(f"answer {n}"))
            assert (await send(client, session_id, f"question {n}"))[1][-1].status == "complete"

        assert len(fake_provider.peers) == 2 and len(set(fake_provider.peers)) == 1  # no new handshake per message
    finally:
        await get_provider().aclose()
        use_provider(None)


def test_event_kinds_match_the_union():
    """The closed set the route checks against is exactly the events the runtime can yield."""
    names = {member.model_fields["kind"].default for member in RunEvent.__origin__.__args__}
    assert names == set(EVENT_KINDS) and len(EVENT_KINDS) == 8
    assert json.dumps(sorted(names))  # every name is plain ASCII, no separators
    assert all(name.isidentifier() for name in names)


async def test_a_message_refused_as_pending_can_be_retried_with_its_key(db, ai_settings, provider, make_user):
    sam = await make_user("user")
    session = await current_session(db=db, settings=ai_settings, actor=actor(sam))
    await runs.claim_session(db, ObjectId(session.id), ObjectId())  # another run holds the session

    with pytest.raises(start.ApprovalPending):
        await start.begin(
            db=db,
            settings=ai_settings,
            provider=provider,
            actor=actor(sam),
            session_id=session.id,
            content="Hello",
            ip="127.0.0.1",
            idempotency_key="retry-me",
        )

    assert await db["agent_idempotency"].count_documents({}) == 0


async def test_a_person_switches_their_own_ai_off_and_on_through_the_api(provider, client_for, make_user, db):
    sam = await make_user()
    client = await client_for(sam)

    off = await client.patch("/api/v1/auth/me", json={"aiEnabled": False})
    refused = await client.post(f"{AI}/sessions")
    on = await client.patch("/api/v1/auth/me", json={"aiEnabled": True})
    opened = await client.post(f"{AI}/sessions")
    promoted = await client.patch("/api/v1/auth/me", json={"aiEnabled": True, "role": "admin"})

    assert (off.status_code, off.json()["aiEnabled"]) == (200, False)
    assert (refused.status_code, refused.json()["error"]["code"]) == (403, ErrorCode.FORBIDDEN)
    assert (on.status_code, on.json()["aiEnabled"]) == (200, True)
    assert opened.status_code == 201, opened.text
    assert promoted.status_code == 400  # only one's own AI switch: nothing else about oneself (VALIDATION_ERROR)
    assert (await db["users"].find_one({"_id": ObjectId(sam["id"])}))["role"] == "user"
