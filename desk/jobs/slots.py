"""The `job_slots` collection: a task's desk-wide concurrency, as leases in the database; the only code touching it.

A task that declares `desk_concurrency = N` owns N slot documents (`<task>:0` ... `<task>:N-1`). A worker
that has claimed a job of the task takes a free one (or one whose lease lapsed; none free: the job goes
back, uncounted), renews it with the job's lease and, once the job is settled, hands it to its next job of
the same poll or releases it (desk/jobs/worker.py), so however many worker processes run, at most N jobs of
the task run at once. A worker that dies holding a slot holds it
until its lease lapses. Like a job, a slot moves its `fence` at every take: a worker that lost its slot
can neither renew nor release it.
"""

import asyncio
import contextlib
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from pymongo import ReturnDocument
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import BulkWriteError

Doc = dict[str, Any]


def _slots(db: AsyncDatabase):
    return db["job_slots"]


async def take(db: AsyncDatabase, task: str, limit: int, *, owner: str, lease: timedelta, at: datetime) -> Doc | None:
    """One of the task's `limit` slots, leased to `owner` until `at + lease`; None while every one is held."""
    names = [f"{task}:{n}" for n in range(limit)]
    free = {"_id": {"$in": names}, "$or": [{"owner": None}, {"leasedUntil": {"$lt": at}}]}
    update = {"$set": {"owner": owner, "leasedUntil": at + lease}, "$inc": {"fence": 1}}
    slot = await _slots(db).find_one_and_update(free, update, return_document=ReturnDocument.AFTER)
    if slot is not None:
        return slot
    # none free: perhaps the slots are not there yet (the task's first take, or a larger limit than before)
    made = [{"_id": name, "task": task, "owner": None, "leasedUntil": None, "fence": 0} for name in names]
    with contextlib.suppress(BulkWriteError):  # those already there: each slot is made once, whoever races to it
        await _slots(db).insert_many(made, ordered=False)
    return await _slots(db).find_one_and_update(free, update, return_document=ReturnDocument.AFTER)


async def renew(db: AsyncDatabase, slot: Doc, lease: timedelta, *, at: datetime) -> bool:
    """Extend our slot's lease; False when it lapsed and another worker took it."""
    result = await _slots(db).update_one(_ours(slot), {"$set": {"leasedUntil": at + lease}})
    return result.matched_count == 1


async def release(db: AsyncDatabase, slot: Doc) -> None:
    """Free our slot for the next job (a no-op when it lapsed and was taken meanwhile)."""
    await _slots(db).update_one(_ours(slot), {"$set": {"owner": None, "leasedUntil": None}})


def _ours(slot: Doc) -> Doc:
    return {"_id": slot["_id"], "fence": slot["fence"]}


@dataclass
class Held:
    """A slot a worker holds (desk/jobs/worker.py): the slot as taken, when its lease was last renewed, and whether a
    renewal found it another worker's."""

    doc: dict[str, Any]
    renewed: datetime
    lost: bool = False


async def release_all(db: AsyncDatabase, spares: list[Held]) -> None:
    """Let go of the slots kept for a claim that found nothing (or that will not come: the worker stops)."""
    held, spares[:] = list(spares), []
    await asyncio.gather(*(release(db, slot.doc) for slot in held))
