"""Agent-test fixtures: quick approval polls, turn starters and approvals, a live server for streams.

AI settings and the fake provider are in tests/conftest.py.
"""

import asyncio
import socket
from collections.abc import AsyncIterator, Awaitable, Callable

import httpx
import pytest
import uvicorn

from desk.agent.copilot import approvals, staging
from desk.agent.copilot.sessions import current_session
from desk.agent.copilot.start import begin as begin_turn
from desk.agent.core.events import RunEvent
from desk.config import Settings
from tests.agent.log_watch import no_sent_text_in_logs  # noqa: F401 - autouse: SEC-1 over the injection suite
from tests.helpers import actor, session_clients, until

Decider = Callable[[RunEvent], Awaitable[None]]


@pytest.fixture(autouse=True)
def quick_polls(monkeypatch):
    """A run waiting for a decision it was not woken for looks every 10 ms instead of every second (speed only)."""
    monkeypatch.setattr(staging, "WAKE_SECONDS", 0.01)


@pytest.fixture
def start(db, ai_settings, provider, clock):
    """Begin one copilot turn for a person (optionally with other settings) on the test's clock; not started yet."""

    async def begin(person: dict, content: str = "Help me", *, settings: Settings | None = None, ip: str = "127.0.0.1"):
        chosen = settings or ai_settings
        session = await current_session(db=db, settings=chosen, actor=actor(person))
        return await begin_turn(
            db=db,
            settings=chosen,
            provider=provider,
            actor=actor(person),
            session_id=session.id,
            content=content,
            ip=ip,
        )

    return begin


@pytest.fixture
def copilot(start):
    """Run one copilot turn for a person and collect its events; `decide` answers each approval request."""

    async def turn(
        person: dict, content: str, *, decide: Decider | None = None, ip: str = "127.0.0.1"
    ) -> list[RunEvent]:
        started = await start(person, content, ip=ip)
        events, pending = [], set()
        async for event in started.events():
            events.append(event)
            if event.kind == "tool_approval_required" and decide is not None:
                pending.add(asyncio.create_task(decide(event)))
        await asyncio.gather(*pending)
        return events

    return turn


@pytest.fixture
def approve(db) -> Callable[[dict], Decider]:
    """A decider that approves as `person`."""

    def for_person(person: dict, *, reason: str | None = None, approve: bool = True) -> Decider:
        async def decide(event: RunEvent) -> None:
            await approvals.decide(
                db=db, actor=actor(person), tool_call_id=event.tool_call_id, approve=approve, reason=reason
            )

        return decide

    return for_person


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
    async with session_clients(db, lambda: httpx.AsyncClient(base_url=live, timeout=10)) as login:
        yield login
