"""Fixtures for the agent tests: the scripted fake provider on loopback, AI settings, a copilot driver."""

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from desk.agent import approvals, runtime
from desk.agent.api import use_provider
from desk.agent.events import RunEvent
from desk.agent.provider import Provider
from desk.agent.sessions import current_session
from desk.config import Settings, use_settings
from tests.agent.fake_provider import fake_provider  # noqa: F401 - registers the fixture for tests/agent/
from tests.helpers import actor

API_KEY = "sk-test-key-never-logged"


@pytest.fixture
def ai_settings(settings: Settings, fake_provider) -> Settings:  # noqa: F811
    """AI on, pointed at the fake provider on loopback (a private address, so explicitly allowed)."""
    enabled = Settings(
        desk_login_attempts_per_minute=settings.desk_login_attempts_per_minute,
        ai_enabled=True,
        ai_base_url=fake_provider.url,
        ai_api_key=API_KEY,
        ai_allow_private_base_url=True,
    )
    use_settings(enabled)
    return enabled


@pytest.fixture
async def provider(ai_settings: Settings):
    """The real provider adapter talking to the fake over HTTP; also what the API routes use."""
    adapter = Provider.from_settings(ai_settings)
    use_provider(adapter)
    yield adapter
    use_provider(None)
    await adapter.aclose()


Decider = Callable[[RunEvent], Awaitable[None]]


@pytest.fixture
def copilot(db, ai_settings: Settings, provider: Provider):
    """Run one copilot turn for a person and collect its events; `decide` answers each approval request."""

    async def turn(
        person: dict, content: str, *, decide: Decider | None = None, ip: str = "127.0.0.1"
    ) -> list[RunEvent]:
        session = await current_session(db=db, settings=ai_settings, actor=actor(person))
        started = await runtime.begin(
            db=db,
            settings=ai_settings,
            provider=provider,
            actor=actor(person),
            session_id=session.id,
            content=content,
            ip=ip,
        )
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
