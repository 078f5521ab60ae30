"""The worker (`desk worker`): queued jobs (`functions`) and jobs on a clock (`cron_jobs`), as arq's Worker runs them.

Whoever starts it hands it its table (desk/tasks.py): this package imports none of the tasks it runs.
`serve` runs each cron job at start-up and then every `interval`, APScheduler keeping time, and polls
the queue every `poll_delay`; `work` runs every cron job once and every due job, and returns (burst
mode: the tests' way in). At most `concurrency` jobs run at once in a worker, however many of its
polls overlap (the start-up run and the scheduler's first tick do); a slot is refilled as soon as its
job ends, and a poll works through a backlog until nothing is due or the worker stops.
"""

import asyncio
import logging
import os
import signal
import socket
import uuid
from collections.abc import Iterable
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any, assert_never

from apscheduler.schedulers.asyncio import AsyncIOScheduler

from desk.clock import SYSTEM_CLOCK, Clock
from desk.config import Settings
from desk.db.lifecycle import open_database
from desk.jobs import backoff, queue, slots
from desk.jobs.table import Context, CronJob, Done, Failed, Function, Job, Later, Result, Retry, Skipped
from desk.logs import failure

log = logging.getLogger("desk.worker")
OWNER = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"  # this process, as leases name it
Doc = dict[str, Any]


class Worker:
    """One worker's table and its limits; its claims and settlements happen at `clock`'s time (a test's moves)."""

    def __init__(
        self,
        *,
        functions: Iterable[Function] = (),
        cron_jobs: Iterable[CronJob] = (),
        concurrency: int = 1,
        poll_delay: float = 5.0,
        burst: bool = False,
        clock: Clock = SYSTEM_CLOCK,
        owner: str = OWNER,
    ) -> None:
        self.functions = {function.name: function for function in functions}
        self.cron_jobs = tuple(cron_jobs)
        self.concurrency, self.poll_delay, self.burst = concurrency, poll_delay, burst
        self.clock, self.owner = clock, owner
        self._busy = 0  # slots taken: jobs in flight, and claims on their way to becoming one
        self._revived_at: datetime | None = None  # when lapsed leases were last put back (see `_claim`)

    async def run(self, settings: Settings, *, stop: asyncio.Event | None = None) -> None:
        """Serve until stopped; in burst mode, do what is due once and return."""
        if not self.burst:
            await self.serve(settings, stop=stop)
            return
        async with open_database(settings) as db:
            await self.work(Context(db=db, settings=settings))

    async def work(self, ctx: Context) -> int:
        """Burst mode: every cron job once, now, then every due job; returns how many jobs it claimed.

        A cron job's failure is raised.
        """
        for job in self.cron_jobs:
            await job.run(ctx)
        return await self.run_due(ctx)

    async def run_due(self, ctx: Context) -> int:
        """Claim and run due jobs, at most `concurrency` at once, until none is due (or the worker stops);
        waits for every job it started; returns how many it claimed."""
        ctx = replace(ctx, poll=object())
        in_flight: set[asyncio.Task] = set()
        resting: set[str] = set()  # tasks that answered Later: their jobs wait for the next poll
        spares: list[slots.Held] = []  # desk-wide slots whose jobs ended, for the claim that follows at once
        claimed = 0
        try:
            while True:
                held, tried = None, False
                if not ctx.stopping.is_set() and self._take_slot():
                    try:
                        tried = True
                        held = await self._claim(ctx, resting, spares)
                    finally:
                        if held is None:
                            self._free_slot()
                if held is None:
                    await self._claimed_nothing(ctx, spares, tried=tried)
                else:
                    claimed += 1
                    doc, desk_slot = held
                    job = self.perform(ctx, doc, resting=resting, desk_slot=desk_slot, spares=spares)
                    in_flight.add(asyncio.create_task(job))
                    continue
                if not in_flight:
                    return claimed
                # A slot is refilled as soon as its job ends: a poll that stopped claiming after a fixed window
                # left the worker idle until the scheduler's next tick (skipped while it ran: up to two intervals).
                # With a slot free and nothing due yet, look again after a poll delay.
                first = asyncio.FIRST_COMPLETED
                ended, in_flight = await asyncio.wait(in_flight, timeout=self.poll_delay, return_when=first)
                for _ in ended:  # freed here, not in a done callback: those may run after a burst has returned
                    self._free_slot()
        finally:
            if in_flight:  # cancelled (the worker stops hard): the jobs stop too; their leases lapse
                for task in in_flight:
                    task.cancel()
                await asyncio.gather(*in_flight, return_exceptions=True)
                for _ in in_flight:
                    self._free_slot()
            await asyncio.shield(self._idle(ctx, spares))

    async def perform(
        self,
        ctx: Context,
        doc: Doc,
        *,
        resting: set[str] | None = None,
        desk_slot: Doc | slots.Held | None = None,
        spares: list[slots.Held] | None = None,
    ) -> None:
        """Run one claimed job and settle it, fenced: a worker that lost the job writes nothing.

        A task that answers Later joins `resting`: the poll claims none of its jobs again (it would at once).
        `desk_slot`: the task's desk-wide slot the job holds, renewed with the job; after it, the slot joins
        `spares` (the poll's next claim takes it over, two round trips fewer) or, with none given, is released.
        """
        function = self.functions[doc["type"]]
        held = desk_slot
        if held is not None and not isinstance(held, slots.Held):
            held = slots.Held(held, self.clock.now())
        ended = False
        try:
            await self._perform(ctx, function, doc, resting, held)
            ended = True
        finally:
            if held is not None and ended and spares is not None and not held.lost:
                spares.append(held)
            elif held is not None:
                await asyncio.shield(slots.release(ctx.db, held.doc))

    async def _perform(
        self, ctx: Context, function: Function, doc: Doc, resting: set[str] | None, desk_slot: slots.Held | None
    ) -> None:
        async def still_ours() -> bool:
            at = self.clock.now()
            if desk_slot is None or at - desk_slot.renewed < function.lease / 3:
                return await queue.renew(ctx.db, doc, function.lease, at=at)  # the slot's lease is young: not yet
            desk_slot.renewed = at
            job, slot = await asyncio.gather(
                queue.renew(ctx.db, doc, function.lease, at=at),
                slots.renew(ctx.db, desk_slot.doc, function.lease, at=at),
            )
            desk_slot.lost = desk_slot.lost or not slot
            return job and slot  # a lapsed slot is another worker's now: the job must stop like a lost lease

        job = Job(
            id=doc["_id"],
            key=doc["payloadRef"],
            attempts=doc["attempts"],
            still_ours=still_ours,
            payload=doc.get("payload"),
        )
        try:
            result = await function.run(ctx, job) or Done()
        except Exception as error:  # a database hiccup or a bug: a failed attempt, retried like any other
            log.error("worker job %s failed (%s)", function.name, failure(error))  # the type: a message may quote text
            result = Retry("internal")
        if isinstance(result, Later) and resting is not None:
            resting.add(function.name)
        await self._settle(ctx, function, doc, result)

    async def _claimed_nothing(self, ctx: Context, spares: list[slots.Held], *, tried: bool) -> None:
        """Nothing more to claim now (`tried`): the tasks hear of it. Or the worker is full (of other tasks' jobs)
        or stops: either way a desk-wide slot kept for a next claim that cannot come now goes back, or it would hold
        other workers back until its lease lapsed."""
        if tried:
            await self._idle(ctx, spares)
        elif spares:
            await slots.release_all(ctx.db, spares)

    async def _idle(self, ctx: Context, spares: list[slots.Held]) -> None:
        """Nothing more to claim now (or the worker stops): the slots kept go back, and each task hears of it."""
        idle = [function.idle(ctx) for function in self.functions.values() if function.idle is not None]
        await asyncio.gather(slots.release_all(ctx.db, spares), *idle)

    def _take_slot(self) -> bool:
        """One of the worker's `concurrency` slots, taken before the claim (no await in between), or False."""
        if self._busy >= self.concurrency:
            return False
        self._busy += 1
        return True

    def _free_slot(self) -> None:
        self._busy -= 1

    async def _claim(
        self, ctx: Context, resting: set[str], spares: list[slots.Held]
    ) -> tuple[Doc, slots.Held | None] | None:
        """The newest due job of a task that is ready now, with one of the task's desk-wide slots if it declares a
        limit (`desk_concurrency`); a job whose leases kept lapsing becomes a dead letter.

        The job is claimed first, then its slot: an idle poll costs no slot round trips. A slot this worker's
        last job of the task held (`spares`) is taken over, not let go and taken again. With every slot held
        elsewhere, the job goes straight back (its attempt not counted) and the task waits for this worker's
        next job to end, or its next poll.
        """
        awake = [task for task in self.functions.values() if task.name not in resting]
        ready = [task for task in awake if task.ready is None or await task.ready(ctx)]
        while (doc := await self._claim_ready(ctx, ready)) is not None:
            function = self.functions[doc["type"]]
            if function.desk_concurrency is None:
                return doc, None
            at = self.clock.now()
            if (spare := await self._spare(ctx, function, spares, at)) is not None:
                return doc, spare
            limit = function.desk_concurrency
            slot = await slots.take(ctx.db, function.name, limit, owner=self.owner, lease=function.lease, at=at)
            if slot is not None:
                return doc, slots.Held(slot, at)
            await queue.put_back(ctx.db, doc, at=at)  # the desk runs as many of its jobs as it may
            ready = [task for task in ready if task is not function]
        return None

    async def _spare(
        self, ctx: Context, function: Function, spares: list[slots.Held], at: datetime
    ) -> slots.Held | None:
        """One of `function`'s slots kept from a job that just ended, still ours; None: none is."""
        for held in [held for held in spares if held.doc["_id"].startswith(f"{function.name}:")]:
            spares.remove(held)
            if at - held.renewed >= function.lease / 3:  # renewed first, so it outlives the job's first lease check
                if not await slots.renew(ctx.db, held.doc, function.lease, at=at):
                    continue  # it lapsed and is another worker's now
                held.renewed = at
            return held
        return None

    async def _claim_ready(self, ctx: Context, ready: list[Function]) -> Doc | None:
        at = self.clock.now()
        if ready and (self._revived_at is None or at - self._revived_at >= timedelta(seconds=self.poll_delay)):
            # A dead or stalled worker's jobs (their lease lapsed) back in line, newest first as all: at the first
            # claim and then once a poll delay, not at every claim (one more round trip each), nor only when nothing
            # is due (under a backlog that never ends they would wait for ever).
            self._revived_at = at
            await queue.revive(ctx.db, at=at)
        while ready:
            # one claim across the ready tasks, leased as briefly as the shortest asks (a worker killed right at the
            # claim holds the job no longer than its own lease says); a longer one is renewed to its own at once
            shortest = min(function.lease for function in ready)
            at = self.clock.now()
            doc = await queue.claim(ctx.db, owner=self.owner, lease=shortest, tasks=[f.name for f in ready], at=at)
            if doc is None:
                return None
            function = self.functions[doc["type"]]
            if doc["attempts"] > function.max_tries:
                # a worker died on it each time: a dead letter, not another try
                await queue.settle(ctx.db, doc, "failed", error=doc.get("lastError") or "lease_expired", at=at)
                continue
            if function.lease > shortest:
                await queue.renew(ctx.db, doc, function.lease, at=at)
            return doc
        return None

    async def _settle(self, ctx: Context, function: Function, doc: Doc, result: Result) -> None:
        at = self.clock.now()
        match result:
            case Done():
                await queue.settle(ctx.db, doc, "done", at=at)
            case Skipped(reason=reason):
                await queue.settle(ctx.db, doc, "skipped", error=reason, at=at)
            case Later(strike=str() as reason) if doc.get("strikes", 0) + 1 >= function.max_tries:
                await queue.settle(ctx.db, doc, "failed", error=reason, at=at)
                tries = function.max_tries
                log.warning("worker gave up on a %s job after %d strikes (%s)", function.name, tries, reason)
            case Later(error=error, after=after, strike=strike):
                if strike is not None:  # a strike waits a backoff too: what failed on this job may pass meanwhile
                    after = max(after or timedelta(), timedelta(seconds=backoff.delay(doc.get("strikes", 0) + 1)))
                when = at + after if after else None
                await queue.put_back(ctx.db, doc, error=error, not_before=when, strike=strike is not None, at=at)
            case Failed(error=error):
                await queue.settle(ctx.db, doc, "failed", error=error, at=at)
                log.warning("worker gave up on a %s job at once (%s)", function.name, error)
            case Retry(error=error) if doc["attempts"] >= function.max_tries:
                await queue.settle(ctx.db, doc, "failed", error=error, at=at)
                log.warning("worker gave up on a %s job after %d attempts (%s)", function.name, doc["attempts"], error)
            case Retry(error=error, after=after):
                when = at + (after if after is not None else timedelta(seconds=backoff.delay(doc["attempts"])))
                await queue.retry_at(ctx.db, doc, when, error=error, at=at)
            case _:
                assert_never(result)

    async def serve(self, settings: Settings, *, stop: asyncio.Event | None = None) -> None:
        """Run the table until `stop` is set (or SIGTERM/SIGINT), on the database `settings` name."""
        stop = stop or asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        jobs = self.cron_jobs
        if self.functions:
            jobs += (CronJob("queue", self.run_due, self.poll_delay, outlasts_interval=True),)
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
                    seconds=job.interval,
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
    """Runs cron jobs so that stopping the worker lets a run in progress finish before the database closes."""

    def __init__(self, ctx: Context, stop: asyncio.Event):
        self.ctx, self.stop = ctx, stop
        self.running: dict[asyncio.Task, str] = {}

    def scheduled(self, job: CronJob):
        async def tick() -> None:
            await self.once(job)

        tick.__name__ = job.name  # APScheduler names the job after its function in its own log lines
        return tick

    async def once(self, job: CronJob) -> None:
        if job.name in self.running.values():  # a start-up pass still running: a tick beside it would double it
            return
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
