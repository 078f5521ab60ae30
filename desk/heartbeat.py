"""The worker's heartbeat: each worker process writes when it last beat; `desk worker --check` reads it.

A worker whose event loop is stuck, or whose database is gone, stops beating while its process lives on:
only the beat tells a container's healthcheck that the worker no longer works. One document per host
(a container's hostname is its own), so each worker container's healthcheck reads its own worker's.
"""

import os
import socket
from datetime import datetime, timedelta

from pymongo.asynchronous.database import AsyncDatabase

from desk.schema import now

COLLECTION = "worker_heartbeats"
BEAT_SECONDS = 10
FRESH = timedelta(seconds=60)  # six beats: a slow minute on a busy host is not yet a dead worker


def worker_name() -> str:
    """This worker's name in the heartbeats: its host's."""
    return socket.gethostname()


async def beat(db: AsyncDatabase, *, worker: str) -> None:
    """Record that `worker` is alive and working now."""
    await db[COLLECTION].update_one({"_id": worker}, {"$set": {"at": now(), "pid": os.getpid()}}, upsert=True)


async def last_beat(db: AsyncDatabase, *, worker: str) -> datetime | None:
    """When `worker` last beat; None when it never has."""
    found = await db[COLLECTION].find_one({"_id": worker}, {"at": 1})
    return found["at"] if found else None


async def check(db: AsyncDatabase, *, worker: str) -> tuple[bool, str]:
    """Whether `worker` beat within FRESH, with one line saying so for the person (or healthcheck) asking."""
    at = await last_beat(db, worker=worker)
    if at is None:
        return False, f"worker {worker}: no heartbeat in the database (is the worker running on this database?)"
    age = (now() - at).total_seconds()
    if age > FRESH.total_seconds():
        return False, f"worker {worker}: last heartbeat {age:.0f} s ago (stale after {FRESH.total_seconds():.0f} s)"
    return True, f"worker {worker}: last heartbeat {age:.0f} s ago"
