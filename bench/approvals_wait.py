"""What waiting for decisions costs (issue 15, item 5): N approvals waiting at once, database commands a second.

Each waiting approval is a real run (stored, leased) with a staged change, waited on by the runtime's
own `Staging._decision`, on the embedded database. Three figures:

- commands a second while all N wait and nothing happens (pymongo's command monitoring counts every
  command the client sends), and per waiting approval;
- a decide in this process: from its return to the run having the decision (the run's event, no poll);
- a decide made elsewhere (no event here, as from another web process): the same, via the run's mark.

Run by hand, never in CI (the machine is shared: the load average is printed):

    .venv/bin/python -m bench.approvals_wait [--approvals 50] [--seconds 10]
"""

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from datetime import timedelta
from pathlib import Path

from bson import ObjectId
from pymongo import AsyncMongoClient

from desk.actors import Actor
from desk.agent.copilot import approvals, live
from desk.agent.copilot.record import CopilotRecord
from desk.agent.copilot.staging import Staging
from desk.agent.core.record import LEASE
from desk.agent.core.state import RunState
from desk.agent.core.store import agent_runs
from desk.app import ensure_indexes
from desk.db.embedded import EmbeddedMongo
from tests.commands import Commands


async def _elsewhere(_tool_call_id: str) -> None:
    """No wake-up in this process: what a decide made in another web process looks like here."""


async def waiting(db, owner: Actor) -> tuple[Staging, dict]:
    """One stored run with one staged change, ready to be waited on."""
    run = agent_runs.new_run(session_id=None, user_id=ObjectId(owner.id), mode="copilot", model="bench", lease=LEASE)
    await agent_runs.insert_run(db, run)
    record = CopilotRecord(db=db, run=run)
    record.stored = True
    staged = await record.stage(
        record_id=ObjectId(),
        tool="update_work_order",
        call_id="call_0",
        args={"id": str(ObjectId()), "priority": "urgent"},
        pre_image={"title": "Tap", "priority": "medium"},
        version=1,
        ttl=timedelta(minutes=10),
    )

    async def person_now() -> Actor:
        return owner

    return Staging(record, RunState(), timedelta(minutes=10), person_now, lambda: False), staged


async def decide_all(db, owner: Actor, waits: list, *, here: bool) -> list[float]:
    """Start N waits, decide every one, return each run's delay (seconds) from its decide to its decision."""
    tasks = [asyncio.ensure_future(staging._decision(staged)) for staging, staged in waits]
    await asyncio.sleep(1.5)  # all waiting, at no particular point of their second
    real = live.decided
    if not here:
        live.decided = _elsewhere  # as if decided in another process: no event in this one
    delays = []
    try:
        for (_, staged), task in zip(waits, tasks, strict=True):
            await approvals.decide(db=db, actor=owner, tool_call_id=str(staged["_id"]), approve=True)
            decided = time.monotonic()
            await task
            delays.append(time.monotonic() - decided)
    finally:
        live.decided = real
    return delays


async def measure(uri: str, n: int, seconds: float) -> None:
    counter = Commands()
    db = AsyncMongoClient(uri, tz_aware=True, event_listeners=[counter])["bench_approvals"]
    await ensure_indexes(db)
    owner = Actor(id=str(ObjectId()), role="user")
    waits = [await waiting(db, owner) for _ in range(n)]
    tasks = [asyncio.ensure_future(staging._decision(staged)) for staging, staged in waits]
    await asyncio.sleep(2)  # settled into their rhythm
    before, started = len(counter.sent), time.monotonic()
    await asyncio.sleep(seconds)
    rate = (len(counter.sent) - before) / (time.monotonic() - started)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    print(f"{n} approvals waiting: {rate:.1f} database commands/s ({rate / n:.2f} per approval a second)")
    print("  (the 0.2 s poll it replaces: a read and a lease renewal every 0.2 s, 10/s per approval)")

    for here, what in ((True, "decide in this process"), (False, "decide in another process")):
        delays = await decide_all(db, owner, [await waiting(db, owner) for _ in range(n)], here=here)
        delays.sort()
        p95 = delays[int(len(delays) * 0.95) - 1]
        median, worst = statistics.median(delays) * 1000, delays[-1] * 1000
        print(f"{what}: median {median:.1f} ms, p95 {p95 * 1000:.1f} ms, max {worst:.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--approvals", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory(prefix="desk-approvals-bench-") as tmp, EmbeddedMongo(Path(tmp) / "mongo") as uri:
        asyncio.run(measure(uri, args.approvals, args.seconds))


if __name__ == "__main__":
    main()
