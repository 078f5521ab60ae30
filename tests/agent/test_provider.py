"""The provider adapter against the scripted fake on loopback: streaming, tool calls, every failure."""

import asyncio
import email.utils
import gzip
import json
import logging
import socket
import ssl
import time
from collections.abc import AsyncIterator, Callable
from contextlib import aclosing
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from desk.agent.core import faults
from desk.agent.core.provider import (
    AIUnavailable,
    Completed,
    Provider,
    ProviderEvent,
    TextDelta,
    ToolCallRequest,
    Usage,
)
from desk.config import Settings
from desk.errors import ErrorCode
from tests.fake_provider import FAKE_SECRET, FakeProvider, Turn

KEY = "test-key-never-logged-9c2d7"
PROMPT = "PROMPT-CANARY: the gate code for the boiler room is 4471"
MESSAGES = [
    {"role": "system", "content": "You are the work order desk copilot."},
    {"role": "user", "content": PROMPT},
]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "list_my_work_orders",
            "description": "List the caller's work orders.",
            "parameters": {"type": "object", "properties": {}, "additionalProperties": False},
        },
    }
]


# Building a TLS context costs ~0.15 s; the clients share one (the fake is plain http on loopback anyway).
TLS = ssl.create_default_context()


def make_provider(url: str, **overrides: Any) -> Provider:
    options: dict[str, Any] = {
        "transport": httpx.AsyncHTTPTransport(verify=TLS),
        "base_url": url,
        "api_key": KEY,
        "model": "fake-model",
        "max_output_tokens": 2048,
        "price_in": 0.15,
        "price_out": 0.60,
    }
    return Provider(**(options | overrides))


@pytest.fixture
async def provider(fake_provider: FakeProvider) -> AsyncIterator[Provider]:
    provider = make_provider(fake_provider.url)
    yield provider
    await provider.aclose()


@pytest.fixture
async def provider_with(fake_provider: FakeProvider) -> AsyncIterator[Callable[..., Provider]]:
    """Providers on the fake with some options changed, closed after the test."""
    made: list[Provider] = []

    def provider_with(**overrides: Any) -> Provider:
        made.append(make_provider(fake_provider.url, **overrides))
        return made[-1]

    yield provider_with
    for provider in made:
        await provider.aclose()


async def run(provider: Provider, tools: list[dict] = TOOLS) -> list[ProviderEvent]:
    async with aclosing(provider.stream(MESSAGES, tools)) as events:
        return [event async for event in events]


def choice(delta: dict[str, Any] | None = None, finish: str | None = None) -> dict[str, Any]:
    """One streamed chunk with a single choice, as the fake's turns build them."""
    return {"choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}]}


def tool_piece(index: int, *, id: str | None = None, name: str | None = None, arguments: str = "") -> dict[str, Any]:
    """One chunk carrying one piece of the tool call at `index`."""
    piece: dict[str, Any] = {"index": index, "function": {"arguments": arguments}}
    if id is not None:
        piece["id"] = id
    if name is not None:
        piece["function"]["name"] = name
    return choice({"tool_calls": [piece]})


# --- what a good call looks like ---


async def test_text_streams_as_several_deltas_then_one_completed(fake_provider: FakeProvider, provider: Provider):
    # a moment between the chunks: each arrives in a read of its own, as a model writing its answer sends it
    fake_provider.script(
        Turn.text("Hello! You have three open work orders.", chunks=3, usage=(120, 30)).with_delay(0.02)
    )

    events = await run(provider)

    *deltas, completed = events
    assert len(deltas) == 3
    assert all(isinstance(delta, TextDelta) for delta in deltas)
    assert "".join(delta.text for delta in deltas) == "Hello! You have three open work orders."
    assert completed == Completed([], Usage(120, 30), "stop", text="Hello! You have three open work orders.")
    assert fake_provider.client_disconnects == 0


async def test_chunks_that_arrive_in_one_read_are_one_delta(fake_provider: FakeProvider, provider: Provider):
    burst = Turn.text("Hello! You have three open work orders.", chunks=3, usage=(120, 30))
    fake_provider.script(Turn(frames=(b"".join(burst.frames),)))  # a proxy that buffers sends them so

    *deltas, completed = await run(provider)

    # one frame to the person, not three: each costs a write through every layer, and none is held back
    assert [delta.text for delta in deltas] == ["Hello! You have three open work orders."]
    assert completed == Completed([], Usage(120, 30), "stop", text="Hello! You have three open work orders.")


async def test_text_before_a_bad_chunk_in_the_same_read_is_still_streamed(
    fake_provider: FakeProvider, provider: Provider
):
    fake_provider.script(Turn(frames=(b"".join(Turn.malformed("Let me look").frames),)))

    deltas = []
    with pytest.raises(AIUnavailable):
        async for event in provider.stream([{"role": "user", "content": "hi"}], []):
            deltas.append(event)

    assert [delta.text for delta in deltas] == ["Let me look"]


@pytest.mark.parametrize("interleaved", [False, True], ids=["one-after-another", "interleaved"])
async def test_parallel_tool_calls_are_assembled_with_their_arguments_intact(
    fake_provider: FakeProvider, provider: Provider, interleaved: bool
):
    update = {"id": "665f1c2e9b1e8a0012345678", "priority": "high", "description": 'says "urgent", {really}'}
    fake_provider.script(
        Turn.tool_calls(
            ("list_my_work_orders", {}, "call_a"),
            ("update_work_order", update, "call_b"),
            pieces=5,
            interleaved=interleaved,
        )
    )

    (completed,) = await run(provider)

    assert isinstance(completed, Completed)
    assert completed.finish_reason == "tool_calls"
    assert [(call.id, call.name) for call in completed.tool_calls] == [
        ("call_a", "list_my_work_orders"),
        ("call_b", "update_work_order"),
    ]
    assert json.loads(completed.tool_calls[0].arguments) == {}
    assert json.loads(completed.tool_calls[1].arguments) == update


async def test_tool_call_arguments_and_names_are_passed_on_raw_for_the_runtime_to_judge(
    fake_provider: FakeProvider, provider: Provider
):
    fake_provider.script(Turn.tool_calls(("launch_the_rockets", '{"id": "66', "call_x"), text="Sure."))

    *deltas, completed = await run(provider)

    assert "".join(delta.text for delta in deltas) == "Sure."
    assert completed.tool_calls[0].name == "launch_the_rockets"
    assert completed.tool_calls[0].arguments == '{"id": "66'


async def test_the_request_carries_model_max_tokens_stream_flags_and_tools(
    fake_provider: FakeProvider, provider: Provider
):
    fake_provider.script(Turn.text())

    await run(provider)

    (body,) = fake_provider.requests
    assert body["model"] == "fake-model"
    assert body["max_tokens"] == 2048
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["messages"] == MESSAGES
    assert body["tools"] == TOOLS


async def test_a_call_without_tools_sends_no_tools_list(fake_provider: FakeProvider, provider: Provider):
    fake_provider.script(Turn.text())

    await run(provider, tools=[])

    (body,) = fake_provider.requests
    assert "tools" not in body


async def test_a_named_tool_choice_is_sent_as_given(fake_provider: FakeProvider, provider: Provider):
    forced = {"type": "function", "function": {"name": "list_my_work_orders"}}
    fake_provider.script(Turn.tool_calls(("list_my_work_orders", {})))

    async with aclosing(provider.stream(MESSAGES, TOOLS, tool_choice=forced)) as events:
        (completed,) = [event async for event in events]

    assert fake_provider.requests[0]["tool_choice"] == forced
    assert completed.tool_calls[0].name == "list_my_work_orders"


async def test_without_a_tool_choice_none_is_sent(fake_provider: FakeProvider, provider: Provider):
    fake_provider.script(Turn.text())

    await run(provider)

    assert "tool_choice" not in fake_provider.requests[0]


async def test_the_key_travels_only_in_the_authorization_header(fake_provider: FakeProvider, provider: Provider):
    fake_provider.script(Turn.text())

    await run(provider)

    (headers,) = fake_provider.headers
    assert headers["authorization"] == f"Bearer {KEY}"
    assert headers["accept-encoding"] == "identity"
    assert KEY not in json.dumps(fake_provider.requests[0])
    assert [value for name, value in headers.items() if KEY in value and name != "authorization"] == []


def test_the_provider_object_does_not_keep_the_key():
    """Only the client's default headers hold it (SEC-1): a dump of the provider shows no key."""
    provider = make_provider("https://llm.example/v1")

    assert KEY not in repr(vars(provider))


async def test_usage_is_estimated_when_the_provider_reports_none(fake_provider: FakeProvider, provider: Provider):
    fake_provider.script(Turn.text("x" * 400, usage=None))

    *_, completed = await run(provider)

    prompt_chars = len(json.dumps([MESSAGES, TOOLS], ensure_ascii=False))
    assert completed.usage == Usage(input_tokens=-(-prompt_chars // 4), output_tokens=100)


async def test_tool_calls_are_billed_by_their_characters_when_the_provider_reports_no_usage(
    fake_provider: FakeProvider, provider: Provider
):
    arguments = {"id": "665f1c2e9b1e8a0012345678", "priority": "high"}
    fake_provider.script(Turn.tool_calls(("update_work_order", arguments), usage=None))

    (completed,) = await run(provider)

    produced = len("update_work_order") + len(json.dumps(arguments))
    assert completed.usage.output_tokens == -(-produced // 4)


async def test_tool_calls_come_out_in_index_order_whatever_order_they_arrived_in(
    fake_provider: FakeProvider, provider: Provider
):
    fake_provider.script(
        Turn.chunks(
            tool_piece(1, id="call_b", name="update_work_order", arguments="{}"),
            tool_piece(0, id="call_a", name="list_my_work_orders", arguments="{}"),
            choice(finish="tool_calls"),
        )
    )

    (completed,) = await run(provider)

    assert [call.id for call in completed.tool_calls] == ["call_a", "call_b"]


async def test_tool_calls_sent_without_an_id_each_get_a_distinct_one(fake_provider: FakeProvider, provider: Provider):
    fake_provider.script(
        Turn.chunks(
            tool_piece(0, name="list_my_work_orders", arguments="{}"),
            tool_piece(1, name="list_my_work_orders", arguments="{}"),
            choice(finish="tool_calls"),
        )
    )

    (completed,) = await run(provider)

    ids = [call.id for call in completed.tool_calls]
    assert len(ids) == 2 and all(ids) and ids[0] != ids[1]


async def test_a_tool_call_keeps_the_first_name_and_id_it_was_sent_whatever_later_pieces_say(
    fake_provider: FakeProvider, provider: Provider
):
    fake_provider.script(
        Turn.chunks(
            tool_piece(0, id="call_a", name="list_my_work_orders"),
            tool_piece(0, id="call_b", name="update_work_order", arguments="{}"),
            choice(finish="tool_calls"),
        )
    )

    (completed,) = await run(provider)

    assert completed.tool_calls == [ToolCallRequest(id="call_a", name="list_my_work_orders", arguments="{}")]


async def test_a_later_chunk_without_a_finish_reason_does_not_erase_it(fake_provider: FakeProvider, provider: Provider):
    fake_provider.script(Turn.chunks(choice({"content": "Cut at the cap."}, finish="length"), choice()))

    *_, completed = await run(provider)

    assert completed.finish_reason == "length"


async def test_a_finish_reason_without_done_still_completes(fake_provider: FakeProvider, provider: Provider):
    chunk = {"choices": [{"index": 0, "delta": {"content": "Done."}, "finish_reason": "stop"}]}
    fake_provider.script(Turn.chunks(chunk, done=False))

    events = await run(provider)

    assert events == [TextDelta("Done."), Completed([], events[-1].usage, "stop", text="Done.")]


async def test_consecutive_calls_reuse_one_connection(fake_provider: FakeProvider, provider: Provider):
    """The body is read to its end after [DONE]: the next call pays no new TCP (and TLS) handshake."""
    fake_provider.script(Turn.text("One."), Turn.tool_calls(("list_my_work_orders", {})), Turn.text("Three."))

    for _ in range(3):
        await run(provider)

    assert len(fake_provider.peers) == 3 and len(set(fake_provider.peers)) == 1


async def test_a_provider_that_talks_on_after_done_is_cut_off_not_waited_for(
    fake_provider: FakeProvider, provider: Provider
):
    chatty = Turn(frames=(*Turn.text("Done.", chunks=1).frames, *[b": still here\n\n"] * 60), delay=0.05)
    fake_provider.script(chatty)
    started = time.monotonic()

    *_, completed = await run(provider)

    assert isinstance(completed, Completed) and time.monotonic() - started < 2  # the whole body takes 3.25 s


async def test_what_follows_done_in_the_same_read_is_not_streamed(fake_provider: FakeProvider, provider: Provider):
    answer = Turn.text("Done.", chunks=1).frames[:-1]
    after = b'data: [DONE]\n\ndata: {"choices": [{"delta": {"content": " And more."}}]}\n\n'
    fake_provider.script(Turn(frames=(*answer, after)))

    *deltas, completed = await run(provider)

    assert "".join(delta.text for delta in deltas) == "Done."
    assert isinstance(completed, Completed)


async def test_sse_fields_other_than_data_are_ignored_even_when_their_name_starts_with_data(
    fake_provider: FakeProvider, provider: Provider
):
    fields = b"event: completion\nid: 7\nretry: 3000\ndataset: default\n"
    frames = Turn.text("Fine.", chunks=1).frames
    fake_provider.script(Turn(frames=tuple(fields + frame for frame in frames)))

    *deltas, completed = await run(provider)

    assert "".join(delta.text for delta in deltas) == "Fine."
    assert completed.finish_reason == "stop"


# --- every failure is one generic AIUnavailable that leaks nothing and still bills ---

# We ask for identity encoding and read raw bytes, so a body compressed regardless fails instead of inflating.
# mtime=10 puts a newline in the gzip header, so the bytes before it always make a line that is not UTF-8.
GZIPPED = gzip.compress(b"".join(Turn.text("A whole answer, compressed anyway.").frames), mtime=10)
USAGE_ONLY = {"choices": []}
FAILURES = {  # the turn, the provider's options, the kind of failure it is logged as
    "malformed-chunk": (Turn.malformed(), {}, "malformed"),
    "http-500": (Turn.error(500), {}, "status 500"),
    "http-429": (Turn.error(429), {}, "status 429"),
    "http-400-with-a-stream-body": (replace(Turn.text(), status=400), {}, "status 400"),
    "redirect": (Turn.redirect(), {}, "redirect"),
    "oversized": (Turn.oversized(200_000), {"max_response_bytes": 50_000}, "oversize"),
    "read-timeout": (Turn.slow(delay=1.0), {"read_timeout": 0.2}, "ReadTimeout"),
    "disconnect": (Turn.disconnect(), {}, "RemoteProtocolError"),
    "truncated": (Turn.truncated(), {}, "truncated"),
    "error-chunk": (Turn.chunks({"error": {"message": f"overloaded {FAKE_SECRET}"}}), {}, "provider_error"),
    "non-utf8": (Turn(frames=(b"data: \xff\xfe\n\n",)), {}, "malformed"),
    "compressed-anyway": (Turn(frames=(GZIPPED,), headers=(("content-encoding", "gzip"),)), {}, "malformed"),
    "tool-call-without-name": (Turn.chunks(tool_piece(0, id="c")), {}, "malformed"),
    "negative-tool-call-index": (Turn.chunks(tool_piece(-1, id="c", name="list_my_work_orders")), {}, "malformed"),
    "negative-usage": (
        Turn.chunks(USAGE_ONLY | {"usage": {"prompt_tokens": -5000, "completion_tokens": 10}}),
        {},
        "malformed",
    ),
    "usage-as-text": (
        Turn.chunks(USAGE_ONLY | {"usage": {"prompt_tokens": "120", "completion_tokens": "30"}}),
        {},
        "malformed",
    ),
}


@pytest.mark.parametrize(("turn", "overrides", "kind"), FAILURES.values(), ids=FAILURES.keys())
async def test_a_failed_call_raises_ai_unavailable_without_leaking_anything(
    fake_provider: FakeProvider, caplog: pytest.LogCaptureFixture, turn: Turn, overrides: dict[str, Any], kind: str
):
    caplog.set_level(logging.DEBUG)
    fake_provider.script(turn, Turn.text("a redirect must not be followed here"))
    provider = make_provider(fake_provider.url, **overrides)
    try:
        with pytest.raises(AIUnavailable) as caught:
            await run(provider)
    finally:
        await provider.aclose()

    error = caught.value
    assert error.kind == kind
    assert f"AI provider call failed: {kind} " in caplog.text
    assert error.code == ErrorCode.AI_UNAVAILABLE
    assert error.status == 503
    assert error.message == str(error) == AIUnavailable.default_message
    assert error.__cause__ is None
    assert error.usage.input_tokens > 0
    assert len(fake_provider.requests) == 1  # never retried, never redirected
    assert "AI provider call failed" in caplog.text
    assert "fake-model" in caplog.text
    for leak in (KEY, "boiler room", FAKE_SECRET):
        assert leak not in str(error)
        assert leak not in repr(error.envelope())
        assert leak not in caplog.text


# An outage pauses the agents; a refusal is given up at once (issue 41): which failures pass.
TRANSIENT = {"http-500", "http-429", "read-timeout", "disconnect", "truncated", "error-chunk"}


@pytest.mark.parametrize(("turn", "overrides", "kind"), FAILURES.values(), ids=FAILURES.keys())
async def test_outages_timeouts_and_cut_streams_are_transient_and_refusals_permanent(
    fake_provider: FakeProvider, provider_with: Callable[..., Provider], request, turn, overrides, kind
):
    fake_provider.script(turn, Turn.text("a redirect must not be followed here"))

    with pytest.raises(AIUnavailable) as caught:
        await run(provider_with(**overrides))

    assert caught.value.transient is (request.node.callspec.id in TRANSIENT)
    assert caught.value.retry_after is None  # none was sent


@pytest.mark.parametrize(
    ("status", "transient"),
    [(408, True), (429, True), (502, True), (503, True), (504, True), (400, False), (401, False), (404, False)],
)
async def test_408_429_and_5xx_pass_and_other_4xx_do_not(
    fake_provider: FakeProvider, provider: Provider, status, transient
):
    fake_provider.script(Turn.error(status))

    with pytest.raises(AIUnavailable) as caught:
        await run(provider)

    assert caught.value.kind == f"status {status}"
    assert caught.value.transient is transient


@pytest.mark.parametrize(
    ("header", "seconds"),
    [("6", 6.0), ("1.5", 1.5), ("0", 0.0), ("86400", 3600.0), ("soon", None), ("-3", None)],
)
async def test_retry_after_in_seconds_is_carried_within_an_hour(
    fake_provider: FakeProvider, provider: Provider, header, seconds
):
    fake_provider.script(
        replace(Turn.error(429), headers=(("content-type", "application/json"), ("retry-after", header)))
    )

    with pytest.raises(AIUnavailable) as caught:
        await run(provider)

    assert caught.value.retry_after == seconds


async def test_retry_after_as_an_http_date_is_the_seconds_until_then(fake_provider: FakeProvider, provider: Provider):
    then = email.utils.format_datetime(datetime.now(UTC) + timedelta(seconds=40), usegmt=True)
    fake_provider.script(replace(Turn.error(503), headers=(("retry-after", then),)))

    with pytest.raises(AIUnavailable) as caught:
        await run(provider)

    assert caught.value.transient is True
    assert 37 <= caught.value.retry_after <= 40  # whole seconds in the header, and the call's own time


def test_a_retry_after_date_already_past_asks_for_no_wait():
    now = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)
    assert faults.retry_after("Mon, 07 Dec 2026 11:59:00 GMT", now=now) == 0.0
    assert faults.retry_after("Mon, 07 Dec 2026 12:00:30 GMT", now=now) == 30.0
    assert faults.retry_after(None, now=now) is None


async def test_a_provider_that_keeps_dripping_is_cut_off_at_the_total_timeout(
    fake_provider: FakeProvider, provider_with: Callable[..., Provider]
):
    fake_provider.script(Turn.slow(delay=0.1, chunks=20))  # 2.4 s in all, never silent for long
    provider = provider_with(total_timeout=0.3, read_timeout=1.0)
    started = time.monotonic()

    with pytest.raises(AIUnavailable) as caught:
        await run(provider)

    assert caught.value.kind == "deadline"
    assert time.monotonic() - started < 1.2
    assert await fake_provider.wait_for_disconnect()


async def test_the_byte_cap_admits_a_body_of_exactly_its_size_and_not_one_byte_more(
    fake_provider: FakeProvider, provider_with: Callable[..., Provider]
):
    turn = Turn.text("Exactly as long as allowed.")
    size = sum(map(len, turn.frames))
    fake_provider.script(turn, turn)

    *_, completed = await run(provider_with(max_response_bytes=size))
    with pytest.raises(AIUnavailable) as caught:
        await run(provider_with(max_response_bytes=size - 1))

    assert isinstance(completed, Completed)
    assert caught.value.kind == "oversize"


async def test_bytes_sent_after_done_count_against_the_cap_and_past_it_the_connection_is_dropped(
    fake_provider: FakeProvider, provider_with: Callable[..., Provider]
):
    answer = Turn.text("Done.", chunks=1).frames
    padding = (b": " + b"x" * 1000 + b"\n\n",) * 20
    fake_provider.script(Turn(frames=(*answer, *padding)), Turn.text("Next."))
    provider = provider_with(max_response_bytes=sum(map(len, answer)) + 5000)

    *_, first = await run(provider)
    *_, second = await run(provider)

    assert isinstance(first, Completed) and isinstance(second, Completed)  # the answer was whole before the cap
    assert len(set(fake_provider.peers)) == 2  # the first body was not read to its end: a new connection


async def test_logs_name_the_base_url_with_its_port_but_without_credentials_or_query(
    fake_provider: FakeProvider, caplog: pytest.LogCaptureFixture
):
    caplog.set_level(logging.DEBUG, logger=Provider.__module__)
    fake_provider.script(Turn.text(), Turn.error(500))
    host = fake_provider.url.removeprefix("http://")  # 127.0.0.1:PORT/v1
    provider = make_provider(f"http://desk:userinfo-secret@{host}?token=query-secret")

    await run(provider)
    with pytest.raises(AIUnavailable):
        await run(provider)
    await provider.aclose()

    logged = [record.getMessage() for record in caplog.records if record.name == Provider.__module__]
    assert len(logged) == 2
    assert all(f"baseUrl=http://{host}," in line for line in logged)
    assert not [line for line in logged if "secret" in line]


async def test_a_failure_after_some_output_bills_that_output_too(fake_provider: FakeProvider, provider: Provider):
    fake_provider.script(Turn.disconnect("x" * 80))

    with pytest.raises(AIUnavailable) as caught:
        await run(provider)

    assert caught.value.usage.output_tokens == 20


async def test_an_unreachable_provider_is_unavailable(caplog: pytest.LogCaptureFixture):
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    provider = make_provider(f"http://127.0.0.1:{port}/v1", connect_timeout=1.0)

    with pytest.raises(AIUnavailable) as caught:
        await run(provider)
    await provider.aclose()

    assert caught.value.kind == "ConnectError"
    assert caught.value.transient is True  # nobody answered: it may come back
    assert caught.value.reached is False and caught.value.usage.input_tokens == 0  # never reached: costs nothing
    assert KEY not in caplog.text


async def test_a_call_with_no_turn_scripted_fails_loudly(fake_provider: FakeProvider, provider: Provider):
    with pytest.raises(AIUnavailable):
        await run(provider)

    assert fake_provider.unscripted == 1
    fake_provider.unscripted = 0  # meant: let the fixture's teardown pass


# --- stopping early aborts the upstream call ---


async def test_cancelling_the_consumer_closes_the_upstream_connection(fake_provider: FakeProvider, provider: Provider):
    fake_provider.script(Turn.slow(delay=0.05, chunks=20))
    first = asyncio.Event()

    async def consume() -> None:
        async with aclosing(provider.stream(MESSAGES, TOOLS)) as events:
            async for _ in events:
                first.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(first.wait(), 2)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    assert await fake_provider.wait_for_disconnect()


async def test_closing_the_stream_early_closes_the_upstream_connection(fake_provider: FakeProvider, provider: Provider):
    fake_provider.script(Turn.slow(delay=0.05, chunks=20))

    async with aclosing(provider.stream(MESSAGES, TOOLS)) as events:
        async for event in events:
            assert isinstance(event, TextDelta)
            break

    assert await fake_provider.wait_for_disconnect()


# --- configuration and money ---


def test_cost_uses_the_per_million_prices():
    provider = make_provider("https://llm.example/v1", price_in=0.15, price_out=0.60)

    assert provider.cost(Usage(1_000_000, 1_000_000)) == pytest.approx(0.75)
    assert provider.cost(Usage(120, 30)) == pytest.approx(120 * 0.15e-6 + 30 * 0.60e-6)
    assert provider.cost(Usage(0, 0)) == 0


async def test_from_settings_uses_the_ai_keys(fake_provider: FakeProvider):
    settings = Settings(
        ai_enabled=False,
        ai_base_url=fake_provider.url,
        ai_allow_private_base_url=True,  # the fake is on loopback: every connection is checked (SEC-2)
        ai_api_key=KEY,
        ai_model="m-1",
        ai_max_output_tokens=64,
        ai_price_per_1m_input=2,
    )
    provider = Provider.from_settings(settings)
    fake_provider.script(Turn.text())

    await run(provider)
    await provider.aclose()

    assert fake_provider.requests[0]["model"] == "m-1"
    assert fake_provider.requests[0]["max_tokens"] == 64
    assert fake_provider.headers[0]["authorization"] == f"Bearer {KEY}"
    assert provider.cost(Usage(1_000_000, 0)) == pytest.approx(2)


async def test_from_settings_takes_the_provider_timeouts(fake_provider: FakeProvider):
    settings = Settings(
        ai_enabled=False,
        ai_base_url=fake_provider.url,
        ai_allow_private_base_url=True,
        ai_api_key=KEY,
        ai_timeout_connect_s=0.5,
        ai_timeout_read_s=0.2,  # a silence longer than this fails the call
        ai_timeout_total_s=0.6,
    )
    provider = Provider.from_settings(settings)
    fake_provider.script(Turn.slow(delay=0.5, chunks=2), Turn.slow(delay=0.1, chunks=20))

    try:
        with pytest.raises(AIUnavailable) as silent:
            await run(provider)
        with pytest.raises(AIUnavailable) as dripping:
            await run(provider)
    finally:
        await provider.aclose()

    assert (silent.value.kind, silent.value.transient) == ("ReadTimeout", True)
    assert (dripping.value.kind, dripping.value.transient) == ("deadline", True)


@pytest.mark.parametrize("base_url", [None, "https://llm.example/v1"], ids=["nothing", "a-url-but-no-key"])
def test_from_settings_without_ai_config_is_unavailable(base_url: str | None):
    with pytest.raises(AIUnavailable) as caught:
        Provider.from_settings(Settings(ai_enabled=False, ai_base_url=base_url, ai_api_key=None))

    assert caught.value.kind == "not_configured"
