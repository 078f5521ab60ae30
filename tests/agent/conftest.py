"""Agent-test fixtures: a copilot driver and approvals (AI settings, the fake provider: tests/conftest.py)."""

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from desk.agent import approvals, start
from desk.agent.events import RunEvent
from desk.agent.provider import Provider
from desk.agent.sessions import current_session
from desk.config import Settings
from tests.helpers import actor

Decider = Callable[[RunEvent], Awaitable[None]]


@pytest.fixture
def copilot(db, ai_settings: Settings, provider: Provider):
    """Run one copilot turn for a person and collect its events; `decide` answers each approval request."""

    async def turn(
        person: dict, content: str, *, decide: Decider | None = None, ip: str = "127.0.0.1"
    ) -> list[RunEvent]:
        session = await current_session(db=db, settings=ai_settings, actor=actor(person))
        started = await start.begin(
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
