"""Waiting for a decision costs little (issue 15, item 5), its outcome follows the write that won, and a
conversation in use is kept from its last use (item 8)."""

import asyncio
import time
from datetime import timedelta

from desk import state
from desk.agent.copilot import approvals, live, staging
from desk.agent.core.events import RunEvent
from desk.agent.core.store import agent_runs, agent_tool_calls, keep
from desk.schema import now
from desk.work_orders import service as work_orders
from tests.agent.test_runtime import drain, the_run
from tests.fake_provider import Turn
from tests.helpers import actor, until


def counting(monkeypatch) -> list[str]:
    """The waiting run's round trips, by name (the only two it may make while nothing happens)."""
    made: list[str] = []
    for store, name in ((agent_runs, "renew_lease_and_look"), (agent_tool_calls, "get_tool_call")):
        real = getattr(store, name)

        def counted(*args, _real=real, _name=name, **kwargs):
            made.append(_name)
            return _real(*args, **kwargs)

        monkeypatch.setattr(store, name, counted)
    return made


async def no_wake_here(_tool_call_id: str) -> None:
    """A decide made in another process: nothing is published on this one's bus."""


async def test_a_decide_in_this_process_wakes_the_run_at_once_without_polling(
    start, fake_provider, make_user, make_order, db, monkeypatch
):
    monkeypatch.setattr(staging, "WAKE_SECONDS", 30.0)  # a poll would take half a minute
    sam = await make_user()
    tap = await make_order(sam, "Leaking tap")
    fake_provider.script(*Turn.read_then_update(tap.id, status="done"), Turn.text("Done."))
    clicked: list[float] = []

    async def click_later(event: RunEvent) -> None:
        if event.kind == "tool_approval_required":

            async def click() -> None:
                waiting = state.current().bus.subscribers  # the run listens for its decision (live.awaiting)
                await until(lambda: waiting("tool_call", event.tool_call_id), what="the run to wait for the decision")
                await approvals.decide(db=db, actor=actor(sam), tool_call_id=event.tool_call_id, approve=True)
                clicked.append(time.monotonic())

            asyncio.create_task(click())  # noqa: RUF006 - awaited through the run's end below

    events, results = [], []
    async for event in (await start(sam, "Close it")).events():
        events.append(event)
        if event.kind == "tool_result":
            results.append((event.outcome, time.monotonic()))
        await click_later(event)

    assert results[-1][0] == "executed"
    assert results[-1][1] - clicked[0] < 0.5  # woken by the decide itself (the change made in that time too)
    assert (await work_orders.get(db=db, actor=actor(sam), order_id=tap.id)).status == "done"


async def test_a_decide_in_another_process_is_seen_within_a_second_at_one_round_trip_a_second(
    start, fake_provider, make_user, make_order, db, monkeypatch
):
    monkeypatch.setattr(staging, "WAKE_SECONDS", 1.0)  # as served
    monkeypatch.setattr(live, "decided", no_wake_here)  # the decide happens elsewhere: no event here
    sam = await make_user()
    tap = await make_order(sam, "Leaking tap")
    fake_provider.script(*Turn.read_then_update(tap.id, priority="urgent"), Turn.text("Done."))
    made = counting(monkeypatch)
    seen: dict[str, float] = {}

    async def elsewhere(event: RunEvent) -> None:
        if event.kind == "tool_approval_required":

            async def click() -> None:
                await asyncio.sleep(3.2)  # the point: what a run waiting this long costs, in its real-time polls
                seen["round trips while waiting"] = len(made)
                await approvals.decide(db=db, actor=actor(sam), tool_call_id=event.tool_call_id, approve=True)
                seen["clicked"] = time.monotonic()

            asyncio.create_task(click())  # noqa: RUF006 - the run waits for it

    async for event in (await start(sam, "Make it urgent")).events():
        if event.kind == "tool_result" and event.outcome == "executed":
            seen["made"] = time.monotonic()
        await elsewhere(event)

    assert seen["round trips while waiting"] <= 4  # 3.2 s of waiting: one a second (and the decide's own read)
    assert seen["made"] - seen["clicked"] < 1.3
    assert (await work_orders.get(db=db, actor=actor(sam), order_id=tap.id)).priority == "urgent"


async def test_an_approve_that_wins_the_race_with_the_expiry_is_made_not_reported_expired(
    ai_settings, start, fake_provider, make_user, make_order, db, monkeypatch, clock
):
    """The approve's conditional write lands between the run's last look (pending) and its conditional expire."""
    sam = await make_user()
    tap = await make_order(sam, "Leaking tap")
    fake_provider.script(*Turn.read_then_update(tap.id, status="done"), Turn.text("Done."))
    read_call = agent_tool_calls.get_tool_call

    async def approve_lands_just_after_this_read(db_, call_id):
        found = await read_call(db_, call_id)
        pending = found and found.get("approval", {}).get("status") == "pending"
        if pending and found["approval"]["expiresAt"] <= clock.now():
            # the person's click was checked in time; its write lands now, before the run's expire
            fields = {"approval.status": "approved", "approval.decidedAt": clock.now()}
            await agent_tool_calls.update_tool_call(db_, call_id, fields, only_if={"approval.status": "pending"})
        return found

    async def time_runs_out(event: RunEvent) -> None:
        if event.kind == "tool_approval_required":
            clock.move(timedelta(milliseconds=ai_settings.ai_approval_ttl_ms))

    monkeypatch.setattr(agent_tool_calls, "get_tool_call", approve_lands_just_after_this_read)

    events = await drain(await start(sam, "Close it"), time_runs_out)

    assert "tool_approval_expired" not in [e.kind for e in events]
    assert [e.outcome for e in events if e.kind == "tool_result"] == ["ok", "executed"]
    (staged,) = await db["agent_tool_calls"].find({"tool": "update_work_order"}).to_list()
    assert (staged["approval"]["status"], staged["outcome"]) == ("approved", "executed")
    assert (await work_orders.get(db=db, actor=actor(sam), order_id=tap.id)).status == "done"
    assert (await the_run(db))["status"] == "complete"


async def test_a_conversation_in_use_is_kept_a_year_from_its_last_use(start, fake_provider, make_user, db):
    sam = await make_user()
    fake_provider.script(Turn.text("Hello."), Turn.text("Still here."))
    await drain(await start(sam, "Hi"))
    (session,) = await db["copilot_sessions"].find().to_list()
    started = now() - timedelta(days=360)  # opened almost a year ago, its retention counted from then
    await db["copilot_sessions"].update_one(
        {"_id": session["_id"]}, {"$set": {"createdAt": started, "expiresAt": started + keep.KEEP_RUNS}}
    )

    await drain(await start(sam, "Are you there?"))

    kept = await db["copilot_sessions"].find_one({"_id": session["_id"]})
    assert kept["expiresAt"] > now() + timedelta(days=364)  # a year from this use: not gone in 5 days
