"""What a worker's table is made of, in arq's shape: queued `Function`s, `CronJob`s on a clock, the `Job` a
function is handed, and what its run came to (`Done`, `Skipped`, `Later`, `Retry`, `Failed`), as data."""

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import timedelta

from bson import ObjectId
from pymongo.asynchronous.database import AsyncDatabase

from desk.config import Settings


@dataclass(frozen=True)
class Context:
    """What every job gets: the database and the settings of this worker process, and whether it is stopping."""

    db: AsyncDatabase
    settings: Settings
    stopping: asyncio.Event = field(default_factory=asyncio.Event)  # set: a job that loops finishes and returns
    # One per poll of the queue (`Worker.run_due` makes a new one): what a task learnt in this poll (its look before
    # a claim) may stand for the poll's next claims, never for the next poll's.
    poll: object = field(default_factory=object, compare=False)


@dataclass(frozen=True)
class Job:
    """A claimed job, as its function is handed it."""

    id: ObjectId
    key: ObjectId  # what the job is about (its payloadRef)
    attempts: int  # this one included
    still_ours: Callable[[], Awaitable[bool]]  # renews the lease; False: another worker has taken the job over
    payload: dict | None = None  # what the job was stored with beside its key (`queue.enqueue_held`), if anything


@dataclass(frozen=True)
class Done:
    """The job is done."""


@dataclass(frozen=True)
class Skipped:
    """The job had nothing to do (its reason is kept, as the job's `lastError`)."""

    reason: str | None = None


@dataclass(frozen=True)
class Later:
    """Not now, and not the job's fault (a switch is off, a cap is reached, a service it needs is down): it waits,
    its attempt not counted; due again at once, or `after` this long (a service that said when to come back).
    `error`, if any, is kept as the job's `lastError` meanwhile: why it waits. `strike`: perhaps the job's fault
    after all (see below)."""

    error: str | None = None
    after: timedelta | None = None
    strike: str | None = None  # set: a strike against the job, and the reason its dead letter gives (see below)


# A `Later` with a `strike` is a failure that may yet be the job's own: a service it needs failed on it while it
# served other jobs. The attempt is not counted, but the strike is (the job's `strikes`), and the job waits a
# backoff; its `max_tries`-th strike makes it a dead letter with the strike's reason. Without strikes such a job
# would be tried for ever.


@dataclass(frozen=True)
class Retry:
    """A failed attempt: tried again after a backoff (or `after`, when the failure said how long to wait), or a
    dead letter once `max_tries` are spent."""

    error: str
    after: timedelta | None = None


@dataclass(frozen=True)
class Failed:
    """A failure no retry can mend (a request refused as it stands): a dead letter at once, with its reason."""

    error: str


Result = Done | Skipped | Later | Retry | Failed


@dataclass(frozen=True)
class Function:
    """A task the queue runs: `run(ctx, job)` for each job whose `type` is `name` (arq's `func`).

    `ready(ctx)`, read before every claim: False leaves the task's jobs pending (a kill switch, working
    hours, a spend cap). `lease`: how long a claim holds the job before another worker may take it over.
    `desk_concurrency`: at most this many of its jobs run at once across every worker process (slots leased
    in the database, desk/jobs/slots.py); None: only each worker's own `concurrency` limits it.
    `idle(ctx)`: called when a poll has found nothing more to claim, and when the worker stops (what the task
    left for its next job, such as its last call's settling, is written then).
    """

    name: str
    run: Callable[[Context, Job], Awaitable[Result | None]]  # None: done
    max_tries: int = 3
    lease: timedelta = timedelta(seconds=15)
    ready: Callable[[Context], Awaitable[bool]] | None = None
    desk_concurrency: int | None = None
    idle: Callable[[Context], Awaitable[None]] | None = None


@dataclass(frozen=True)
class CronJob:
    """A job on a clock: `run(ctx)` every `interval` seconds, and once when the worker starts (arq's `cron`).

    `outlasts_interval`: a run is meant to go on past its interval (the queue's poll works through a
    backlog), so APScheduler's skipped ticks are expected, not worth its warning every interval.
    """

    name: str
    run: Callable[[Context], Awaitable[None]]
    interval: float
    outlasts_interval: bool = False
