"""The worker's job table, run as arq runs its tests: burst mode, everything due once, then return."""

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta

import pytest
from bson import ObjectId
from pymongo.asynchronous.database import AsyncDatabase

from desk.config import Settings
from desk.worker import Context, Job, burst, serve


@pytest.fixture
def run_worker(db: AsyncDatabase, settings: Settings) -> Callable[[], Awaitable[None]]:
    """Run every job of the table once against the test database, as a worker would, and return."""
    return lambda: burst(Context(db=db, settings=settings))


async def test_a_burst_sweeps_a_run_its_dead_web_process_left_running(db, run_worker):
    dead = {"_id": ObjectId(), "status": "running", "leaseUntil": datetime.now(UTC) - timedelta(minutes=1)}
    await db["agent_runs"].insert_one(dead)

    await run_worker()

    after = await db["agent_runs"].find_one({"_id": dead["_id"]})
    assert (after["status"], after["errorCode"]) == ("error", "lease_expired")


async def test_a_failing_job_is_logged_by_name_and_the_others_go_on(db, mongo_uri, caplog):
    secret_text = "Leaking tap in the kitchen, call 555-0100"
    went_on = asyncio.Event()

    async def breaks(ctx: Context) -> None:
        raise RuntimeError(secret_text)  # a driver's message may quote a stored document

    async def counts(ctx: Context) -> None:
        went_on.set()

    jobs = [Job("breaks", breaks, lambda s: 3600), Job("counts", counts, lambda s: 3600)]
    stop = asyncio.Event()
    serving = asyncio.create_task(serve(Settings(mongodb_uri=mongo_uri, mongodb_db=db.name), stop=stop, jobs=jobs))
    try:
        await asyncio.wait_for(went_on.wait(), 5)
    finally:
        stop.set()
        await asyncio.wait_for(serving, 5)

    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    # the type and the place, for whoever looks into it; never the message
    assert len(errors) == 1 and re.fullmatch(
        r"worker job breaks failed \(RuntimeError at test_worker\.py:\d+ in breaks, from worker\.py:\d+ in once\)",
        errors[0],
    )
    assert secret_text not in caplog.text
