"""The worker (desk/jobs/worker.py) with a task made up here: leases and fences, backoff, dead letters,
`not_before`, burst mode. Time passes by moving the test's clock, never by waiting."""

import asyncio
import logging
from datetime import timedelta

from desk.config import Settings
from desk.jobs import queue, slots
from desk.jobs.table import Context, CronJob, Done, Failed, Function, Job, Later, Retry, Skipped
from desk.jobs.worker import Worker
from tests.helpers import until
from tests.jobs.conftest import LEASE, TASK, job_of

WAIT = timedelta(seconds=2)  # the longest first backoff (1-2 s)


def echo(*results, seen: list[Job] | None = None) -> Function:
    """The test's task: each run returns the next of `results` (the last one again once they run out)."""
    left = list(results)

    async def run(ctx: Context, job: Job):
        if seen is not None:
            seen.append(job)
        result = left.pop(0) if len(left) > 1 else left[0]
        if isinstance(result, Exception):
            raise result
        return result

    return Function(TASK, run, max_tries=3, lease=LEASE)


async def test_a_job_runs_once_and_is_done(db, ctx, make_worker, enqueue):
    seen: list[Job] = []
    key = await enqueue()

    claimed = await make_worker(echo(Done(), seen=seen)).work(ctx)

    assert claimed == 1
    assert [(job.key, job.attempts) for job in seen] == [(key, 1)]
    job = await job_of(db, key)
    assert (job["status"], job["attempts"], job["leaseOwner"], job["lastError"]) == ("done", 1, None, None)


async def test_a_job_not_before_a_time_waits_for_it(db, ctx, clock, make_worker, enqueue):
    key = await enqueue(not_before=clock.now() + timedelta(minutes=5))
    worker = make_worker(echo(None))

    before = await worker.work(ctx)
    clock.move(timedelta(minutes=5))
    at_the_time = await worker.work(ctx)

    assert (before, at_the_time) == (0, 1)
    assert (await job_of(db, key))["status"] == "done"


async def test_a_failed_attempt_backs_off_and_the_retry_succeeds(db, ctx, clock, make_worker, enqueue):
    key = await enqueue()
    worker = make_worker(echo(Retry("flaky"), Done()))
    start = clock.now()

    await worker.work(ctx)
    waiting = await job_of(db, key)
    at_once = await worker.work(ctx)
    clock.move(WAIT)
    later = await worker.work(ctx)

    assert (waiting["status"], waiting["attempts"], waiting["lastError"]) == ("pending", 1, "flaky")
    assert start + timedelta(seconds=1) <= waiting["availableAt"] <= start + WAIT
    assert (at_once, later) == (0, 1)
    done = await job_of(db, key)
    assert (done["status"], done["attempts"]) == ("done", 2)


async def test_a_task_that_raises_is_a_failed_attempt_logged_by_its_type_alone(db, ctx, make_worker, enqueue, caplog):
    key = await enqueue()

    await make_worker(echo(RuntimeError("Leaking tap, call 555-0100"))).work(ctx)

    job = await job_of(db, key)
    assert (job["status"], job["lastError"]) == ("pending", "internal")
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and errors[0].startswith(f"worker job {TASK} failed (RuntimeError at ")
    assert "555-0100" not in caplog.text


async def test_after_its_last_try_a_job_is_a_dead_letter(db, ctx, clock, make_worker, enqueue):
    key = await enqueue()
    worker = make_worker(echo(Retry("broken")))

    for _ in range(3):
        await worker.work(ctx)
        clock.move(timedelta(minutes=1))
    after_more_time = await worker.work(ctx)

    job = await job_of(db, key)
    assert (job["status"], job["attempts"], job["lastError"]) == ("failed", 3, "broken")
    assert after_more_time == 0


async def test_a_job_whose_leases_keep_lapsing_becomes_a_dead_letter_without_another_run(
    db, ctx, clock, make_worker, enqueue
):
    key = await enqueue()
    for n in range(3):  # three workers, each dying while it held the job
        await queue.revive(db, at=clock.now())  # as each worker's poll does
        await queue.claim(db, owner=f"dead{n}", lease=LEASE, at=clock.now())
        clock.move(LEASE + timedelta(milliseconds=1))
    seen: list[Job] = []

    claimed = await make_worker(echo(Done(), seen=seen)).work(ctx)

    assert (claimed, seen) == (0, [])
    job = await job_of(db, key)
    assert (job["status"], job["lastError"]) == ("failed", "lease_expired")


async def test_a_lapsed_lease_lets_another_worker_take_the_job_and_the_first_ones_late_result_is_refused(
    db, ctx, clock, make_worker, enqueue
):
    key = await enqueue()
    go_on = {1: asyncio.Event(), 2: asyncio.Event()}
    still_ours: dict[int, bool] = {}

    async def run(ctx: Context, job: Job):
        await go_on[job.attempts].wait()
        still_ours[job.attempts] = await job.still_ours()
        return Done() if job.attempts == 1 else Skipped("taken_over")

    task = Function(TASK, run, lease=LEASE)
    paused = asyncio.create_task(make_worker(task, owner="paused").work(ctx))
    await until(lambda: _owner_is(db, key, "paused"), what="the first worker's claim")
    clock.move(LEASE + timedelta(milliseconds=1))  # it slept past its lease
    awake = asyncio.create_task(make_worker(task, owner="awake").work(ctx))
    await until(lambda: _owner_is(db, key, "awake"), what="the second worker's claim")

    go_on[1].set()  # the first one wakes up and finishes
    await paused
    between = await job_of(db, key)
    go_on[2].set()
    await awake

    assert still_ours == {1: False, 2: True}
    assert (between["status"], between["leaseOwner"], between["fence"]) == ("processing", "awake", 2)
    job = await job_of(db, key)
    assert (job["status"], job["lastError"], job["attempts"]) == ("skipped", "taken_over", 2)


async def test_later_puts_the_job_back_without_counting_the_attempt(db, ctx, make_worker, enqueue):
    key = await enqueue()

    await make_worker(echo(Later())).work(ctx)

    job = await job_of(db, key)
    assert (job["status"], job["attempts"], job["leaseOwner"]) == ("pending", 0, None)


async def test_later_after_a_while_keeps_the_job_waiting_that_long_and_says_why(db, ctx, clock, make_worker, enqueue):
    key = await enqueue()
    worker = make_worker(echo(Later("upstream_down", after=timedelta(seconds=30)), Done()))
    start = clock.now()

    await worker.work(ctx)
    waiting = await job_of(db, key)
    clock.move(timedelta(seconds=29))
    too_soon = await worker.work(ctx)
    clock.move(timedelta(seconds=1))
    on_time = await worker.work(ctx)

    assert (waiting["status"], waiting["attempts"], waiting["lastError"]) == ("pending", 0, "upstream_down")
    assert waiting["availableAt"] == start + timedelta(seconds=30)
    assert (too_soon, on_time) == (0, 1)
    assert (await job_of(db, key))["status"] == "done"


async def test_strikes_back_off_and_the_last_allowed_one_makes_a_dead_letter_with_its_reason(
    db, ctx, clock, make_worker, enqueue
):
    key = await enqueue()
    worker = make_worker(echo(Later("upstream_500", strike="fails_on_this_job")))
    seen = []
    for _ in range(3):  # max_tries strikes
        clock.move(timedelta(minutes=1))  # past any backoff
        await worker.work(ctx)
        seen.append(await job_of(db, key))

    assert [(j["status"], j["strikes"], j["lastError"]) for j in seen[:2]] == [
        ("pending", 1, "upstream_500"),
        ("pending", 2, "upstream_500"),
    ]
    assert seen[0]["attempts"] == 0  # a strike is not an attempt
    assert seen[1]["availableAt"] > seen[1]["updatedAt"]  # and it waits a backoff
    assert (seen[2]["status"], seen[2]["lastError"]) == ("failed", "fails_on_this_job")
    requeued = await queue.requeue(db, seen[2]["_id"])
    assert (requeued["attempts"], requeued["strikes"]) == (0, 0)  # an admin's retry starts the count again


async def test_a_retry_that_says_how_long_to_wait_waits_that_long_not_the_backoff(db, ctx, clock, make_worker, enqueue):
    key = await enqueue()
    start = clock.now()

    await make_worker(echo(Retry("slow_down", after=timedelta(seconds=6)))).work(ctx)

    job = await job_of(db, key)
    assert (job["status"], job["attempts"], job["lastError"]) == ("pending", 1, "slow_down")
    assert job["availableAt"] == start + timedelta(seconds=6)


async def test_a_failure_no_retry_can_mend_is_a_dead_letter_at_once_with_its_reason(
    db, ctx, clock, make_worker, enqueue, caplog
):
    key = await enqueue()
    worker = make_worker(echo(Failed("refused_as_it_stands"), Done()))

    await worker.work(ctx)
    clock.move(timedelta(minutes=10))
    again = await worker.work(ctx)

    job = await job_of(db, key)
    assert (job["status"], job["attempts"], job["lastError"]) == ("failed", 1, "refused_as_it_stands")
    assert again == 0
    assert f"worker gave up on a {TASK} job at once (refused_as_it_stands)" in caplog.text


async def test_a_task_that_is_not_ready_leaves_its_jobs_pending_and_the_others_run(db, ctx, make_worker, enqueue):
    async def never(ctx: Context) -> bool:
        return False

    waiting = await enqueue("test.switched_off")
    key = await enqueue()
    switched_off = Function("test.switched_off", echo(Done()).run, ready=never)

    claimed = await make_worker(switched_off, echo(Done())).work(ctx)

    assert claimed == 1
    assert (await job_of(db, key))["status"] == "done"
    assert (await job_of(db, waiting, "test.switched_off"))["status"] == "pending"


class Held:
    """A task whose jobs wait for `go_on`, counting how many run at once (`running`) and at most (`most`)."""

    def __init__(self) -> None:
        self.running, self.most, self.go_on = 0, 0, asyncio.Event()

    async def run(self, ctx: Context, job: Job) -> None:
        self.running += 1
        self.most = max(self.most, self.running)
        await self.go_on.wait()
        self.running -= 1


async def test_no_more_jobs_run_at_once_than_the_worker_allows(db, ctx, make_worker, enqueue):
    for _ in range(5):
        await enqueue()
    held = Held()

    working = asyncio.create_task(make_worker(Function(TASK, held.run), concurrency=2).work(ctx))
    await until(lambda: held.running == 2, what="two jobs running")
    processing = await db["outbox_events"].count_documents({"status": "processing"})  # the worker went on meanwhile
    held.go_on.set()

    assert (await working, processing, held.most) == (5, 2, 2)


async def test_a_fresh_job_runs_next_while_a_backlog_drains(db, ctx, clock, make_worker, enqueue):
    backlog = [await enqueue(born=clock.now() - timedelta(minutes=minutes)) for minutes in range(1, 101)]
    ran: list = []
    fresh: list = []

    async def run(ctx: Context, job: Job):
        ran.append(job.key)
        if len(ran) == 1:  # a new order arrives while the worker is busy with the backlog
            fresh.append(await enqueue())

    claimed = await make_worker(Function(TASK, run)).work(ctx)

    assert claimed == 101
    assert ran[:3] == [backlog[0], fresh[0], backlog[1]]


async def test_a_desk_wide_limit_holds_across_workers(db, ctx, make_worker, enqueue):
    for _ in range(4):
        await enqueue()
    held = Held()

    one_at_a_time = Function(TASK, held.run, lease=LEASE, desk_concurrency=1)
    first = asyncio.create_task(make_worker(one_at_a_time, owner="w1", concurrency=2).work(ctx))
    await until(lambda: held.running == 1, what="the first job running")
    second = await make_worker(one_at_a_time, owner="w2", concurrency=2).work(ctx)  # finds the desk's slot taken
    held.go_on.set()

    assert (second, await first, held.most) == (0, 4, 1)
    assert await db["job_slots"].count_documents({"owner": {"$ne": None}}) == 0  # every slot released


async def test_a_backlog_keeps_its_desk_wide_slot_from_job_to_job_and_lets_go_at_the_end(db, ctx, make_worker, enqueue):
    for _ in range(3):
        await enqueue()
    fences: list[int] = []

    async def run(ctx: Context, job: Job):
        fences.append((await db["job_slots"].find_one({"owner": "w1"}))["fence"])

    claimed = await make_worker(Function(TASK, run, lease=LEASE, desk_concurrency=1)).work(ctx)

    assert (claimed, fences) == (3, [1, 1, 1])  # taken once, not let go and taken again between the jobs
    assert await db["job_slots"].count_documents({"owner": {"$ne": None}}) == 0


async def test_a_kept_slot_goes_back_while_the_worker_is_full_of_other_jobs(db, ctx, clock, make_worker, enqueue):
    # found by a review: a triage pass ended, the worker filled up with an email, and the desk's one triage slot
    # stayed kept for a claim that could not come, holding every other worker's triage back
    await enqueue("test.slow", born=clock.now() - timedelta(minutes=1))
    await enqueue(born=clock.now())  # the newest: claimed first
    go_on = asyncio.Event()

    async def slow(ctx: Context, job: Job):
        await go_on.wait()

    one_at_a_time = Function(TASK, echo(Done()).run, lease=LEASE, desk_concurrency=1)
    worker = asyncio.create_task(make_worker(one_at_a_time, Function("test.slow", slow, lease=LEASE)).work(ctx))
    try:
        await until(lambda: db["outbox_events"].count_documents({"status": "done"}), what="the first job done")
        free = lambda: db["job_slots"].count_documents({"owner": None})  # noqa: E731
        await until(free, what="the slot given back while the slow job runs")
    finally:
        go_on.set()
        assert await worker == 2


async def test_a_slot_that_lapsed_during_a_job_is_not_handed_to_the_next(db, ctx, clock, make_worker, enqueue):
    """The worker's job outlived the slot's lease and another worker took the slot meanwhile: the next job does not
    run on it; it waits (its attempt not counted) while the other holds the desk's one slot."""
    first, second = await enqueue(born=clock.now()), await enqueue(born=clock.now() - timedelta(minutes=1))

    async def run(ctx: Context, job: Job):
        if job.key == first:  # a long job, its slot never renewed; another worker takes the lapsed slot
            clock.move(LEASE + timedelta(milliseconds=1))
            await db["job_slots"].update_one({}, {"$set": {"owner": "w2", "leasedUntil": clock.now() + LEASE}})
            await db["job_slots"].update_one({}, {"$inc": {"fence": 1}})

    claimed = await make_worker(Function(TASK, run, lease=LEASE, desk_concurrency=1)).work(ctx)

    assert claimed == 1  # the second job was claimed, found no slot, and went straight back
    waiting = await job_of(db, second)
    assert (waiting["status"], waiting["attempts"]) == ("pending", 0)
    assert (await db["job_slots"].find_one({}))["owner"] == "w2"


async def test_a_desk_wide_slot_held_by_a_dead_worker_lapses_with_its_lease(db, ctx, clock, make_worker, enqueue):
    key = await enqueue()
    await slots.take(db, TASK, 1, owner="dead", lease=LEASE, at=clock.now())  # it died holding the slot
    one_at_a_time = Function(TASK, echo(Done()).run, lease=LEASE, desk_concurrency=1)

    before = await make_worker(one_at_a_time).work(ctx)
    clock.move(LEASE + timedelta(milliseconds=1))
    after = await make_worker(one_at_a_time).work(ctx)

    assert (before, after) == (0, 1)
    assert (await job_of(db, key))["status"] == "done"


async def test_burst_mode_runs_the_cron_jobs_once_and_what_is_due_then_returns(db, mongo_uri, clock, enqueue):
    due = [await enqueue() for _ in range(3)]
    later = await enqueue(not_before=clock.now() + timedelta(hours=1))
    ticks: list[str] = []

    async def tick(ctx: Context) -> None:
        ticks.append("tick")

    worker = Worker(functions=[echo(Done())], cron_jobs=[CronJob("tick", tick, 3600)], burst=True, clock=clock)
    await asyncio.wait_for(worker.run(Settings(mongodb_uri=mongo_uri, mongodb_db=db.name)), 10)

    assert ticks == ["tick"]
    assert [(await job_of(db, key))["status"] for key in due] == ["done"] * 3
    assert (await job_of(db, later))["status"] == "pending"


async def _owner_is(db, key, owner: str) -> bool:
    job = await job_of(db, key)
    return job["status"] == "processing" and job["leaseOwner"] == owner
