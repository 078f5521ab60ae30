"""The fault suite with real processes (issue 18): workers die, pause and lose their database mid-pass.

Every case runs real `python scheduler.py` workers on a real database, against the scripted fake
provider on loopback, with a 1 s lease and a 200 ms poll, and ends with what a desk's people would
see: every order triaged exactly once (one suggestion, its event `done`, in auto-apply one change by
the triage agent), nothing lost, nothing doubled, no run left "running" for ever.

How each fault point is reached, from outside the worker (the desk has no hook for it):
- "at the claim" and "after the write, before the ack": the worker talks to the database through
  `WireProxy`, which reads the commands going by; when the database's reply to the claim (a
  findAndModify on outbox_events that returned an event) or to the write (the suggestion's insert,
  the order's update) comes back, the proxy SIGKILLs the worker and drops the reply: the database
  did it, the worker never learned it.
- "during the model call": the fake provider holds the answer (a delay before each frame); the
  worker is killed once the request has arrived.
- "paused past its lease": SIGSTOP once the model request has arrived, SIGCONT after a second
  worker has finished the event; the answer is waiting in the socket when it wakes.
- "a kill switch mid-call": the fake holds the answer; the test, as the admin's web process, turns
  AI off; the worker, a process of its own, must notice through the database.
- "the database restarts mid-pass": a database of its own, stopped and started again on the same
  data directory while the model call is held. It comes back on the same Unix socket, the address
  the worker knows, as the desk's own database does after a restart.
- "an outage": the fake answers 429 and 503 to every call until the test says the provider is back.
"""

import asyncio
import signal
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from bson import ObjectId
from pymongo import AsyncMongoClient
from pymongo.asynchronous.database import AsyncDatabase

from bench.workers import Worker, Workers, worker_settings, workers
from desk.agent.core import breaker
from desk.agent.triage import service as agents
from desk.app import ensure_indexes
from desk.db.embedded import EmbeddedMongo
from desk.users import service as users_service
from desk.users.models import UserCreate
from desk.work_orders import service as work_orders
from desk.work_orders.models import WorkOrderCreate, WorkOrderUpdate
from tests.conftest import TEST_DB
from tests.fake_provider import FakeProvider, Turn
from tests.helpers import PASSWORD, actor, until
from tests.triage.conftest import proposal
from tests.triage.wire_proxy import WireProxy

LEASE_MS, POLL_MS = 1000, 200
HELD = 5.0  # seconds the fake waits before each frame of a held answer (the worker goes first)
SETTLED = 20.0  # seconds the events get to end after the fault


@pytest.fixture
def pool(tmp_path: Path, mongo_uri: str, fake_provider: FakeProvider) -> Iterator[Workers]:
    """Workers on the test database with short leases; every one still running is stopped after the test."""
    settings = worker_settings(
        mongodb_uri=mongo_uri,
        db_name=TEST_DB,
        provider_url=fake_provider.url,
        AGENT_LEASE_MS=str(LEASE_MS),
        AGENT_POLL_INTERVAL_MS=str(POLL_MS),
        AGENT_SWEEP_INTERVAL_MS="500",  # a dead worker's run is ended soon after its lease lapses
        AGENT_MAX_ATTEMPTS="5",
    )
    with workers(tmp_path / "workers", **settings) as started:
        yield started


@pytest.fixture
def proxy(mongo_uri: str) -> Iterator[WireProxy]:
    """The proxy in front of the test database (one host: the embedded server's socket, or MONGODB_URI's)."""
    with WireProxy(mongo_uri) as running:
        yield running


async def orders_for(db: AsyncDatabase, count: int, **fields: object) -> tuple[dict, list[str]]:
    """A person and `count` new work orders of theirs (each emits its outbox event)."""
    user = await users_service.register(
        db=db, data=UserCreate(email=f"p{ObjectId()}@example.com", name="Pat", role="user", password=PASSWORD)
    )
    person = user.model_dump(by_alias=True)
    made = [
        await work_orders.create(db=db, actor=actor(person), data=WorkOrderCreate(title=f"Leak {n}", **fields))
        for n in range(count)
    ]
    return person, [order.id for order in made]


async def all_settled(db: AsyncDatabase, ids: list[str], within: float = SETTLED) -> None:
    refs = [ObjectId(i) for i in ids]

    async def done() -> bool:
        return await db["outbox_events"].count_documents({"payloadRef": {"$in": refs}, "status": "done"}) == len(refs)

    await until(done, what="every event done", within=within)


async def assert_triaged_once(db: AsyncDatabase, person: dict, ids: list[str], *, applied: bool = False) -> None:
    """Each order: one suggestion, from one of its runs, its event `done`; auto-apply: one change, by the agent."""
    for order_id in ids:
        oid = ObjectId(order_id)
        suggestions = await db["triage_suggestions"].find({"workOrderId": oid}).to_list()
        assert len(suggestions) == 1, f"{len(suggestions)} suggestions for one order"
        assert (await db["outbox_events"].find_one({"payloadRef": oid}))["status"] == "done"
        its_runs = {str(run["_id"]) for run in await db["agent_runs"].find({"workOrderId": oid}).to_list()}
        assert str(suggestions[0]["runId"]) in its_runs
        timeline = await work_orders.activity(db=db, actor=actor(person), order_id=order_id)
        changes = [entry for entry in timeline if entry.actor_kind == "system"]
        assert len(changes) == (1 if applied else 0)
        order = await work_orders.get(db=db, actor=actor(person), order_id=order_id)
        assert order.priority == ("urgent" if applied else "medium")
        assert suggestions[0]["applied"] is applied
        if applied:
            assert changes[0].run_id in its_runs


async def no_run_left_running(db: AsyncDatabase) -> None:
    async def none() -> bool:
        return await db["agent_runs"].count_documents({"agentName": "triage", "status": "running"}) == 0

    await until(none, what="the dead worker's run ended by the sweeper", within=SETTLED)


def _kill(victim: list[Worker]) -> None:
    victim[0].process.kill()


async def killed(worker: Worker, trap_fired) -> None:
    await until(trap_fired.is_set, what="the fault point", within=SETTLED)
    await until(lambda: worker.process.poll() is not None, what="the worker's death", within=5)
    assert worker.process.returncode == -signal.SIGKILL


async def test_a_worker_killed_at_the_claim_leaves_the_event_to_the_next_one(db, pool, proxy, mongo_uri, fake_provider):
    """Killed with the claim done in the database and its reply never read: the event waits out its lease."""
    person, ids = await orders_for(db, 2)
    fake_provider.script(*[proposal("high") for _ in ids])
    victim: list[Worker] = []  # the trap is set before the worker starts; it kills whoever this holds
    claim = proxy.trap("findAndModify", "outbox_events", lambda: _kill(victim), reply=lambda r: r["value"] is not None)
    victim.append(pool.start(wait=False, MONGODB_URI=proxy.through(mongo_uri), AGENT_CONCURRENCY="1"))

    await killed(victim[0], claim.fired)
    held = await db["outbox_events"].find_one({"status": "processing"})
    assert held is not None and held["attempts"] == 1  # claimed, and nobody is working on it
    assert fake_provider.requests == []

    pool.start()
    await all_settled(db, ids)

    await assert_triaged_once(db, person, ids)
    assert len(fake_provider.requests) == len(ids)


async def test_a_worker_killed_during_the_model_call_leaves_no_trace_but_its_ended_run(db, pool, fake_provider):
    """Killed while the fake holds its answer: the next worker triages the order; the sweeper ends the dead run."""
    person, ids = await orders_for(db, 2)
    fake_provider.script(proposal("low").with_delay(HELD), *[proposal("high") for _ in ids])
    victim = pool.start(wait=False, AGENT_CONCURRENCY="1")
    await until(lambda: fake_provider.requests, what="the model call", within=SETTLED)
    victim.process.kill()
    victim.process.wait()

    pool.start()
    await all_settled(db, ids)

    await assert_triaged_once(db, person, ids)
    assert {s["suggestedPriority"] for s in await db["triage_suggestions"].find().to_list()} == {"high"}
    await no_run_left_running(db)
    assert await db["agent_runs"].count_documents({"status": "error", "errorCode": "lease_expired"}) == 1


@pytest.mark.parametrize(
    ("mode", "command", "collection"),
    [
        ("suggest", "insert", "triage_suggestions"),  # the suggestion stored
        ("auto-apply", "insert", "triage_suggestions"),  # stored, not applied yet
        ("auto-apply", "insert", "activity"),  # stored and applied: the order changed, its timeline says so
    ],
)
async def test_a_worker_killed_after_its_write_before_the_ack_is_not_doubled(
    db, pool, proxy, mongo_uri, fake_provider, mode, command, collection
):
    """Killed as the database answers the pass's write: the next worker finds it done and adds nothing."""
    person, ids = await orders_for(db, 2)
    fake_provider.script(*[proposal("urgent") for _ in range(2 * len(ids))])
    victim: list[Worker] = []
    write = proxy.trap(command, collection, lambda: _kill(victim))
    victim.append(
        pool.start(wait=False, MONGODB_URI=proxy.through(mongo_uri), AGENT_CONCURRENCY="1", AGENT_TRIAGE_MODE=mode)
    )

    await killed(victim[0], write.fired)
    pool.start(AGENT_TRIAGE_MODE=mode)
    await all_settled(db, ids)

    await assert_triaged_once(db, person, ids, applied=mode == "auto-apply")
    await no_run_left_running(db)


async def test_a_worker_paused_past_its_lease_wakes_up_and_writes_nothing(db, pool, fake_provider):
    """SIGSTOP with the model request sent; another worker finishes the event; SIGCONT: the late answer is dropped."""
    person, ids = await orders_for(db, 1)
    fake_provider.script(proposal("low").with_delay(0.2), proposal("high"))
    sleeper = pool.start(wait=False, AGENT_CONCURRENCY="1")
    await until(lambda: fake_provider.requests, what="the model call", within=SETTLED)
    sleeper.process.send_signal(signal.SIGSTOP)
    paused = time.monotonic()
    try:
        pool.start()
        await all_settled(db, ids)
        await asyncio.sleep(max(0.0, 3.0 - (time.monotonic() - paused)))  # its whole answer has been sent
    finally:
        sleeper.process.send_signal(signal.SIGCONT)

    async def woke_and_gave_up() -> bool:
        # its answer was waiting: recorded as aborted; or its lease keeper woke first and cut the call off
        # (its run was ended meanwhile by the sweeper, as any run whose lease lapsed)
        aborted = await db["agent_tool_calls"].count_documents({"outcome": "aborted"})
        return aborted == 1 or fake_provider.client_disconnects == 1

    await until(woke_and_gave_up, what="the paused worker's answer dropped", within=10)
    await assert_triaged_once(db, person, ids)
    (suggestion,) = await db["triage_suggestions"].find().to_list()
    assert suggestion["suggestedPriority"] == "high"  # the answer of the worker that held the lease
    assert sleeper.process.poll() is None  # it lives on, and goes on polling
    await no_run_left_running(db)


async def test_a_kill_switch_mid_call_drops_the_answer_and_the_event_waits_for_enable(
    db, pool, fake_provider, make_user
):
    """Turned off from the admin's process (this one) while the worker's model call is held: the worker cancels
    the call, its run ends aborted, nothing is stored; the event is pending again, its attempt not counted. On
    again, the order is triaged once."""
    person, ids = await orders_for(db, 1)
    admin = actor(await make_user("admin"))
    fake_provider.script(proposal("low").with_delay(HELD), proposal("high"))
    worker = pool.start(wait=False, AGENT_CONCURRENCY="1")
    await until(lambda: fake_provider.requests, what="the model call", within=SETTLED)

    await agents.set_ai(db=db, actor=admin, on=False)

    async def run_aborted() -> bool:
        return await db["agent_runs"].count_documents({"status": "aborted", "errorCode": "turned_off"}) == 1

    await until(run_aborted, what="the worker's run ended by the switch", within=SETTLED)
    await until(lambda: fake_provider.client_disconnects == 1, what="the held call cut off", within=SETTLED)
    event = await db["outbox_events"].find_one({"payloadRef": ObjectId(ids[0])})
    assert (event["status"], event["attempts"]) == ("pending", 0)
    assert await db["triage_suggestions"].count_documents({}) == 0
    assert len(fake_provider.requests) == 1  # nothing claimed while off
    assert worker.process.poll() is None  # it lives on, and goes on polling

    await agents.set_ai(db=db, actor=admin, on=True)
    await all_settled(db, ids)

    await assert_triaged_once(db, person, ids)
    (suggestion,) = await db["triage_suggestions"].find().to_list()
    assert suggestion["suggestedPriority"] == "high"  # the answer after /enable; the dropped one left nothing
    await no_run_left_running(db)


async def test_the_database_restarting_mid_pass_loses_and_doubles_nothing(tmp_path, fake_provider):
    """The database stops and starts again (same files, same socket) while the model call is held; the pass ends."""
    database = EmbeddedMongo(tmp_path / "mongo")
    uri = database.start()
    try:
        client: AsyncMongoClient = AsyncMongoClient(uri, tz_aware=True, serverSelectionTimeoutMS=10_000)
        try:
            db = client["desk_faults"]
            await ensure_indexes(db)
            person, ids = await orders_for(db, 2)
            fake_provider.script(proposal("urgent").with_delay(0.4), proposal("urgent"), proposal("urgent"))
            settings = worker_settings(
                mongodb_uri=uri,
                db_name="desk_faults",
                provider_url=fake_provider.url,
                AGENT_LEASE_MS=str(LEASE_MS),
                AGENT_POLL_INTERVAL_MS=str(POLL_MS),
                AGENT_SWEEP_INTERVAL_MS="500",
                AGENT_TRIAGE_MODE="auto-apply",
            )
            with workers(tmp_path / "workers", **settings) as pool:
                pool.start(wait=False, AGENT_CONCURRENCY="1")
                await until(lambda: fake_provider.requests, what="the model call", within=SETTLED)
                await asyncio.to_thread(database.stop)
                assert await asyncio.to_thread(database.start) == uri  # back where the worker looks for it
                await all_settled(db, ids)

                await assert_triaged_once(db, person, ids, applied=True)
                await no_run_left_running(db)
        finally:
            await client.close()
    finally:
        database.stop()


async def test_a_persons_edit_mid_pass_stands_over_the_agents_answer(db, pool, fake_provider):
    """Auto-apply; the person sets the priority while the fake holds the model's answer: theirs stays, noted."""
    person, (order_id,) = await orders_for(db, 1)
    fake_provider.script(proposal("urgent").with_delay(0.3))  # about 3 s in all: the person acts first
    pool.start(wait=False, AGENT_CONCURRENCY="1", AGENT_TRIAGE_MODE="auto-apply")
    await until(lambda: fake_provider.requests, what="the model call", within=SETTLED)
    order = await work_orders.get_or_raise(db=db, actor=actor(person), order_id=order_id)
    await work_orders.update(
        db=db, actor=actor(person), order_id=order_id, data=WorkOrderUpdate(version=order.version, priority="high")
    )

    await all_settled(db, [order_id])

    assert (await work_orders.get(db=db, actor=actor(person), order_id=order_id)).priority == "high"
    (suggestion,) = await db["triage_suggestions"].find().to_list()
    assert (suggestion["suggestedPriority"], suggestion["applied"], suggestion["appliedNote"]) == (
        "urgent",
        False,
        "overtaken",
    )
    timeline = await work_orders.activity(db=db, actor=actor(person), order_id=order_id)
    assert [entry.actor_kind for entry in timeline].count("system") == 0
    assert len(fake_provider.requests) == 1
    await no_run_left_running(db)


async def test_two_workers_with_a_desk_wide_cap_of_one_never_call_the_provider_at_once(db, pool, fake_provider):
    """AGENT_CONCURRENCY is the desk's: two worker processes share its one slot (leased in the database)."""
    person, ids = await orders_for(db, 6)
    fake_provider.script(*[proposal("urgent").with_delay(0.1) for _ in ids])

    started = [pool.start(wait=False, AGENT_CONCURRENCY="1") for _ in range(2)]
    for worker in started:
        worker.wait_started()
    await all_settled(db, ids)

    assert (fake_provider.most_in_flight, len(fake_provider.requests)) == (1, len(ids))
    await assert_triaged_once(db, person, ids)


async def test_an_outage_pauses_triage_and_everything_is_triaged_once_the_provider_is_back(db, pool, fake_provider):
    """The provider answers 429 (with Retry-After) and then 503 for a while: orders that arrive meanwhile wait,
    none is given up, the probes stay few; once it answers again every order is triaged, once."""
    fake_provider.script(*[_retry_after(429, "1")] * 2)
    fake_provider.always = Turn.error(503)
    try:
        pool.start(AI_PROBE_INTERVAL_MS="300", AI_PROBE_MAX_INTERVAL_MS="600")
        pool.start(AI_PROBE_INTERVAL_MS="300", AI_PROBE_MAX_INTERVAL_MS="600")
        person, ids = await orders_for(db, 4)

        async def unreachable() -> bool:
            return bool((await breaker.state(db)).unreachable)

        await until(unreachable, what="the breaker open", within=SETTLED)
        latecomer, later = await orders_for(db, 4)  # arriving during the outage
        calls_when_open = len(fake_provider.requests)
        await asyncio.sleep(2.0)  # the outage goes on: the workers only probe
        probes = len(fake_provider.requests) - calls_when_open

        assert await db["outbox_events"].count_documents({"status": "failed"}) == 0
        assert await db["outbox_events"].count_documents({"attempts": {"$gt": 0}, "status": "pending"}) == 0
        assert probes <= 2.0 / 0.3 + 2  # a probe at a time, at most one every 300 ms (then 600), from either worker
        fake_provider.always = proposal("high")  # back
        await all_settled(db, ids + later)
    finally:
        fake_provider.always = None

    await assert_triaged_once(db, person, ids)
    await assert_triaged_once(db, latecomer, later)
    assert await db["outbox_events"].count_documents({"status": "failed"}) == 0
    assert (await breaker.state(db)).unreachable is False


def _retry_after(status: int, seconds: str) -> Turn:
    turn = Turn.error(status)
    return replace(turn, headers=(*turn.headers, ("retry-after", seconds)))
