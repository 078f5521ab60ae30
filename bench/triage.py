"""Triage benchmark: how fast do worker processes turn new orders into suggestions? (issue 18)

Real worker processes (`python scheduler.py`, that is `desk worker`) on the embedded database, a fake
OpenAI-compatible provider in its own process answering one `triage_propose` call (at once, or after L
seconds). Four parts:

- burst: N orders created while the kill switch is off, then the switch on (t0), with 1 and 2
  workers and an instant provider: events/s from t0 to the last suggestion stored, and p95 of
  "created (or t0, if later) -> suggestion stored";
- floor, in the same run: 1 and 2 processes of a bare loop (2 at once each, as AGENT_CONCURRENCY)
  doing only the database operations of a pass (claim, read order and owner, write the suggestion,
  ack, ledger: 6 commands) on N orders of their own: no framework, no run record, no checks, no
  model call;
- floor with the run record: the same loop also writing what the spec requires of every pass
  (§9, SEC-11): the AgentRun, its prompt's messages, the answer and its tool call, the run's end
  with its usage (11 commands). The desk sends 14 a pass while it drains a backlog, 18 for a poll's
  first (tests/triage/test_commands.py): those, plus the lease and kill-switch checks before the
  suggestion, the spend reserved before the call (the last call's settling in the same command), and
  the suggestion's change-feed entry (2) that open pages follow; a poll's first pass also looks at the
  policy and switch, and takes the desk-wide concurrency slot that the poll lets go at its end, with the
  last settling;
- slow provider: L = 0.5 s a call, one worker at C = 2: events/s (target >= 0.9 x C / L);
- steady: one order a second for S seconds, one worker, the slow provider: p95 create -> suggestion
  (target <= AGENT_POLL_INTERVAL_MS + L + 1 s);
- outage (`--outage`, on its own, bench/triage_outage.py): a 10-minute provider outage with 300 orders
  arriving: no dead letters, and everything triaged within 2 minutes of recovery.

First it prints the database commands of a worker's poll over 1 and over 4 orders, counted as the test that
pins them counts them (tests/triage/test_commands.py, through tests/commands.py); --counts-only stops there.

Run by hand, never in CI (the machine is shared: load averages are printed):

    .venv/bin/python -m bench.triage [--counts-only] [--orders 1000] [--slow-orders 60] [--steady 60] [--poll-ms 1000]
"""

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bson import ObjectId
from pymongo import ASCENDING, AsyncMongoClient, ReturnDocument, UpdateOne
from pymongo.asynchronous.database import AsyncDatabase

from bench.harness import free_port, running, serve
from bench.workers import Workers, worker_settings, workers
from desk.actors import Actor, Role
from desk.agent.core.provider import Provider
from desk.agent.triage import policy
from desk.app import ensure_indexes
from desk.config import Settings, use_settings
from desk.db.embedded import EmbeddedMongo
from desk.users import service as users_service
from desk.users.models import UserCreate
from desk.work_orders import service as work_orders
from desk.work_orders.models import WorkOrderCreate
from tests.commands import of_one_poll
from tests.fake_provider import FakeProvider, Turn

LATENCY = 0.5  # L, seconds a slow call takes
CONCURRENCY = 2  # C, AGENT_CONCURRENCY
ARGS = {"summary": "Water leaking under the kitchen sink.", "suggestedPriority": "high", "flagForDispatcher": False}


# --- the fake provider (its own process, under uvicorn) ---


# The tests' fake: one `triage_propose` call to every request, in one piece after TRIAGE_FAKE_DELAY seconds.
fake_provider = FakeProvider(
    always=Turn.tool_calls(("triage_propose", ARGS), pieces=1, usage=(400, 40))
    .at_once()
    .with_delay(float(os.environ.get("TRIAGE_FAKE_DELAY", "0"))),
    remember=False,
)


def serve_fake(port: int, delay: float) -> subprocess.Popen:
    return serve("bench.triage:fake_provider", port, os.environ | {"TRIAGE_FAKE_DELAY": str(delay)})


# --- orders, and what became of them ---


async def new_db(uri: str, name: str) -> AsyncDatabase:
    db = AsyncMongoClient(uri, tz_aware=True)[name]
    await ensure_indexes(db)
    return db


async def owner_of(db: AsyncDatabase) -> Actor:
    password = "bench-password-" + ObjectId().binary.hex()
    data = UserCreate(email=f"b{ObjectId()}@bench.local", name="Bench", role="user", password=password)
    user = await users_service.register(db=db, data=data)
    return Actor(id=user.id, role=Role.USER)


async def create(db: AsyncDatabase, owner: Actor, n: int) -> None:
    """`n` orders through the service (each emits its outbox event), 10 at a time."""
    for start in range(0, n, 10):
        await asyncio.gather(
            *[
                work_orders.create(db=db, actor=owner, data=WorkOrderCreate(title=f"Order {k}", description="Leak."))
                for k in range(start, min(n, start + 10))
            ]
        )


async def switch(db: AsyncDatabase, enabled: bool) -> datetime:
    """The triage agent's own switch in its policy (the config seeded first, as a worker would); the desk-wide kill
    switch holds events the same way, and is tested, not timed (tests/triage/test_kill_switch.py)."""
    await policy.current(db, Settings())
    await db["agent_config"].update_one({"_id": "triage"}, {"$set": {"enabled": enabled}})
    return datetime.now(UTC)


async def wait_done(db: AsyncDatabase, n: int, *, within: float = 600) -> None:
    deadline = time.monotonic() + within
    while await db["outbox_events"].count_documents({"status": "done"}) < n:
        if time.monotonic() > deadline:
            raise RuntimeError("the events did not all end in time")
        await asyncio.sleep(0.1)


async def figures(db: AsyncDatabase, t0: datetime | None) -> tuple[float, float, int, float]:
    """Events/s from t0 (else the first order's creation) to the last suggestion; p95 ms; how many; and events/s
    from the first suggestion to the last (the rate once running, without the wait for the first poll)."""
    created = {o["_id"]: o["createdAt"] async for o in db["work_orders"].find({}, {"createdAt": 1})}
    found = db["triage_suggestions"].find({}, {"workOrderId": 1, "createdAt": 1})
    stored = [(s["workOrderId"], s["createdAt"]) async for s in found]
    start = t0 or min(created.values())
    waits = [(at - max(created[oid], start)).total_seconds() * 1000 for oid, at in stored]
    times = sorted(at for _, at in stored)
    running_rate = (len(times) - 1) / max((times[-1] - times[0]).total_seconds(), 1e-3)
    return len(stored) / (times[-1] - start).total_seconds(), percentile(waits, 95), len(stored), running_rate


def percentile(values: list[float], p: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[p - 1] if len(values) > 1 else values[0]


# --- the desk's workers ---


async def burst(uri: str, pool: Workers, name: str, n: int, processes: int) -> tuple[float, float, int, float]:
    db = await new_db(uri, name)
    await switch(db, False)
    await create(db, await owner_of(db), n)
    # AGENT_CONCURRENCY is the desk's: C a worker, as the floor's processes run C each
    desk_wide = str(CONCURRENCY * processes)
    started = [pool.start(wait=False, MONGODB_DB=name, AGENT_CONCURRENCY=desk_wide) for _ in range(processes)]
    for worker in started:
        worker.wait_started()
    t0 = await switch(db, True)
    await wait_done(db, n)
    for worker in started:
        worker.stop()
    return await figures(db, t0)


async def steady(uri: str, pool: Workers, name: str, seconds: int) -> tuple[float, float, int, float]:
    db = await new_db(uri, name)
    owner = await owner_of(db)
    worker = pool.start(MONGODB_DB=name)
    begin = time.monotonic()
    for k in range(seconds):
        await asyncio.sleep(max(0.0, begin + k - time.monotonic()))
        await work_orders.create(db=db, actor=owner, data=WorkOrderCreate(title=f"Order {k}"))
    await wait_done(db, seconds)
    worker.stop()
    return await figures(db, None)


# --- the floor: the same database operations, nothing else ---


async def floor_loop(db: AsyncDatabase, *, record: bool) -> None:
    """Claim, read the order and its owner, store the suggestion, ack, charge the ledger; until none is left.

    `record`: also the run record (the run, its two prompt messages at once, the answer and its tool call
    side by side, the run's end with its usage), as a pass must keep it.
    """
    lease = timedelta(seconds=15)
    while True:
        moment = datetime.now(UTC)
        event = await db["outbox_events"].find_one_and_update(
            {
                "$or": [  # the queue's claim names the tasks that are ready, in each branch
                    {"status": "pending", "availableAt": {"$lte": moment}, "type": "work_order.created"},
                    {"status": "processing", "leasedUntil": {"$lt": moment}, "type": "work_order.created"},
                ],
            },
            {
                "$set": {
                    "status": "processing",
                    "leasedUntil": moment + lease,
                    "leaseOwner": "floor",
                    "updatedAt": moment,
                },
                "$inc": {"attempts": 1, "fence": 1},
            },
            sort=[("availableAt", ASCENDING), ("_id", ASCENDING)],
            return_document=ReturnDocument.AFTER,
        )
        if event is None:
            return
        order = await db["work_orders"].find_one({"_id": event["payloadRef"]})
        await db["users"].find_one({"_id": order["ownerId"]})
        run_id = ObjectId()
        if record:
            await _open_run(db, run_id, order)
        await db["triage_suggestions"].insert_one(
            {
                "workOrderId": order["_id"],
                "eventId": event["_id"],
                "runId": run_id,
                **ARGS,
                "createdAt": datetime.now(UTC),
            }
        )
        if record:
            await _close_run(db, run_id)
        fenced = {"_id": event["_id"], "status": "processing", "fence": event["fence"]}
        await db["outbox_events"].update_one(
            fenced, {"$set": {"status": "done", "leasedUntil": None, "updatedAt": datetime.now(UTC)}}
        )
        day = moment.date().isoformat()
        ledger = [
            UpdateOne({"_id": key}, {"$inc": {"spentUsd": 0.0001}}, upsert=True)
            for key in (f"agent:triage:{day}", f"global:{day}")
        ]
        await db["agent_spend"].bulk_write(ledger, ordered=False)


async def _open_run(db: AsyncDatabase, run_id: ObjectId, order: dict) -> None:
    """The run, then its prompt (system and user message in one insert): a message never names an unstored run."""
    moment = datetime.now(UTC)
    await db["agent_runs"].insert_one(
        {
            "_id": run_id,
            "mode": "autonomous",
            "agentName": "triage",
            "status": "running",
            "workOrderId": order["_id"],
            "startedAt": moment,
            "leaseUntil": moment + timedelta(seconds=15),
        }
    )
    prompt = [
        ("system", "You are the Work Order Desk triage agent."),
        ("user", f"Triage this work order. {order['title']}"),
    ]
    await db["agent_messages"].insert_many(
        [{"runId": run_id, "role": role, "content": content, "createdAt": moment} for role, content in prompt]
    )


async def _close_run(db: AsyncDatabase, run_id: ObjectId) -> None:
    """The answer and its tool call side by side, then the run's end with its usage."""
    moment = datetime.now(UTC)
    await asyncio.gather(
        db["agent_messages"].insert_one({"runId": run_id, "role": "assistant", "content": None, "createdAt": moment}),
        db["agent_tool_calls"].insert_one(
            {"runId": run_id, "tool": "triage_propose", "args": ARGS, "outcome": "ok", "createdAt": moment}
        ),
    )
    await db["agent_runs"].update_one(
        {"_id": run_id, "status": "running"},
        {
            "$set": {"status": "complete", "finishedAt": moment, "leaseUntil": None},
            "$inc": {"inputTokens": 400, "outputTokens": 40, "costUsd": 0.0001, "steps": 1},
        },
    )


async def floor_process(uri: str, name: str, start_at: float, record: bool) -> None:
    db = AsyncMongoClient(uri, tz_aware=True)[name]
    await db.command("ping")
    await asyncio.sleep(max(0.0, start_at - time.time()))
    await asyncio.gather(*[floor_loop(db, record=record) for _ in range(CONCURRENCY)])


async def floor(uri: str, name: str, n: int, processes: int, *, record: bool) -> tuple[float, float, int, float]:
    db = await new_db(uri, name)
    await create(db, await owner_of(db), n)
    start_at = time.time() + 3  # every process has started and connected by then
    command = [sys.executable, "-m", "bench.triage", "--floor-process", uri, name, str(start_at), str(int(record))]
    children = [subprocess.Popen(command) for _ in range(processes)]  # noqa: S603, ASYNC220 - this module
    for child in children:
        await asyncio.to_thread(child.wait)
    return await figures(db, datetime.fromtimestamp(start_at, UTC))


# --- the run ---


def line(title: str, figures: tuple[float, float, int, float], note: str = "") -> None:
    rate, p95, n, running_rate = figures
    print(
        f"{title:<42} {rate:7.1f} events/s ({running_rate:6.1f} first->last)   p95 {p95:7.0f} ms   ({n} orders){note}",
        flush=True,
    )


async def poll_commands(uri: str, instant: str) -> None:
    """The database commands of a worker's poll over 1 and over 4 due orders, as tests/triage/test_commands.py counts
    (and pins) them: a worker in this process, one pass at a time, on a fresh database each, the instant fake."""
    sent = {}
    for orders in (1, 4):
        name = f"counts{orders}"
        settings = Settings(
            **{k.lower(): v for k, v in worker_settings(mongodb_uri=uri, db_name=name, provider_url=instant).items()}
        )
        use_settings(settings)  # a fresh Desk: the breaker's first read, as a new worker process makes
        db = await new_db(uri, name)
        await create(db, await owner_of(db), orders)
        provider = Provider.from_settings(settings)
        try:
            sent[orders] = len(await of_one_poll(uri, name, settings, provider, orders=orders))
        finally:
            await provider.aclose()
            await db.client.close()
    further = (sent[4] - sent[1]) // 3
    print(
        f"database commands of a worker's poll: {sent[1]} over 1 order, {sent[4]} over 4 ({further} each further pass)"
    )


async def measure(args: argparse.Namespace, uri: str, tmp: Path, instant: str, slow: str) -> None:
    await poll_commands(uri, instant)
    if args.counts_only:
        return
    common = {"AGENT_POLL_INTERVAL_MS": str(args.poll_ms), "AGENT_CONCURRENCY": str(CONCURRENCY)}
    print(f"load average {os.getloadavg()}; AGENT_POLL_INTERVAL_MS={args.poll_ms}", flush=True)
    settings = worker_settings(mongodb_uri=uri, db_name="x", provider_url=instant, **common)
    with workers(tmp / "instant", **settings) as pool:
        for processes in (1, 2):
            desk = await burst(uri, pool, f"burst{processes}", args.orders, processes)
            line(f"desk, {processes} worker(s), instant provider", desk)
            base = await floor(uri, f"floor{processes}", args.orders, processes, record=False)
            line(f"floor, {processes} process(es)", base, f"   desk/floor {desk[0] / base[0]:.2f} (target >= 0.80)")
            kept = await floor(uri, f"floorrec{processes}", args.orders, processes, record=True)
            line(f"floor with the run record, {processes} process(es)", kept, f"   desk/floor {desk[0] / kept[0]:.2f}")
    settings = worker_settings(mongodb_uri=uri, db_name="x", provider_url=slow, **common)
    with workers(tmp / "slow", **settings) as pool:
        target = 0.9 * CONCURRENCY / LATENCY
        slow_burst = await burst(uri, pool, "slow", args.slow_orders, 1)
        line(f"desk, 1 worker, L={LATENCY:g} s, C={CONCURRENCY}", slow_burst, f"   target >= {target:.2f} events/s")
        target_ms = args.poll_ms + LATENCY * 1000 + 1000
        line(
            "desk, 1 worker, 1 order/s, L=0.5 s",
            await steady(uri, pool, "steady", args.steady),
            f"   target p95 <= {target_ms:.0f} ms",
        )
    print(f"load average {os.getloadavg()}", flush=True)


def main() -> None:
    if len(sys.argv) == 6 and sys.argv[1] == "--floor-process":
        asyncio.run(floor_process(sys.argv[2], sys.argv[3], float(sys.argv[4]), sys.argv[5] == "1"))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--orders", type=int, default=1000, help="orders created at once (burst and floor)")
    parser.add_argument("--slow-orders", type=int, default=60, help="orders for the slow provider's throughput")
    parser.add_argument("--steady", type=int, default=60, help="seconds (= orders) of one order a second")
    parser.add_argument("--poll-ms", type=int, default=1000, help="AGENT_POLL_INTERVAL_MS of the workers")
    parser.add_argument("--counts-only", action="store_true", help="print the commands of a poll, untimed")
    parser.add_argument("--outage", action="store_true", help="run only the outage (bench/triage_outage.py)")
    parser.add_argument("--outage-seconds", type=float, default=600, help="how long the provider is down")
    parser.add_argument("--outage-orders", type=int, default=300, help="orders arriving during the outage")
    args = parser.parse_args()
    if args.outage:
        from bench import triage_outage  # noqa: PLC0415 - it imports this module

        triage_outage.main(seconds=args.outage_seconds, orders=args.outage_orders, poll_ms=args.poll_ms)
        return
    instant_port, slow_port = free_port(), free_port()
    with (
        tempfile.TemporaryDirectory(prefix="desk-triage-bench-") as tmp,
        EmbeddedMongo(Path(tmp) / "mongo") as uri,
        running(serve_fake(instant_port, 0)),
        running(serve_fake(slow_port, LATENCY)),
    ):
        urls = (f"http://127.0.0.1:{instant_port}/v1", f"http://127.0.0.1:{slow_port}/v1")
        asyncio.run(measure(args, uri, Path(tmp), *urls))


if __name__ == "__main__":
    main()
