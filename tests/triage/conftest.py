"""Triage fixtures: AI on against the scripted fake, the worker run in burst mode, scripted proposals."""

from collections.abc import Awaitable, Callable

import pytest

from desk.agent.triage import task as triage_task
from desk.config import Settings
from tests.fake_provider import Turn
from tests.helpers import reconfigure


def proposal(priority: str = "high", *, summary: str = "Water leaking under the kitchen sink.", flag: bool = False):
    """The model's answer: one `triage_propose` call."""
    args = {"summary": summary, "suggestedPriority": priority, "flagForDispatcher": flag}
    return Turn.tool_calls(("triage_propose", args))


@pytest.fixture(autouse=True)
def no_backoff_wait(monkeypatch):
    """Retries are due at once (the delay itself is tested on `backoff`)."""
    monkeypatch.setattr(triage_task, "BACKOFF_BASE_SECONDS", 0.0)


@pytest.fixture
def triage_settings(ai_settings: Settings) -> Settings:
    """AI on, leases short enough for tests that let one lapse."""
    return reconfigure(ai_settings, agent_lease_ms=3000, agent_max_attempts=3)


@pytest.fixture
def burst(db, triage_settings, provider) -> Callable[..., Awaitable[int]]:
    """Run the worker over everything due, as `scheduler.py` would, and return how many events it claimed."""

    async def run(settings: Settings | None = None) -> int:
        return await triage_task.process_due(db, settings or triage_settings, provider=provider)

    return run
