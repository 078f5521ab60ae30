"""The desk's worker table (desk/tasks.py), run as arq runs its tests: burst mode, everything due once, then return.

And its healthcheck, `desk worker --check`, against a real worker process.
"""

import asyncio
import logging
import re
import signal
import subprocess
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta

import pytest
from bson import ObjectId
from pymongo import MongoClient
from pymongo.asynchronous.database import AsyncDatabase

from bench.harness import desk_command, desk_env
from desk.config import Settings
from desk.db.embedded import EmbeddedMongo
from desk.heartbeat import worker_name
from desk.jobs.table import Context, CronJob
from desk.jobs.worker import Worker
from desk.tasks import worker


@pytest.fixture
def run_worker(db: AsyncDatabase, settings: Settings) -> Callable[[], Awaitable[None]]:
    """Run every job of the table once against the test database, as a worker would, and return."""
    return lambda: worker(settings, burst=True).work(Context(db=db, settings=settings))


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

    jobs = [CronJob("breaks", breaks, 3600), CronJob("counts", counts, 3600)]
    stop = asyncio.Event()
    serving = asyncio.create_task(
        Worker(cron_jobs=jobs).serve(Settings(mongodb_uri=mongo_uri, mongodb_db=db.name), stop=stop)
    )
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


def test_worker_check_answers_for_the_heartbeat_a_real_worker_writes(tmp_path):
    with EmbeddedMongo(tmp_path / "mongo") as uri, MongoClient(uri, tz_aware=True) as client:
        never_started = _check(uri)
        worker = subprocess.Popen(desk_command("worker"), env=desk_env(MONGODB_URI=uri, AI_ENABLED="false"))  # noqa: S603
        try:
            # watched in the database: each `desk worker --check` costs a process start (seconds of imports)
            deadline = time.monotonic() + 60
            while not client["desk"]["worker_heartbeats"].find_one({"_id": worker_name()}):
                assert time.monotonic() < deadline, "the worker never beat"
                time.sleep(0.1)
            beating = _check(uri)
        finally:
            worker.send_signal(signal.SIGTERM)
            worker.wait(timeout=30)
        an_hour_ago = datetime.now(UTC) - timedelta(hours=1)  # a worker that hangs or has died
        client["desk"]["worker_heartbeats"].update_one({"_id": worker_name()}, {"$set": {"at": an_hour_ago}})
        stale = _check(uri)
    without_a_database = _check(None)

    assert (never_started.returncode, never_started.stderr.count("\n")) == (1, 1)
    assert "no heartbeat in the database" in never_started.stderr
    assert beating.returncode == 0 and re.fullmatch(r"worker .+: last heartbeat \d+ s ago\n", beating.stdout)
    assert (stale.returncode, stale.stderr.count("\n")) == (1, 1)
    assert re.fullmatch(r"desk: worker .+: last heartbeat 360\d s ago \(stale after 60 s\)\n", stale.stderr)
    assert without_a_database.returncode == 1 and without_a_database.stderr.startswith("desk: MONGODB_URI: ")


def test_worker_check_on_a_database_that_does_not_answer_says_so_in_one_line(tmp_path):
    closed = EmbeddedMongo(tmp_path / "mongo")
    uri = closed.start()
    closed.stop()  # its socket is gone: nothing answers there

    result = _check(uri)

    assert result.returncode == 1
    assert (
        result.stderr
        == "desk: the worker's heartbeat is unreadable: the database did not answer (ServerSelectionTimeoutError)\n"
    )


def _check(uri: str | None) -> subprocess.CompletedProcess[str]:
    env = desk_env(**({"MONGODB_URI": uri} if uri else {}))
    return subprocess.run(  # noqa: S603 - our own command
        desk_command("worker", "--check"), env=env, capture_output=True, text=True, timeout=60, check=False
    )


def test_desk_worker_burst_does_what_is_due_once_and_exits(tmp_path):
    with EmbeddedMongo(tmp_path / "mongo") as uri, MongoClient(uri, tz_aware=True) as client:
        runs = client["desk"]["agent_runs"]  # a copilot run its dead web process left running: the sweep ends it
        dead = {"_id": ObjectId(), "status": "running", "leaseUntil": datetime.now(UTC) - timedelta(minutes=1)}
        runs.insert_one(dead)

        done = subprocess.run(  # noqa: S603 - our own command
            desk_command("worker", "--burst"),
            env=desk_env(MONGODB_URI=uri, AI_ENABLED="false"),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        after = runs.find_one({"_id": dead["_id"]})
        beat = client["desk"]["worker_heartbeats"].find_one({"_id": worker_name()})

    assert done.returncode == 0, done.stderr
    assert (after["status"], after["errorCode"]) == ("error", "lease_expired")
    assert beat is not None
