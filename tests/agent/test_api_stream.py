"""The copilot's SSE answer: its frames, keepalive pings, and a person going away mid-answer.

Streams that must be read while the run is still going (keepalive, disconnects) go through a real
uvicorn server on loopback (the `live` fixtures: httpx's ASGI transport buffers a response until it
ends); the rest use the in-process client.
"""

import asyncio
from collections.abc import Awaitable

from httpx_sse import aconnect_sse

from desk.agent.core.client import get_provider, use_provider
from desk.agent.core.events import RunEvent
from desk.errors import ErrorCode
from tests.agent.api_helpers import (
    AI,
    PROMPT_MARKER,
    assert_clean,
    next_of,
    open_session,
    refused,
    run_docs,
    sam_in_a_session,
    send,
    waiting_for_approval,
)
from tests.fake_provider import Turn
from tests.helpers import reconfigure, until


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
    _sam, client, session_id = await sam_in_a_session(client_for, make_user)
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
    _sam, client, session_id = await sam_in_a_session(live_client_for, make_user)
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


async def test_client_disconnect_aborts_the_run(provider, fake_provider, live_client_for, make_user, db):
    _sam, client, session_id = await sam_in_a_session(live_client_for, make_user)
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
    _sam, client, session_id = await sam_in_a_session(live_client_for, make_user)
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
