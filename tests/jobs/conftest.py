"""The job queue's fixtures: a task made up in the test, workers on a clock the test moves, the real database."""

from collections.abc import Callable
from datetime import timedelta

import pytest
from bson import ObjectId

from desk.jobs import queue
from desk.jobs.table import Context, Function
from desk.jobs.worker import Worker
from tests.clock import ManualClock

TASK = "test.echo"
LEASE = timedelta(seconds=10)


@pytest.fixture
def ctx(db, settings) -> Context:
    return Context(db=db, settings=settings)


@pytest.fixture
def make_worker(clock: ManualClock) -> Callable[..., Worker]:
    """A worker for `functions` on the test's clock, in burst mode and with no poll delay (arq's test worker)."""

    def make(*functions: Function, owner: str = "w1", concurrency: int = 1) -> Worker:
        return Worker(functions=functions, concurrency=concurrency, poll_delay=0, burst=True, clock=clock, owner=owner)

    return make


@pytest.fixture
def enqueue(db, clock: ManualClock) -> Callable:
    """A job of the test's task (or `task`) about a new key, enqueued at the clock's time; returns its key."""

    async def make(task: str = TASK, *, key: ObjectId | None = None, **options) -> ObjectId:
        key = key or ObjectId()
        assert await queue.enqueue(db, task, key, at=clock.now(), **options)
        return key

    return make


async def job_of(db, key: ObjectId, task: str = TASK) -> dict:
    return await queue.find(db, task, key)
