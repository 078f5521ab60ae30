"""The triage worker in burst mode (AGT-2..7): what a desk's people see after the worker has run."""

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta

from bson import ObjectId

from desk import tasks
from desk.agent.core import budget
from desk.agent.core.store import agent_messages, agent_tool_calls
from desk.agent.triage import policy
from desk.agent.triage import run as triage_run
from desk.agent.triage import task as triage_task
from desk.config import Settings
from desk.jobs import backoff, slots
from desk.jobs import queue as outbox
from desk.jobs.table import Context, CronJob
from desk.jobs.worker import Worker
from desk.schema import now
from desk.work_orders import service as work_orders
from desk.work_orders.models import WorkOrderRead, WorkOrderUpdate
from desk.work_orders.outbox import CREATED
from tests.fake_provider import Turn
from tests.helpers import actor, tuned, until
from tests.triage.conftest import proposal, triage_worker


async def event_of(db, order) -> dict:
    return await outbox.find(db, CREATED, ObjectId(order.id))


async def suggestions_of(db, order) -> list[dict]:
    return await db["triage_suggestions"].find({"workOrderId": ObjectId(order.id)}).to_list()


async def set_policy(db, settings, **fields) -> None:
    await policy.current(db, settings)
    await db["agent_config"].update_one({"_id": "triage"}, {"$set": fields})


async def test_a_new_order_gets_a_suggestion_and_its_event_is_done(db, make_user, make_order, fake_provider, burst):
    owner = await make_user()
    order = await make_order(owner, "Water on the floor", description="The sink pipe burst.")
    fake_provider.script(proposal("high", summary="Burst pipe under the sink; water on the floor.", flag=True))

    assert await burst() == 1

    (suggestion,) = await suggestions_of(db, order)
    assert suggestion["suggestedPriority"] == "high"
    assert suggestion["summary"] == "Burst pipe under the sink; water on the floor."
    assert suggestion["flagForDispatcher"] is True and suggestion["applied"] is False
    assert (await event_of(db, order))["status"] == "done"
    assert (await work_orders.get(db=db, actor=actor(owner), order_id=order.id)).priority == "medium"  # suggest mode


async def test_the_model_is_forced_to_call_triage_propose_with_the_order_as_delimited_data(
    db, make_user, make_order, fake_provider, burst
):
    await make_order(await make_user(), "Broken window", description="Glass everywhere")
    fake_provider.script(proposal())

    await burst()

    (request,) = fake_provider.requests
    assert request["tool_choice"] == {"type": "function", "function": {"name": "triage_propose"}}
    assert [tool["function"]["name"] for tool in request["tools"]] == ["triage_propose"]
    user_text = request["messages"][1]["content"]
    assert "<<<WORK_ORDER_DATA" in user_text and "Glass everywhere" in user_text


async def test_every_pass_is_an_autonomous_run_with_its_tool_call_and_tokens(
    db, make_user, make_order, fake_provider, burst
):
    order = await make_order(await make_user())
    fake_provider.script(Turn.tool_calls(("triage_propose", _args()), usage=(300, 40)))

    await burst()

    run = await db["agent_runs"].find_one({"agentName": "triage"})
    assert (run["mode"], run["status"], run["inputTokens"], run["outputTokens"]) == ("autonomous", "complete", 300, 40)
    assert run["workOrderId"] == ObjectId(order.id)
    (call,) = await agent_tool_calls.run_tool_calls(db, run["_id"])
    assert (call["tool"], call["outcome"], call["args"]["suggestedPriority"]) == ("triage_propose", "ok", "high")
    assert [m["role"] for m in await agent_messages.run_messages(db, run["_id"])] == ["system", "user", "assistant"]


async def test_every_call_is_billed_to_the_triage_agent_and_the_desk(db, make_user, make_order, fake_provider, burst):
    await make_order(await make_user())
    fake_provider.script(Turn.tool_calls(("triage_propose", _args()), usage=(1_000_000, 0)))

    await burst()

    agent_key, global_key = budget.keys(user_id=None, agent="triage")
    assert await budget.spent(db, agent_key) == await budget.spent(db, global_key) == 0.15


async def test_auto_apply_changes_the_priority_as_the_triage_agent_with_its_run_id(
    db, make_user, make_order, fake_provider, burst, triage_settings
):
    owner, order = await a_low_order_on_an_auto_apply_desk(db, make_user, make_order, triage_settings)
    fake_provider.script(proposal("urgent"))

    await burst()

    changed = await work_orders.get(db=db, actor=actor(owner), order_id=order.id)
    assert changed.priority == "urgent" and changed.version == 2
    (suggestion,) = await suggestions_of(db, order)
    assert suggestion["applied"] is True
    entry = (await work_orders.activity(db=db, actor=actor(owner), order_id=order.id))[0]
    assert (entry.actor_kind, entry.action, entry.before, entry.after) == (
        "system",
        "updated",
        {"priority": "low"},
        {"priority": "urgent"},
    )
    assert entry.run_id == str(suggestion["runId"])


async def a_low_order_on_an_auto_apply_desk(db, make_user, make_order, settings) -> tuple[dict, WorkOrderRead]:
    """A new order of priority low, on a desk whose triage policy applies the suggested priority itself."""
    owner = await make_user()
    order = await make_order(owner, priority="low")
    await set_policy(db, settings, mode="auto_apply")
    return owner, order


async def test_over_the_daily_action_cap_auto_apply_falls_back_to_suggest_and_says_so(
    db, make_user, make_order, fake_provider, burst, triage_settings
):
    owner = await make_user()
    first, second = await make_order(owner, "One", priority="low"), await make_order(owner, "Two", priority="low")
    await set_policy(db, triage_settings, mode="auto_apply", dailyActionCap=1)
    fake_provider.script(proposal("urgent"), proposal("urgent"))

    await burst()

    priorities = {(await work_orders.get(db=db, actor=actor(owner), order_id=o.id)).priority for o in (first, second)}
    assert priorities == {"urgent", "low"}
    notes = {s["appliedNote"] for o in (first, second) for s in await suggestions_of(db, o)}
    assert notes == {None, "daily_action_cap"}
    assert await db["agent_runs"].count_documents({"errorCode": "daily_action_cap"}) == 1


async def test_an_owner_with_ai_turned_off_is_skipped_without_a_model_call(
    db, make_user, make_order, change_user, fake_provider, burst
):
    owner = await make_user()
    order = await make_order(owner)
    await change_user(owner, ai_enabled=False)  # after the event was emitted: the worker checks again

    await burst()

    assert fake_provider.requests == []
    event = await event_of(db, order)
    assert (event["status"], event["lastError"]) == ("skipped", "ai_disabled_for_owner")


async def test_the_event_of_a_deleted_order_ends_skipped(db, make_user, make_order, fake_provider, burst):
    owner = await make_user()
    order = await make_order(owner)
    await work_orders.delete(db=db, actor=actor(owner), order_id=order.id, version=1)

    await burst()

    assert fake_provider.requests == []
    assert (await event_of(db, order))["status"] == "skipped"


async def test_a_provider_outage_puts_the_event_back_uncounted_and_a_later_poll_triages_it(
    db, make_user, make_order, fake_provider, burst
):
    order = await make_order(await make_user())
    fake_provider.script(Turn.error(503), Turn.error(429), proposal())

    await burst()
    waiting = await event_of(db, order)
    await burst()
    await burst()

    assert (waiting["status"], waiting["attempts"], waiting["lastError"]) == ("pending", 0, "provider_status 503")
    event = await event_of(db, order)
    assert (event["status"], event["attempts"]) == ("done", 1)
    assert len(await suggestions_of(db, order)) == 1
    assert await db["agent_runs"].count_documents({"status": "error"}) == 2


async def test_an_invalid_answer_is_tried_once_more_then_the_event_is_dead_lettered(
    db, make_user, make_order, fake_provider, burst
):
    order = await make_order(await make_user())
    fake_provider.script(
        Turn.text("I think it is urgent."),  # no tool call
        Turn.tool_calls(("triage_propose", {**_args(), "summary": "x" * 281})),  # too long
    )

    await burst()

    event = await event_of(db, order)
    assert (event["status"], event["attempts"], event["lastError"]) == ("failed", 2, "invalid_output")
    assert len(fake_provider.requests) == 2
    assert await suggestions_of(db, order) == []


async def test_a_summary_that_echoes_the_prompt_is_never_shown(db, make_user, make_order, fake_provider, burst):
    order = await make_order(await make_user())
    echo = 'Someone reports: Triage this work order. <<<WORK_ORDER_DATA { "title": "T'  # the prompt, echoed back
    fake_provider.script(
        Turn.tool_calls(("triage_propose", {**_args(), "summary": echo})),
        Turn.tool_calls(("triage_propose", _args())),
    )

    await burst()

    assert [s["summary"] for s in await suggestions_of(db, order)] == [_args()["summary"]]
    assert (await event_of(db, order))["attempts"] == 2  # the echo was a failed attempt


async def test_retries_wait_exponentially_longer_with_jitter(monkeypatch):
    monkeypatch.setattr(backoff, "BASE_SECONDS", 2.0)
    for attempts, (low, high) in {1: (1, 2), 2: (2, 4), 3: (4, 8)}.items():
        waits = {backoff.delay(attempts) for _ in range(50)}
        assert all(low <= wait <= high for wait in waits)
        assert len(waits) > 1  # jittered


async def test_at_most_the_configured_number_of_passes_run_at_once(db, make_user, make_order, fake_provider, burst):
    await a_backlog(make_user, make_order, fake_provider, orders=5, each_pass_takes=0.05)

    async with passes_in_flight(db) as seen:
        assert await burst() == 5

    assert max(seen) == 2
    assert await db["triage_suggestions"].count_documents({}) == 5


async def test_the_limit_holds_for_the_process_when_two_polls_overlap(
    db, make_user, make_order, fake_provider, burst, triage_settings, provider
):
    # a worker starts its jobs once at start-up while the scheduler's first tick runs: two loops, one limit
    await a_backlog(make_user, make_order, fake_provider, orders=5, each_pass_takes=0.05)

    async with passes_in_flight(db) as seen:
        claimed = await asyncio.gather(burst(), burst())

    assert sum(claimed) == 5
    assert max(seen) == 2
    assert await db["triage_suggestions"].count_documents({}) == 5


async def a_backlog(make_user, make_order, fake_provider, *, orders: int, each_pass_takes: float) -> None:
    """`orders` new orders of one owner waiting for triage, the model taking `each_pass_takes` seconds a pass."""
    owner = await make_user()
    for n in range(orders):
        await make_order(owner, f"Order {n}")
    fake_provider.script(*[proposal().with_delay(each_pass_takes) for _ in range(orders)])


@contextlib.asynccontextmanager
async def passes_in_flight(db) -> AsyncIterator[list[int]]:
    """While the block runs, how many events are being processed, looked at every 10 ms."""
    seen: list[int] = []

    async def watch() -> None:
        while True:
            seen.append(await db["outbox_events"].count_documents({"status": "processing"}))
            await asyncio.sleep(0.01)

    watcher = asyncio.create_task(watch())
    try:
        yield seen
    finally:
        watcher.cancel()


async def test_one_tick_of_the_poll_job_works_through_the_backlog_refilling_slots_as_passes_end(
    db, make_user, make_order, fake_provider, triage_settings, provider
):
    # a tick that stopped claiming after one poll interval left the worker idle until the scheduler's next
    # tick, itself skipped while the first one ran: half the time idle under a backlog
    await a_backlog(make_user, make_order, fake_provider, orders=4, each_pass_takes=0.02)
    settings = tuned(triage_settings, agent_poll_interval_ms=1)
    await triage_worker(settings, provider).run_due(Context(db=db, settings=settings))

    assert await db["outbox_events"].count_documents({"status": "done"}) == 4


async def test_a_stopping_worker_claims_nothing_more_and_finishes_its_passes(
    db, make_user, make_order, fake_provider, triage_settings, provider
):
    await a_backlog(make_user, make_order, fake_provider, orders=4, each_pass_takes=0.05)
    stop = asyncio.Event()
    polling = asyncio.create_task(triage_task.process_due(db, triage_settings, provider=provider, stop=stop))
    await until(lambda: len(fake_provider.requests) == 2, what="two passes in flight")

    stop.set()

    assert await polling == 2
    assert await db["triage_suggestions"].count_documents({}) == 2
    assert await db["outbox_events"].count_documents({"status": "pending"}) == 2


async def test_a_worker_paused_past_its_lease_stores_no_second_suggestion(
    db, make_user, make_order, fake_provider, burst, triage_settings, provider
):
    order = await make_order(await make_user())
    paused = await outbox.claim(db, owner="paused", lease=timedelta(milliseconds=1))
    fake_provider.script(proposal("low").with_delay(0.1), proposal("high"))
    late = asyncio.create_task(
        triage_worker(triage_settings, provider).perform(Context(db=db, settings=triage_settings), paused)
    )
    await fake_provider.wait_for_request()

    await burst()  # the lease lapsed: another worker claims the event and finishes it
    await late  # the paused one wakes up with its answer

    (suggestion,) = await suggestions_of(db, order)
    assert suggestion["suggestedPriority"] == "high"
    assert (await event_of(db, order))["status"] == "done"
    assert len(fake_provider.requests) == 2
    assert await db["agent_runs"].count_documents({"status": "aborted", "errorCode": "lease_lost"}) == 1


async def test_a_call_cut_off_because_its_lease_was_lost_is_still_paid(
    db, make_user, make_order, fake_provider, triage_settings, provider
):
    await make_order(await make_user())
    settings = tuned(triage_settings, agent_lease_ms=300)  # the pass looks at its lease every 0.1 s
    event = await outbox.claim(db, owner="slow", lease=timedelta(milliseconds=300))
    fake_provider.script(proposal("high").with_delay(3))
    cut_off = asyncio.create_task(triage_worker(settings, provider).perform(Context(db=db, settings=settings), event))
    await fake_provider.wait_for_request()
    # another worker takes the event mid-call (as when this one was paused past its lease): a new fence
    await db["outbox_events"].update_one({"_id": event["_id"]}, {"$inc": {"fence": 1}, "$set": {"leaseOwner": "b"}})

    await asyncio.wait_for(cut_off, 2)  # cut off at the pass's next look, not at the model's answer

    run = await db["agent_runs"].find_one({})
    assert (run["status"], run["errorCode"]) == ("aborted", "lease_lost")
    assert run["inputTokens"] > 0  # what was sent, estimated
    assert await budget.spent(db, f"agent:triage:{run['startedAt'].date().isoformat()}") > 0


async def test_a_pass_that_lost_its_desk_wide_slot_puts_its_order_back_for_another_pass(
    db, make_user, make_order, fake_provider, burst, triage_settings, provider
):
    """The job is still this worker's, but its AGENT_CONCURRENCY slot went to another worker mid-call: the pass
    stops, stores nothing, and the order waits, its attempt not counted; the next pass triages it once."""
    order = await make_order(await make_user())
    settings = tuned(triage_settings, agent_lease_ms=300)  # the pass looks at its lease (and slot) every 0.1 s
    event = await outbox.claim(db, owner="w1", lease=timedelta(milliseconds=300))
    slot = await slots.take(db, CREATED, 1, owner="w1", lease=timedelta(milliseconds=300), at=now())
    fake_provider.script(proposal("high").with_delay(3))
    ctx = Context(db=db, settings=settings)
    cut_off = asyncio.create_task(triage_worker(settings, provider).perform(ctx, event, desk_slot=slot))
    await fake_provider.wait_for_request()
    await db["job_slots"].update_one({"_id": slot["_id"]}, {"$inc": {"fence": 1}, "$set": {"owner": "w2"}})

    await asyncio.wait_for(cut_off, 2)

    assert await db["triage_suggestions"].count_documents({}) == 0
    waiting = await event_of(db, order)
    assert (waiting["status"], waiting["attempts"]) == ("pending", 0)  # not `done` with nothing to show
    await db["job_slots"].delete_many({})  # the other worker let go of it
    fake_provider.script(proposal("high"))
    await burst()
    assert len(await suggestions_of(db, order)) == 1


async def test_a_suggestion_stored_by_a_pass_that_died_before_applying_it_is_applied_once_by_the_next(
    db, make_user, make_order, fake_provider, burst, triage_settings, provider
):
    owner, order = await a_low_order_on_an_auto_apply_desk(db, make_user, make_order, triage_settings)
    fake_provider.script(proposal("urgent"), proposal("urgent"))

    async def dies() -> bool:
        raise _Died

    with contextlib.suppress(_Died):
        await a_pass_stopped_before_applying(db, triage_settings, provider, order, there=dies)

    await burst()  # the lease lapsed: the next worker takes the event

    changed = await work_orders.get(db=db, actor=actor(owner), order_id=order.id)
    assert changed.priority == "urgent"
    (suggestion,) = await suggestions_of(db, order)
    assert suggestion["applied"] is True
    timeline = await work_orders.activity(db=db, actor=actor(owner), order_id=order.id)
    assert [entry.actor_kind for entry in timeline].count("system") == 1
    assert (await event_of(db, order))["status"] == "done"


async def test_a_pass_that_slept_before_applying_wakes_up_and_leaves_the_next_ones_apply_alone(
    db, make_user, make_order, fake_provider, burst, triage_settings, provider
):
    owner, order = await a_low_order_on_an_auto_apply_desk(db, make_user, make_order, triage_settings)
    fake_provider.script(proposal("urgent"), proposal("urgent"))

    async def sleeps_past_its_lease() -> bool:  # the next worker takes the event meanwhile
        await burst()
        return False

    late = await a_pass_stopped_before_applying(db, triage_settings, provider, order, there=sleeps_past_its_lease)

    assert late.suggestion["appliedNote"] == "lease_lost"
    (suggestion,) = await suggestions_of(db, order)
    assert (suggestion["applied"], suggestion["appliedNote"]) == (True, None)
    timeline = await work_orders.activity(db=db, actor=actor(owner), order_id=order.id)
    assert [entry.actor_kind for entry in timeline].count("system") == 1


async def a_pass_stopped_before_applying(
    db, settings: Settings, provider, order, *, there: Callable[[], Awaitable[bool]]
) -> triage_run.Outcome:
    """A pass of `order` by a worker whose lease lapses at once; `there` stands in for the pass's lease check
    right before the apply (its second), as what happens to the worker at that moment."""
    claimed = await outbox.claim(db, owner="stopped", lease=timedelta(milliseconds=1))
    checks = 0

    async def still_ours() -> bool:
        nonlocal checks
        checks += 1
        return await there() if checks == 2 else True

    return await triage_run.triage(
        db=db, settings=settings, provider=provider, order_id=order.id, still_ours=still_ours, event_id=claimed["_id"]
    )


class _Died(BaseException):
    """The worker process ends here (SIGKILL): nothing after it runs."""


async def test_reconcile_emits_events_for_orders_that_have_none(db, make_user, make_order, burst, triage_settings):
    owner = await make_user()
    order = await make_order(owner)
    await db["outbox_events"].delete_many({})  # the process died between the order's insert and its event's
    settings = tuned(triage_settings, agent_reconcile_after_ms=1)
    await asyncio.sleep(0.01)

    assert await triage_task.reconcile(db, settings) == 1
    assert await triage_task.reconcile(db, settings) == 0

    assert (await event_of(db, order))["status"] == "pending"


async def test_reconcile_leaves_recent_and_triaged_orders_alone(
    db, make_user, make_order, fake_provider, burst, triage_settings
):
    owner = await make_user()
    triaged = await make_order(owner, "Triaged")
    fake_provider.script(proposal())
    await burst()
    await make_order(owner, "Too recent")
    await db["outbox_events"].delete_many({})

    assert await triage_task.reconcile(db, tuned(triage_settings, agent_reconcile_after_ms=60_000)) == 0
    await asyncio.sleep(0.01)
    assert await triage_task.reconcile(db, tuned(triage_settings, agent_reconcile_after_ms=1)) == 1
    assert await event_of(db, triaged) is None


async def test_reconcile_takes_only_open_orders_younger_than_the_max_age(db, make_user, make_order, triage_settings):
    owner = await make_user()
    recent = await make_order(owner, "Last week's leak")
    history = await make_order(owner, "Last month's leak")
    done = await make_order(owner, "Fixed leak")
    cancelled = await make_order(owner, "Cancelled leak")
    for order, status in ((done, "done"), (cancelled, "cancelled")):
        change = WorkOrderUpdate(version=order.version, status=status)
        await work_orders.update(db=db, actor=actor(owner), order_id=order.id, data=change)
    # the desk's history: orders made before the worker ran, with no event (a desk upgraded to triage)
    for order, days in ((recent, 6), (history, 8)):
        made = {"$set": {"createdAt": now() - timedelta(days=days)}}
        await db["work_orders"].update_one({"_id": ObjectId(order.id)}, made)
    await db["outbox_events"].delete_many({})
    await asyncio.sleep(0.01)

    emitted = await triage_task.reconcile(db, tuned(triage_settings, agent_reconcile_after_ms=1))

    assert emitted == 1
    assert (await event_of(db, recent))["status"] == "pending"
    assert [await event_of(db, order) for order in (history, done, cancelled)] == [None, None, None]


def _args(priority: str = "high") -> dict:
    return {"summary": "Leak under the sink.", "suggestedPriority": priority, "flagForDispatcher": False}


async def test_the_worker_process_runs_triage_and_reconcile_from_its_job_table(
    db, make_user, make_order, fake_provider, triage_settings, provider
):
    order = await make_order(await make_user())
    fake_provider.script(proposal("low"))
    desks_worker = tasks.worker(triage_settings, provider=provider)

    await desks_worker.work(Context(db=db, settings=triage_settings))

    assert CREATED in desks_worker.functions and "reconcile" in {job.name for job in desks_worker.cron_jobs}
    (suggestion,) = await suggestions_of(db, order)
    assert suggestion["suggestedPriority"] == "low"


async def test_a_job_meant_to_outlast_its_interval_does_not_warn_at_every_tick_and_others_still_do(
    db, mongo_uri, caplog
):
    async def long_run(ctx: Context) -> None:  # like the triage poll under a backlog
        await asyncio.sleep(0.6)

    jobs = [
        CronJob("triage_like", long_run, 0.05, outlasts_interval=True),
        CronJob("overrunning", long_run, 0.05),
    ]
    stop = asyncio.Event()
    settings = Settings(mongodb_uri=mongo_uri, mongodb_db=db.name)
    serving = asyncio.create_task(Worker(cron_jobs=jobs).serve(settings, stop=stop))
    await asyncio.sleep(0.5)  # many ticks, each skipped while a run goes on
    stop.set()
    await asyncio.wait_for(serving, 5)

    skipped = [r.getMessage() for r in caplog.records if "maximum number of running instances" in r.getMessage()]
    assert skipped, "the undeclared job's overruns are still warned about"
    assert all("overrunning" in message for message in skipped)
    assert not any("triage_like" in message for message in skipped)
