"""How much one person may write in a minute: a sliding window per person, shared by every web process.

One viewer once posted 400 comments in a second and a half, each pushed to every open screen. Every
service that lets a person add to what others see calls `admit(db=db, actor=actor)` before it writes:
work orders (created, changed, deleted) and comments today, and uploads (attachments) when they come.
It is enforced in the services, so the pages, the API and the copilot's writes all meet it.

The window slides: at most DESK_WRITES_PER_MINUTE writes in any 60 seconds, not per clock minute (which
would let twice as many through around a minute's turn). The person's write times in the window are one
document, changed by compare-and-set, so writes sent together cannot all slip through.
"""

from datetime import datetime, timedelta
from math import ceil
from typing import NoReturn

from pymongo.asynchronous.database import AsyncDatabase

from desk.actors import Actor
from desk.auth import repository as repo
from desk.config import get_settings
from desk.errors import RateLimited
from desk.schema import now

WINDOW = timedelta(minutes=1)
RACES = 5  # a person's own writes sent together, each retried after losing to another


async def admit(*, db: AsyncDatabase, actor: Actor) -> None:
    """Count one write by the actor; RateLimited (with when to try again) past the limit in the last minute."""
    limit = get_settings().desk_writes_per_minute
    key = f"writes:{actor.id}"
    for _ in range(RACES):
        moment = now()
        state = await repo.get_limit(db, key) or {}
        recent = [at for at in state.get("at", []) if at > moment - WINDOW]
        if len(recent) >= limit:  # a slot frees when enough of these have left the window
            _refuse(limit, leaves=recent[len(recent) - limit], moment=moment)
        if await repo.swap(
            db, key, seen=state.get("v", 0), state={"at": [*recent, moment], "expiresAt": moment + WINDOW}
        ):
            return
    _refuse(limit, leaves=None, moment=now())


def _refuse(limit: int, *, leaves: datetime | None, moment: datetime) -> NoReturn:
    retry_after = max(1, ceil((leaves + WINDOW - moment).total_seconds())) if leaves else 1
    what = f"Too many new orders, comments and edits from you in the last minute (at most {limit})"
    raise RateLimited(what, retry_after=retry_after)
