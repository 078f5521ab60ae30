"""Outages pause, they don't fail (issue 41): what the triage worker does when the provider fails, in burst mode.

Time passes by moving the test's clock: the queue's `availableAt` and the breaker's probe times are the
worker's clock's, so nothing here waits for one.
"""

from dataclasses import replace
from datetime import timedelta

import pytest
from bson import ObjectId

from desk.agent.core import breaker, budget
from desk.agent.core.provider import Usage
from desk.clock import SYSTEM_CLOCK
from desk.config import Settings
from desk.jobs import queue as outbox
from desk.jobs.table import Context
from desk.work_orders.outbox import CREATED
from tests.clock import ManualClock
from tests.fake_provider import FakeProvider, Turn
from tests.helpers import tuned
from tests.triage.conftest import proposal, triage_worker

PROBE = timedelta(seconds=5)


@pytest.fixture
def clock() -> ManualClock:
    """The worker's clock, a little ahead of the system's: orders made now (at the system's time) are due on it."""
    return ManualClock(SYSTEM_CLOCK.now() + timedelta(seconds=30))


@pytest.fixture
def outage_settings(triage_settings: Settings) -> Settings:
    """One pass at a time (the fake answers in order), a probe after 5 s at first, then 10, then 20."""
    return tuned(triage_settings, agent_concurrency=1, ai_probe_interval_ms=5000, ai_probe_max_interval_ms=20_000)


@pytest.fixture
def poll(db, outage_settings, provider, clock):
    """One poll of one worker on the test's clock (a worker process keeps its breaker's view between polls)."""
    worker = triage_worker(outage_settings, provider, clock=clock)

    async def run() -> int:
        return await worker.run_due(Context(db=db, settings=outage_settings))

    return run


async def events(db) -> list[dict]:
    return await db["outbox_events"].find({"type": CREATED}).sort("createdAt", 1).to_list()


def retry_after(status: int, value: str) -> Turn:
    turn = Turn.error(status)
    return replace(turn, headers=(*turn.headers, ("retry-after", value)))


async def test_a_permanent_refusal_is_dead_lettered_at_once_with_its_reason(
    db, make_user, make_order, fake_provider: FakeProvider, poll, clock: ManualClock
):
    order = await make_order(await make_user())
    fake_provider.script(Turn.error(400))

    await poll()
    clock.move(timedelta(minutes=10))
    await poll()

    event = await outbox.find(db, CREATED, ObjectId(order.id))
    assert (event["status"], event["attempts"], event["lastError"]) == ("failed", 1, "provider_status 400")
    assert len(fake_provider.requests) == 1  # never asked again
    assert (await breaker.state(db)).unreachable is False  # it answered: the provider is up


async def test_retry_after_is_honoured_the_event_waits_that_long_uncounted(
    db, make_user, make_order, fake_provider: FakeProvider, poll, clock: ManualClock
):
    order = await make_order(await make_user())
    fake_provider.script(retry_after(429, "6"), proposal())
    asked_at = clock.now()

    await poll()
    waiting = await outbox.find(db, CREATED, ObjectId(order.id))
    clock.move(timedelta(seconds=5))
    too_soon = await poll()
    clock.move(timedelta(seconds=1))
    await poll()

    assert (waiting["status"], waiting["attempts"], waiting["lastError"]) == ("pending", 0, "provider_status 429")
    assert waiting["availableAt"] == asked_at + timedelta(seconds=6)
    assert too_soon == 0
    done = await outbox.find(db, CREATED, ObjectId(order.id))
    assert (done["status"], done["attempts"]) == ("done", 1)
    assert len(fake_provider.requests) == 2


async def test_an_outage_opens_the_breaker_claims_stop_and_a_probe_that_succeeds_resumes_them(
    db, make_user, make_order, fake_provider: FakeProvider, poll, clock: ManualClock
):
    person = await make_user()
    orders = [await make_order(person) for _ in range(5)]
    fake_provider.script(*[Turn.error(503)] * 3)
    opened_at = clock.now()

    for _ in range(3):  # one failed pass a poll: a failure rests the task until the next poll
        await poll()
    while_open = await poll()
    clock.move(PROBE - timedelta(seconds=1))
    before_the_probe = await poll()

    assert (while_open, before_the_probe) == (0, 0)
    assert len(fake_provider.requests) == 3  # no calls while it is open
    state = await breaker.state(db)
    assert (state.unreachable, state.since, state.last_error) == (True, opened_at, "status 503")
    assert [(e["status"], e["attempts"]) for e in await events(db)] == [
        ("pending", 0)
    ] * 5  # nothing spent, no dead letter

    fake_provider.script(Turn.error(502))  # the first probe: still down
    clock.move(timedelta(seconds=1))
    assert await poll() == 1
    clock.move(PROBE)
    assert await poll() == 0  # the next probe waits twice as long

    fake_provider.script(*[proposal() for _ in orders])  # back
    clock.move(PROBE)
    assert await poll() == 5  # the probe, then everything else: claims resume by themselves

    assert {e["status"] for e in await events(db)} == {"done"}
    assert [e["attempts"] for e in await events(db)] == [1] * 5
    assert (await breaker.state(db)).unreachable is False
    assert len(fake_provider.requests) == 3 + 1 + 5


async def test_one_worker_of_the_desk_takes_the_probe(
    db, make_user, make_order, fake_provider: FakeProvider, outage_settings, provider, clock: ManualClock
):
    person = await make_user()
    for _ in range(4):
        await make_order(person)
    workers = [triage_worker(outage_settings, provider, clock=clock) for _ in range(2)]  # two processes' views
    ctx = Context(db=db, settings=outage_settings)
    fake_provider.script(*[Turn.error(504)] * 3)
    for _ in range(3):
        await workers[0].run_due(ctx)

    fake_provider.script(Turn.error(504))
    clock.move(PROBE)
    claimed = [await workers[1].run_due(ctx), await workers[0].run_due(ctx)]

    assert sorted(claimed) == [0, 1]
    assert len(fake_provider.requests) == 4


async def test_a_retry_after_puts_the_next_probe_off_until_then(
    db, make_user, make_order, fake_provider: FakeProvider, poll, clock: ManualClock
):
    await make_order(await make_user())
    fake_provider.script(Turn.error(503), Turn.error(503), retry_after(503, "30"))
    for _ in range(3):
        await poll()
    clock.move(timedelta(seconds=29))
    not_yet = await poll()  # the first probe would be due after 5 s: the provider asked for 30
    fake_provider.script(retry_after(429, "60"))
    clock.move(timedelta(seconds=1))
    probed = await poll()

    clock.move(timedelta(seconds=59))
    early = await poll()
    fake_provider.script(proposal())
    clock.move(timedelta(seconds=1))
    on_time = await poll()

    assert (not_yet, probed, early, on_time) == (0, 1, 0, 1)
    assert (await breaker.state(db)).unreachable is False


def fails_after_reporting(prompt: int, completion: int) -> Turn:
    """A call the provider reports usage for, then fails mid-stream (an error chunk: transient)."""
    counts = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
    usage = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "choices": [], "usage": counts}
    return Turn.chunks(usage, {"error": {"message": "the model crashed on this input"}}, done=False)


async def test_an_order_the_provider_fails_on_while_answering_others_is_dead_lettered_and_every_call_billed(
    db, make_user, make_order, fake_provider: FakeProvider, poll, provider
):
    person = await make_user()
    poison = await make_order(person)
    fake_provider.script(fails_after_reporting(4000, 10))
    await poll()  # its first strike
    others = []
    for _ in range(2):  # a newer order each time, answered first: the provider is up
        others.append(await make_order(person))
        fake_provider.script(proposal(), fails_after_reporting(4000, 10))
        await poll()

    event = await outbox.find(db, CREATED, ObjectId(poison.id))
    assert (event["status"], event["attempts"], event["lastError"]) == ("failed", 1, "provider_fails_on_order")
    assert [(await outbox.find(db, CREATED, ObjectId(o.id)))["status"] for o in others] == ["done", "done"]
    assert (await breaker.state(db)).unreachable is False  # never an outage: it answered in between
    assert len(fake_provider.requests) == 5  # three tries (AGENT_MAX_ATTEMPTS), not one a poll for ever
    runs = await db["agent_runs"].find({"workOrderId": ObjectId(poison.id)}).to_list()
    assert [run["errorCode"] for run in runs] == ["provider_provider_error"] * 3
    failed_calls = 3 * provider.cost(Usage(4000, 10))  # each failed call as the provider reported it
    answered = sum(run["costUsd"] for run in await db["agent_runs"].find({"errorCode": None}).to_list())
    spent = await budget.spent(db, budget.keys(user_id=None, agent="triage")[0])
    assert spent == pytest.approx(failed_calls + answered)
    assert sum(run["costUsd"] for run in runs) == pytest.approx(failed_calls)


async def test_a_rate_limit_is_never_held_against_an_order(
    db, make_user, make_order, fake_provider: FakeProvider, poll, clock: ManualClock
):
    person = await make_user()
    order = await make_order(person)
    for _ in range(4):  # more 429s than AGENT_MAX_ATTEMPTS, an answer to a newer order after each
        fake_provider.script(retry_after(429, "1"), proposal())
        await poll()
        clock.move(timedelta(seconds=1))
        await make_order(person)
    fake_provider.script(proposal(), proposal())
    await poll()

    event = await outbox.find(db, CREATED, ObjectId(order.id))
    assert (event["status"], event["strikes"]) == ("done", 0)
