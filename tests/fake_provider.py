"""A scripted fake OpenAI-compatible provider on loopback: the one fake in the suite (STYLE.md).

A real HTTP server (uvicorn in a background thread, on a free 127.0.0.1 port, started once per
test run) answers `POST /v1/chat/completions` with the turns a test queued, streamed as
server-sent events the way OpenAI-compatible providers stream them, including the broken ways.

    async def test_hello(fake_provider):
        fake_provider.script(
            Turn.tool_calls(("list_my_work_orders", {})),
            Turn.text("You have 3 open work orders.", chunks=3, usage=(120, 30)),
        )
        provider = Provider(base_url=fake_provider.url, api_key="k", model="m", ...)
        ...
        assert fake_provider.requests[0]["max_tokens"] == 2048

The `fake_provider` fixture is registered for the whole suite by tests/conftest.py;
elsewhere import it into the test module or a conftest:

    from tests.fake_provider import Turn, fake_provider  # noqa: F401

Calls that arrive in no set order (an eval's, several at once) are answered by the request itself:
`fake_provider.respond = lambda request: Turn.text(...)` once the queued turns are used up.

Each test gets the fake emptied. A call that arrives with no turn queued is answered with HTTP 500
and fails the test at teardown (so a forgotten `script` is loud); a test that means it sets
`fake_provider.unscripted = 0`.

The benches serve the same fake in a process of its own (bench.harness.serve), built with the one
turn it gives every call and without keeping the calls: `FakeProvider(always=Turn.text(...), remember=False)`.
"""

import asyncio
import atexit
import contextlib
import json
import logging
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

import pytest
import uvicorn

from bench.harness import read_body

# Planted in error bodies: it must never reach an error message or a log line.
FAKE_SECRET = "provider-body-secret-5b1e"
ToolCall = tuple[str, dict[str, Any] | str] | tuple[str, dict[str, Any] | str, str]  # (name, args[, id])


@dataclass(frozen=True)
class Turn:
    """One scripted answer: a status, the SSE frames to send, and how the response ends."""

    frames: tuple[bytes, ...] = ()
    status: int = 200
    headers: tuple[tuple[str, str], ...] = (("content-type", "text/event-stream"),)
    body: bytes = b""  # the whole body of an answer that is not a stream (errors)
    delay: float = 0.0  # seconds to wait before each frame
    hang_up: bool = False  # drop the connection after the frames instead of ending the response
    until: threading.Event | None = None  # the answer waits for the test to set it (the server runs in a thread)

    @classmethod
    def text(
        cls, text: str = "Hello", *, chunks: int = 3, usage: tuple[int, int] | None = (100, 10), finish: str = "stop"
    ) -> "Turn":
        """Plain text in `chunks` pieces, then `finish_reason`, then usage (None: none sent), then [DONE]."""
        pieces = [_chunk({"content": piece}) for piece in _split(text, chunks)]
        return cls.chunks(_chunk({"role": "assistant", "content": ""}), *pieces, _chunk({}, finish), *_usage(usage))

    @classmethod
    def tool_calls(
        cls,
        *calls: ToolCall,
        text: str = "",
        pieces: int = 3,
        interleaved: bool = False,
        usage: tuple[int, int] | None = (100, 10),
    ) -> "Turn":
        """Tool calls (parallel when several) with each call's arguments split into `pieces` chunks.

        `args` is a dict (JSON-encoded here) or a raw string (sent as is, e.g. broken JSON). Any name
        works, which is how a test plays an unknown tool. `interleaved` sends the pieces round-robin.
        """
        per_call = []
        for index, (name, args, *given_id) in enumerate(calls):
            call_id = given_id[0] if given_id else f"call_fake_{index}"
            raw = args if isinstance(args, str) else json.dumps(args)
            head = {"index": index, "id": call_id, "type": "function", "function": {"name": name, "arguments": ""}}
            tail = [{"index": index, "function": {"arguments": piece}} for piece in _split(raw, pieces)]
            per_call.append([head, *tail])
        order = _round_robin(per_call) if interleaved else [delta for deltas in per_call for delta in deltas]
        lead = [_chunk({"content": piece}) for piece in _split(text, 2)]
        deltas = [_chunk({"tool_calls": [delta]}) for delta in order]
        return cls.chunks(*lead, *deltas, _chunk({}, "tool_calls"), *_usage(usage))

    @classmethod
    def chunks(cls, *chunks: dict[str, Any] | str, done: bool = True) -> "Turn":
        """Any frames: a dict is sent as one JSON `data:` line, a string as the raw data text."""
        payloads = [*chunks, "[DONE]"] if done else list(chunks)
        return cls(frames=tuple(_frame(payload) for payload in payloads))

    @classmethod
    def malformed(cls, text: str = "Let me look") -> "Turn":
        """Some good text, then a chunk that is not JSON, then [DONE]."""
        return cls.chunks(_chunk({"content": text}), '{"choices": [{"delta": {"content": "unterminated')

    @classmethod
    def slow(cls, text: str = "Thinking it over slowly", *, delay: float = 0.5, chunks: int = 8) -> "Turn":
        """A text turn that waits `delay` seconds before each frame (timeouts, cancellation)."""
        return cls.text(text, chunks=chunks).with_delay(delay)

    @classmethod
    def disconnect(cls, text: str = "Here is the partial") -> "Turn":
        """Some text, then the connection is dropped mid-body."""
        return replace(cls.chunks(*[_chunk({"content": piece}) for piece in _split(text, 2)], done=False), hang_up=True)

    @classmethod
    def truncated(cls, text: str = "Cut short") -> "Turn":
        """Some text, then a clean end of body with neither a finish_reason nor [DONE]."""
        return cls.chunks(_chunk({"content": text}), done=False)

    @classmethod
    def error(cls, status: int = 500, body: str | None = None) -> "Turn":
        """An HTTP error whose body (by default) carries FAKE_SECRET and echoes a prompt-like text."""
        body = body or json.dumps({"error": {"message": f"upstream failed: {FAKE_SECRET}", "prompt": "echoed"}})
        return cls(status=status, headers=(("content-type", "application/json"),), body=body.encode())

    @classmethod
    def redirect(cls, location: str = "/v1/chat/completions", status: int = 307) -> "Turn":
        """A redirect (to this same endpoint by default: following it would consume the next turn)."""
        return cls(status=status, headers=(("location", location),))

    @classmethod
    def oversized(cls, size: int = 3_000_000, *, chunk_size: int = 64_000) -> "Turn":
        """A valid text stream of at least `size` bytes."""
        chunks = [_chunk({"content": "x" * chunk_size}) for _ in range(size // chunk_size + 1)]
        return cls.chunks(*chunks, _chunk({}, "stop"))

    @classmethod
    def read_then_update(cls, order_id: str, **fields: Any) -> tuple["Turn", "Turn"]:
        """The model's usual two steps before a change: list the person's orders, then propose the update."""
        return cls.tool_calls(("list_my_work_orders", {})), cls.tool_calls(
            ("update_work_order", {"id": order_id, **fields})
        )

    def with_delay(self, delay: float) -> "Turn":
        return replace(self, delay=delay)

    def held_until(self, event: threading.Event) -> "Turn":
        """The answer starts once the test sets `event`: what the test does meanwhile, however slow the machine,
        happens while the call is in flight (a delay is a race the test loses under load)."""
        return replace(self, until=event)

    def at_once(self) -> "Turn":
        """The same answer in one write (after one `delay`): a provider that answers in one piece."""
        return replace(self, frames=(b"".join(self.frames),))


class FakeProvider:
    """The server's state, shared with the test: the queued turns and what was received.

    `always` answers every call once the queue is empty (a bench's provider never runs out); with
    `remember` False the calls are not kept (a bench's fake would only pile them up).
    """

    def __init__(self, *, always: Turn | None = None, remember: bool = True) -> None:
        self.always, self.remember = always, remember
        self.url = ""  # http://127.0.0.1:PORT/v1, set once the server listens
        self.requests: list[Any] = []  # JSON bodies, in arrival order
        self.headers: list[dict[str, str]] = []  # request headers (lower-case names), same order
        self.peers: list[tuple[str, int]] = []  # the client's address and port: one port, one connection
        self.respond: Callable[[Any], Turn] | None = None  # answers from the request itself once the queue is empty
        self.unscripted = 0  # calls that found no turn queued
        self.client_disconnects = 0  # streams the client closed before the turn finished
        self.in_flight = self.most_in_flight = 0  # calls being answered now, and the most there were at once
        self._turns: deque[Turn] = deque()
        self._generation = 0  # a stream still winding down from an earlier test records nothing

    def script(self, *turns: Turn) -> None:
        """Queue the model's next turns, one per call."""
        self._turns.extend(turns)

    def reset(self) -> None:
        self._generation += 1
        self._turns.clear()
        self.respond = None
        self.requests.clear()
        self.headers.clear()
        self.peers.clear()
        self.unscripted = self.client_disconnects = 0
        self.in_flight = self.most_in_flight = 0

    async def wait_for_request(self, within: float = 2.0) -> bool:
        """True once a request has arrived (waits up to `within` seconds)."""
        return await _within(lambda: bool(self.requests), within)

    async def wait_for_disconnect(self, within: float = 2.0) -> bool:
        """True once the server has seen a client close a stream early (waits up to `within` seconds)."""
        return await _within(lambda: bool(self.client_disconnects), within)

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        """The ASGI app, run on the server's thread (or as a bench's own process)."""
        if scope["type"] != "http":
            return  # uvicorn's lifespan messages, when a bench serves the fake on its own
        generation = self._generation
        body = await read_body(receive)
        if self.remember:
            self.requests.append(json.loads(body) if body else None)
            self.headers.append({name.decode().lower(): value.decode() for name, value in scope["headers"]})
            self.peers.append(tuple(scope["client"]))
        if self._turns:
            turn = self._turns.popleft()
        elif self.respond is not None:
            turn = self.respond(json.loads(body))
        elif self.always is not None:
            turn = self.always
        else:
            self.unscripted += 1
            turn = Turn(status=500, body=b'{"error": {"message": "the fake provider has no turn scripted"}}')
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            if not await _play(turn, receive, send) and generation == self._generation:
                self.client_disconnects += 1
        finally:
            self.in_flight -= 1


async def _within(seen: Callable[[], bool], within: float) -> bool:
    """Poll `seen` until it holds or `within` seconds passed; its last answer."""
    deadline = time.monotonic() + within
    while not seen() and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    return seen()


async def _play(turn: Turn, receive: Any, send: Any) -> bool:
    """Send `turn`; False if the client went away first."""
    gone = asyncio.Event()

    async def watch() -> None:  # uvicorn answers `receive` with http.disconnect when the client leaves
        while (await receive())["type"] != "http.disconnect":
            pass
        gone.set()

    watcher = asyncio.create_task(watch())
    try:
        headers = [(name.encode(), value.encode()) for name, value in turn.headers]
        await send({"type": "http.response.start", "status": turn.status, "headers": headers})
        while turn.until is not None and not turn.until.is_set() and not gone.is_set():
            await asyncio.sleep(0.01)
        for frame in turn.frames:
            if turn.delay:
                with contextlib.suppress(TimeoutError):  # the delay ends early if the client leaves
                    await asyncio.wait_for(gone.wait(), turn.delay)
            if gone.is_set():
                return False
            await send({"type": "http.response.body", "body": frame, "more_body": True})
            await asyncio.sleep(0)  # let the watcher notice a client that has left
        if turn.hang_up:
            raise _HangUp  # uvicorn closes the connection mid-body
        await send({"type": "http.response.body", "body": turn.body, "more_body": False})
        return True
    finally:
        watcher.cancel()


class _HangUp(Exception):
    pass


class _QuietHangUps(logging.Filter):
    """uvicorn logs an app exception as an error; a scripted hang-up is not one."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and record.exc_info[0] is _HangUp)


class _Server:
    def __init__(self) -> None:
        self.fake = FakeProvider()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        self.fake.url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
        logging.getLogger("uvicorn.error").addFilter(_QuietHangUps())
        config = uvicorn.Config(
            self.fake, lifespan="off", access_log=False, log_config=None, timeout_graceful_shutdown=1
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, name="fake-provider", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the fake provider did not start")
            time.sleep(0.01)

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=5)


_server: _Server | None = None


def _shared_fake() -> FakeProvider:
    """One server for the whole run, started on first use (so importing one fixture is enough)."""
    global _server  # noqa: PLW0603 - one loopback server per test process
    if _server is None:
        _server = _Server()
        atexit.register(_server.stop)
    return _server.fake


@pytest.fixture
def fake_provider() -> Iterator[FakeProvider]:
    """The fake provider, emptied for this test."""
    fake = _shared_fake()
    fake.reset()
    yield fake
    if fake.unscripted:
        pytest.fail(f"the fake provider got {fake.unscripted} call(s) with no turn scripted")


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "model": "fake-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def _usage(usage: tuple[int, int] | None) -> list[dict[str, Any]]:
    """The final usage chunk (`stream_options.include_usage`): no choices, just the counts."""
    if usage is None:
        return []
    prompt, completion = usage
    counts = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
    return [{"id": "chatcmpl-fake", "object": "chat.completion.chunk", "choices": [], "usage": counts}]


def _frame(payload: dict[str, Any] | str) -> bytes:
    data = payload if isinstance(payload, str) else json.dumps(payload)
    return f"data: {data}\n\n".encode()


def _split(text: str, parts: int) -> list[str]:
    """`text` in up to `parts` non-empty, nearly equal pieces."""
    size = max(1, -(-len(text) // max(1, parts)))
    return [text[start : start + size] for start in range(0, len(text), size)]


def _round_robin(lists: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    out = []
    for row in range(max(map(len, lists), default=0)):
        out.extend(items[row] for items in lists if row < len(items))
    return out
