"""Triage fixtures: AI on against the scripted fake, the worker run in burst mode, scripted proposals."""

from collections.abc import Awaitable, Callable

import pytest

from desk.agent.triage import task as triage_task
from desk.clock import SYSTEM_CLOCK, Clock
from desk.config import Settings
from desk.jobs import backoff
from desk.jobs.table import Context
from desk.jobs.worker import Worker
from tests.fake_provider import Turn
from tests.helpers import reconfigure


def proposal(priority: str = "high", *, summary: str = "Water leaking under the kitchen sink.", flag: bool = False):
    """The model's answer: one `triage_propose` call."""
    args = {"summary": summary, "suggestedPriority": priority, "flagForDispatcher": flag}
    return Turn.tool_calls(("triage_propose", args))


@pytest.fixture(autouse=True)
def no_backoff_wait(monkeypatch):
    """Retries are due at once (the delay itself is tested on `backoff`)."""
    monkeypatch.setattr(backoff, "BASE_SECONDS", 0.0)


@pytest.fixture
def triage_settings(ai_settings: Settings) -> Settings:
    """AI on, leases short enough for tests that let one lapse."""
    return reconfigure(ai_settings, agent_lease_ms=3000, agent_max_attempts=3)


def triage_worker(settings: Settings, provider, *, clock: Clock = SYSTEM_CLOCK) -> Worker:
    """A worker with the triage task alone, its limits from `settings`, calling the scripted fake, on `clock`."""
    function = triage_task.task(settings, provider=provider, clock=clock)
    return Worker(functions=[function], clock=clock, **triage_task.limits(settings))


@pytest.fixture
def burst(db, triage_settings, provider) -> Callable[..., Awaitable[int]]:
    """Run the worker over everything due, as `desk worker` would, and return how many events it claimed.

    One worker for the test's settings, as a process has one: two bursts at once share its slots.
    """
    worker = triage_worker(triage_settings, provider)

    async def run(settings: Settings | None = None) -> int:
        settings = settings or triage_settings
        runs_on = worker if settings is triage_settings else triage_worker(settings, provider)
        return await runs_on.run_due(Context(db=db, settings=settings))

    return run
