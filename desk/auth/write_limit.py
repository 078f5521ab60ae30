"""How much one person may write in a minute: a sliding window per person, shared by every web process.

One viewer once posted 400 comments in a second and a half, each pushed to every open screen. Every
service that lets a person add to what others see calls `admit(db=db, actor=actor)` before it writes:
work orders (created, changed, deleted) and comments today, and uploads (attachments) when they come.
It is enforced in the services, so the pages, the API and the copilot's writes all meet it.

The window slides: at most DESK_WRITES_PER_MINUTE writes in any 60 seconds, not per clock minute (which
would let twice as many through around a minute's turn). A person's newest write times are one document,
added to by one conditional update that counts those in the window: writes sent together cannot all slip
through, and none under the limit is turned away for having come at the same time as another.
"""

from datetime import datetime, timedelta
from math import ceil
from typing import NoReturn

from pymongo.asynchronous.database import AsyncDatabase

from desk import state
from desk.actors import Actor
from desk.auth import repository as repo
from desk.config import get_settings
from desk.errors import RateLimited

WINDOW = timedelta(minutes=1)
TRIES = 3  # a try is lost only to a full window, or to another write starting the person's document


async def admit(*, db: AsyncDatabase, actor: Actor) -> None:
    """Count one write by the actor; RateLimited (with when to try again) past the limit in the last minute."""
    limit = get_settings().desk_writes_per_minute
    key, clock = f"writes:{actor.id}", state.current().clock  # the Desk's: a test moves it past the window
    for _ in range(TRIES):
        moment = clock.now()
        # kept a window longer than it counts: the database expires it by the system's clock, which the
        # Desk's may trail (a test's starts at the top of the minute)
        since, expires_at = moment - WINDOW, moment + 2 * WINDOW
        if await repo.add_time(db, key, at=moment, since=since, keep=limit, expires_at=expires_at):
            return
        if await repo.start_times(db, key, at=moment, expires_at=expires_at):
            return
        stored = await repo.get_limit(db, key) or {}
        recent = sorted(at for at in stored.get("at", []) if at > since)
        if len(recent) >= limit:  # a slot frees when enough of these have left the window
            _refuse(limit, leaves=recent[len(recent) - limit], moment=moment)
        # room again: a write left the window, or the document another write started is there now
    _refuse(limit, leaves=None, moment=clock.now())


def _refuse(limit: int, *, leaves: datetime | None, moment: datetime) -> NoReturn:
    retry_after = max(1, ceil((leaves + WINDOW - moment).total_seconds())) if leaves else 1
    what = f"Too many new orders, comments and edits from you in the last minute (at most {limit})"
    raise RateLimited(what, retry_after=retry_after)
