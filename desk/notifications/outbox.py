"""A write's fan-out as a job on the queue: stored before the write, run by the writer at once, or a worker.

A write that tells people (desk/work_orders/service.py; the triage agent's flag) describes itself (`events`: the
news) and `announce`s it before it writes: a `notifications.fan_out` job, keyed by the write's timeline entry, stored
already claimed by this process (`queue.enqueue_held`). Once the write is saved, `deliver` runs the job here and
settles it, so the bell rings before the answer goes out. Nothing between the write and its fan-out can lose it:
- the fan-out fails (the database hiccups, a bug): the job is retried with the queue's backoff by the worker, and
  the write still answers as saved;
- the process dies after the write: the job's lease lapses (`LEASE`) and a worker takes it, as any job a dead worker
  held;
- the write is not made (a conflict, a refusal): `drop` settles the job as skipped; should the process die first, the
  worker finds no timeline entry and skips it.
A job that runs again (a retry after a partial run, or the writer and a worker both, past a lease) stores nothing twice:
`events.fan_out` is idempotent by the job's key.
"""

import logging
from datetime import timedelta
from typing import Any

from bson import ObjectId
from pymongo.asynchronous.database import AsyncDatabase

from desk import state
from desk.jobs import queue
from desk.jobs.table import Context, Function, Job, Result, Skipped
from desk.jobs.worker import OWNER, Worker
from desk.logs import failure
from desk.notifications import events
from desk.work_orders import repository as orders_repo

TASK = "notifications.fan_out"
# How long the writer holds its job before a worker may take it: the write and the fan-out take milliseconds, so
# this is how late the notifications of a write whose process died come (plus a worker's poll).
LEASE = timedelta(seconds=30)
# 1-2 s, 2-4 s ... about 4 minutes between the last tries: some 8 minutes of a failing database before a dead letter
MAX_TRIES = 9
Doc = dict[str, Any]
log = logging.getLogger(__name__)


def tasks() -> list[Function]:
    return [Function(TASK, run, max_tries=MAX_TRIES, lease=LEASE)]


async def announce(db: AsyncDatabase, news: Doc | None) -> Doc | None:
    """The fan-out job of a write about to be made, held by this process; None when the write tells no one."""
    if news is None:
        return None
    key = news["entry"] or ObjectId()  # a flag names no timeline entry: its job is keyed by itself
    at = state.current().clock.now()
    return await queue.enqueue_held(db, TASK, key, news, owner=OWNER, lease=LEASE, at=at)


async def deliver(db: AsyncDatabase, held: Doc | None) -> None:
    """Run the job of a write that was made, here and now, and settle it; never raises: a failure is the worker's to
    retry, and the write stands."""
    if held is None:
        return
    desk = state.current()
    made = held | {"payload": held["payload"] | {"made": True}}  # in hand only: the worker's run checks for itself
    try:
        await Worker(functions=tasks(), clock=desk.clock).perform(Context(db=db, settings=desk.settings), made)
    except Exception as error:  # settling failed too: the lease lapses and a worker runs the job
        log.error("notifications fan-out not settled (%s)", failure(error))


async def made(db: AsyncDatabase, news: Doc | None) -> None:
    """The fan-out of a write made already (the triage agent's flag, whose pass is itself a job), run now."""
    await deliver(db, await announce(db, news))


async def drop(db: AsyncDatabase, held: Doc | None) -> None:
    """The write was not made: its job has nothing to do."""
    if held is not None:
        await queue.settle(db, held, "skipped", error="not_written", at=state.current().clock.now())


async def run(ctx: Context, job: Job) -> Result:
    news = job.payload or {}
    if not news.get("made") and news.get("entry") and not await orders_repo.has_entry(ctx.db, news["entry"]):
        # its writer died before the write, or the write was refused: there is nothing to tell
        return Skipped("not_written")
    await events.tell(ctx.db, news, source=job.key, again=job.attempts > 1 or not news.get("made"))
    return None
