"""The worker process (`scheduler.py`): the jobs in `JOBS`, run by APScheduler beside the web app.

The jobs are a declared table, as arq declares `functions` and `cron_jobs`: a new job is a
coroutine `async def job(ctx: Context) -> None` and one `Job` line below. `serve` runs each one at
start-up and then every `interval`; `burst` runs every job once, now, and returns (the tests' way in).
"""

import asyncio
import logging
import os
import signal
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field

from apscheduler.schedulers.asyncio import AsyncIOScheduler
from pymongo.asynchronous.database import AsyncDatabase

from desk.agent.copilot.sweeper import sweep
from desk.agent.triage.task import reconcile_job, triage_poll
from desk.config import Settings, load_settings
from desk.db.lifecycle import open_database
from desk.heartbeat import BEAT_SECONDS, beat, worker_name
from desk.logs import configure_logging, failure, never_log

log = logging.getLogger("desk.worker")
NO_DATABASE = (
    "MONGODB_URI: the worker needs the database the web app uses (`desk run` passes it when it starts the worker)"
)


@dataclass(frozen=True)
class Context:
    """What every job gets: the database and the settings of this worker process, and whether it is stopping."""

    db: AsyncDatabase
    settings: Settings
    stopping: asyncio.Event = field(default_factory=asyncio.Event)  # set: a job that loops finishes and returns


@dataclass(frozen=True)
class Job:
    """A job of the table: `run(ctx)` every `interval(settings)` seconds, and once when the worker starts.

    `outlasts_interval`: a run is meant to go on past its interval (the triage poll works through a
    backlog), so APScheduler's skipped ticks are expected, not worth its warning every interval.
    """

    name: str
    run: Callable[[Context], Awaitable[None]]
    interval: Callable[[Settings], float]
    outlasts_interval: bool = False


async def sweep_stale(ctx: Context) -> None:
    """The sweeper (spec §4.5): stale copilot runs end, overdue approvals expire, stuck sessions are freed."""
    swept = await sweep(ctx.db)
    if swept.stale_runs or swept.expired_approvals or swept.freed_sessions:
        log.info(
            "sweeper: %d stale runs ended, %d approvals expired, %d stuck sessions freed",
            swept.stale_runs,
            swept.expired_approvals,
            swept.freed_sessions,
        )


async def heartbeat(ctx: Context) -> None:
    """The worker's heartbeat (desk/heartbeat.py): `desk worker --check`, the compose healthcheck, reads it."""
    await beat(ctx.db, worker=worker_name())


JOBS: tuple[Job, ...] = (
    Job("heartbeat", heartbeat, lambda settings: BEAT_SECONDS),
    Job("sweep", sweep_stale, lambda settings: settings.agent_sweep_interval_ms / 1000),
    Job("triage", triage_poll, lambda settings: settings.agent_poll_interval_ms / 1000, outlasts_interval=True),
    Job("reconcile", reconcile_job, lambda settings: settings.agent_reconcile_after_ms / 1000),
)


async def burst(ctx: Context, jobs: Iterable[Job] = JOBS) -> None:
    """Run every job once, now, one after the other, and return; a job's failure is raised."""
    for job in jobs:
        await job.run(ctx)


async def serve(settings: Settings, *, stop: asyncio.Event | None = None, jobs: Iterable[Job] = JOBS) -> None:
    """Run the jobs until `stop` is set (or SIGTERM/SIGINT), on the database `settings` name."""
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    quiet = _QuietOverruns({job.name for job in jobs if job.outlasts_interval})
    scheduler_log = logging.getLogger("apscheduler.scheduler")
    async with open_database(settings) as db:
        runner = _Runner(Context(db=db, settings=settings, stopping=stop), stop)
        scheduler = AsyncIOScheduler()
        for job in jobs:
            # coalesce + one instance: a slow run is never started twice at once or caught up in a burst
            scheduler.add_job(
                runner.scheduled(job),
                "interval",
                seconds=job.interval(settings),
                id=job.name,
                name=job.name,  # APScheduler's log lines name a job by this (else its function's qualified name)
                coalesce=True,
                max_instances=1,
                # no next_run_time: APScheduler reads None as "add paused", and the job would never run again
            )
        scheduler_log.addFilter(quiet)  # removed when we stop: the logger is the process's
        scheduler.start()
        watchdog = None
        if os.environ.get("DESK_WORKER_PARENT"):  # started by `desk run`: never outlive it
            watchdog = asyncio.create_task(_exit_with_parent(int(os.environ["DESK_WORKER_PARENT"]), stop))
        log.info("worker started")
        try:
            for job in jobs:  # once at start-up: a desk restarted after a crash is tidied at once
                await runner.once(job)
            await stop.wait()
        finally:
            if watchdog is not None:
                watchdog.cancel()
            scheduler.shutdown(wait=False)
            for sig in (signal.SIGTERM, signal.SIGINT):  # the loop may outlive us (tests, an embedding process)
                loop.remove_signal_handler(sig)
            await runner.drain()
            scheduler_log.removeFilter(quiet)
            log.info("worker stopped")


class _QuietOverruns(logging.Filter):
    """Drops APScheduler's "maximum number of running instances reached" for the jobs named (and nothing else)."""

    def __init__(self, job_ids: set[str]) -> None:
        super().__init__()
        self.job_ids = frozenset(job_ids)

    def filter(self, record: logging.LogRecord) -> bool:
        job = record.args[0] if isinstance(record.args, tuple) and record.args else None
        overrun = isinstance(record.msg, str) and "maximum number of running instances reached" in record.msg
        return not (overrun and getattr(job, "id", None) in self.job_ids)


class _Runner:
    """Runs jobs so that stopping the worker lets a run in progress finish before the database closes."""

    def __init__(self, ctx: Context, stop: asyncio.Event):
        self.ctx, self.stop = ctx, stop
        self.running: dict[asyncio.Task, str] = {}

    def scheduled(self, job: Job) -> Callable[[], Awaitable[None]]:
        async def tick() -> None:
            await self.once(job)

        tick.__name__ = job.name  # APScheduler names the job after its function in its own log lines
        return tick

    async def once(self, job: Job) -> None:
        task = asyncio.create_task(job.run(self.ctx), name=f"worker-{job.name}")
        self.running[task] = job.name
        task.add_done_callback(lambda done: self.running.pop(done, None))
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            # Stopping, APScheduler 3's asyncio executor cancels a running job (it cannot wait) and logs the
            # cancel as the job's error: the run goes on, and `drain` awaits it before the client closes.
            if not self.stop.is_set():  # the worker itself is cancelled, not stopped: so is the job
                task.cancel()
                raise
        except Exception as error:  # the type only: a driver's message may quote a document (SEC-1)
            log.error("worker job %s failed (%s)", job.name, failure(error))

    async def drain(self) -> None:
        """Wait for the runs still in progress; a failure cut off from its job is logged here."""
        names = dict(self.running)
        for task, failed in zip(names, await asyncio.gather(*names, return_exceptions=True), strict=True):
            if isinstance(failed, Exception):
                log.error("worker job %s failed (%s)", names[task], failure(failed))


async def _exit_with_parent(parent: int, stop: asyncio.Event) -> None:
    while os.getppid() == parent:  # noqa: ASYNC110 - nothing signals a parent's death; polling is the way
        await asyncio.sleep(1)
    stop.set()


def main() -> None:
    configure_logging()
    settings = load_settings()
    never_log(*settings.secrets())
    if settings.mongodb_uri is None:
        raise SystemExit(f"config error: {NO_DATABASE}")
    asyncio.run(serve(settings))


if __name__ == "__main__":
    main()
