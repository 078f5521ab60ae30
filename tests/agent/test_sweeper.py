"""The sweeper (spec §4.5) and the worker process that runs it.

A web process that died mid-run leaves a `running` run whose lease stops being renewed, or an
approval nobody will wait for; the sweeper ends both. "Died" is played by starting a run and never
driving it (or holding it at its approval request), then letting its lease or approval run out.
"""

import asyncio
import contextlib
import logging
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest
from bson import ObjectId

from desk.agent.copilot import approvals
from desk.agent.copilot.sessions import abort_runs, current_session
from desk.agent.copilot.start import ApprovalPending, begin
from desk.agent.copilot.sweeper import Swept, sweep
from desk.agent.core.events import RunEvent
from desk.agent.core.store import copilot_sessions, keep
from desk.config import Settings
from desk.schema import now
from desk.tasks import worker
from tests.clock import ManualClock
from tests.fake_provider import Turn
from tests.helpers import actor, until

ROOT = Path(__file__).resolve().parents[2]


async def start_run(db, settings: Settings, provider, person: dict, text: str = "hi") -> ObjectId:
    """A run that was started (session claimed, run `running`) and then never driven: its process died."""
    session = await current_session(db=db, settings=settings, actor=actor(person))
    turn = await begin(
        db=db, settings=settings, provider=provider, actor=actor(person), session_id=session.id, content=text, ip="ip"
    )
    assert await turn.recorded()  # the run is stored while its model call would stream
    return ObjectId(turn.run_id)


async def let_lease_lapse(db, run_id: ObjectId) -> None:
    """The lease a live run renews every step; a dead one's runs out (played by moving it into the past)."""
    await db["agent_runs"].update_one({"_id": run_id}, {"$set": {"leaseUntil": now() - timedelta(seconds=1)}})


async def stale_run(db, settings: Settings, provider, person: dict, text: str = "hi") -> ObjectId:
    run_id = await start_run(db, settings, provider, person, text)
    await let_lease_lapse(db, run_id)
    return run_id


async def held_at_approval(
    db, settings: Settings, provider, fake_provider, person: dict, order_id: str
) -> tuple[AsyncIterator[RunEvent], RunEvent]:
    """A run that proposed a change and then stopped moving (its events are not read any more)."""
    fake_provider.script(
        *Turn.read_then_update(order_id, priority="urgent"),
    )
    session = await current_session(db=db, settings=settings, actor=actor(person))
    turn = await begin(
        db=db, settings=settings, provider=provider, actor=actor(person), session_id=session.id, content="hi", ip="ip"
    )
    events = turn.events()
    while (event := await anext(events)).kind != "tool_approval_required":
        pass
    return events, event


async def overdue(db, tool_call_id: str) -> bool:
    call = await db["agent_tool_calls"].find_one({"_id": ObjectId(tool_call_id)})
    return call["approval"]["expiresAt"] < now()


async def run_of(db, run_id: ObjectId) -> dict:
    return await db["agent_runs"].find_one({"_id": run_id})


async def session_is_free(db, person: dict) -> bool:
    session = await db["copilot_sessions"].find_one({"userId": ObjectId(person["id"]), "status": "active"})
    return session["runningRunId"] is None


# --- stale runs ------------------------------------------------------------------------------------


async def test_a_run_whose_lease_lapsed_ends_as_error_and_frees_its_session(
    ai_settings, provider, fake_provider, copilot, make_user, db
):
    sam, ann = await make_user("user"), await make_user("user")
    dead = await stale_run(db, ai_settings, provider, sam)
    alive = await start_run(db, ai_settings, provider, ann)  # its lease is still good: not touched

    swept = await sweep(db)

    assert swept == Swept(stale_runs=1, expired_approvals=0)
    run = await run_of(db, dead)
    assert (run["status"], run["errorCode"]) == ("error", "lease_expired") and run["finishedAt"] is not None
    assert run["leaseUntil"] is None
    assert (await run_of(db, alive))["status"] == "running"
    assert await session_is_free(db, sam) and not await session_is_free(db, ann)
    fake_provider.script(Turn.text("I'm back."))
    events = await copilot(sam, "are you there?")  # sam can talk again in the same session
    assert events[-1].status == "complete"


async def test_a_change_proposed_by_a_run_whose_lease_lapsed_can_no_longer_be_approved(
    ai_settings, provider, fake_provider, make_user, make_order, db
):
    sam = await make_user("user")
    order = await make_order(sam)
    events, staged = await held_at_approval(db, ai_settings, provider, fake_provider, sam, order.id)
    try:
        run = await db["agent_runs"].find_one({})
        await let_lease_lapse(db, run["_id"])  # its process died while sam still had the change before him

        swept = await sweep(db)

        assert swept == Swept(stale_runs=1, expired_approvals=0)  # the approval itself was not yet due
        call = await db["agent_tool_calls"].find_one({"_id": ObjectId(staged.tool_call_id)})
        assert call["approval"]["status"] == "expired" and call["outcome"] == "expired"
        with pytest.raises(approvals.ApprovalExpired):
            await approvals.decide(db=db, actor=actor(sam), tool_call_id=staged.tool_call_id, approve=True)
        assert (await db["work_orders"].find_one({}))["priority"] == "medium"
    finally:
        await events.aclose()


async def test_sweeping_one_persons_dead_run_leaves_anothers_waiting_change_alone(
    ai_settings, provider, fake_provider, make_user, make_order, db
):
    sam, ann = await make_user("user"), await make_user("user")
    order = await make_order(ann)
    events, staged = await held_at_approval(db, ai_settings, provider, fake_provider, ann, order.id)
    fake_provider.script(Turn.text("Done."))
    try:
        await stale_run(db, ai_settings, provider, sam)

        assert await sweep(db) == Swept(stale_runs=1, expired_approvals=0)

        decided = await approvals.decide(db=db, actor=actor(ann), tool_call_id=staged.tool_call_id, approve=True)
        assert decided.approval.status == "approved"  # ann's change was still hers to approve
        assert [e.outcome async for e in events if e.kind == "tool_result"] == ["executed"]
        assert (await db["work_orders"].find_one({}))["priority"] == "urgent"
    finally:
        await events.aclose()


async def test_after_a_run_died_mid_turn_the_next_turn_shows_the_model_the_conversation_as_stored(
    ai_settings, provider, fake_provider, copilot, make_user, db
):
    sam = await make_user("user")
    fake_provider.script(Turn.text("a1"))
    await copilot(sam, "q1")  # the conversation so far is also kept in this process's memory
    # turn 2 (say, in another web process) stored sam's message and died before answering
    await stale_run(db, ai_settings, provider, sam, "q2")
    await sweep(db)
    fake_provider.script(Turn.text("a3"))

    events = await copilot(sam, "q3")

    assert events[-1].status == "complete"
    shown = [(m["role"], m["content"]) for m in fake_provider.requests[-1]["messages"] if m["role"] != "system"]
    assert shown == [("user", "q1"), ("assistant", "a1"), ("user", "q2"), ("user", "q3")]


# --- overdue approvals -----------------------------------------------------------------------------


async def test_an_overdue_approval_expires_with_its_run(
    ai_settings, provider, fake_provider, copilot, make_user, make_order, db, clock
):
    sam = await make_user("user")
    order = await make_order(sam)
    events, staged = await held_at_approval(db, ai_settings, provider, fake_provider, sam, order.id)
    try:
        clock.move(timedelta(milliseconds=ai_settings.ai_approval_ttl_ms + 1))  # the approval's time is up

        swept = await sweep(db)

        assert swept == Swept(stale_runs=0, expired_approvals=1)
        call = await db["agent_tool_calls"].find_one({"_id": ObjectId(staged.tool_call_id)})
        assert call["approval"]["status"] == "expired" and call["outcome"] == "expired"
        run = await db["agent_runs"].find_one({})
        assert run["status"] == "expired" and run["finishedAt"] is not None
        # nobody is left to release the session: the sweeper does, so sam is not locked out
        assert await session_is_free(db, sam)
        with pytest.raises(approvals.ApprovalExpired):
            await approvals.decide(db=db, actor=actor(sam), tool_call_id=staged.tool_call_id, approve=True)
        assert (await db["work_orders"].find_one({}))["priority"] == "medium"
        fake_provider.script(Turn.text("Still here."))
        assert (await copilot(sam, "hello again"))[-1].status == "complete"
    finally:
        await events.aclose()
    assert (await run_of(db, run["_id"]))["status"] == "expired"  # the late clean-up did not rewrite it


async def test_a_live_stream_waiting_on_an_approval_the_sweeper_expires_ends(
    ai_settings, provider, fake_provider, make_user, make_order, db, clock
):
    sam = await make_user("user")
    order = await make_order(sam)
    fake_provider.script(
        *Turn.read_then_update(order.id, priority="urgent"),
    )
    session = await current_session(db=db, settings=ai_settings, actor=actor(sam))
    turn = await begin(
        db=db, settings=ai_settings, provider=provider, actor=actor(sam), session_id=session.id, content="hi", ip="ip"
    )
    seen: list[RunEvent] = []
    staged = asyncio.Event()

    async def listen() -> None:
        async for event in turn.events():
            seen.append(event)
            if event.kind == "tool_approval_required":
                staged.set()

    listening = asyncio.create_task(listen())
    await asyncio.wait_for(staged.wait(), 5)
    call_id = seen[-1].tool_call_id
    # the sweeper runs in a worker whose clock is past the approval's time; this process's clock, which the
    # waiting run reads, is not there yet, so it is the sweeper that expires it
    ttl = timedelta(milliseconds=ai_settings.ai_approval_ttl_ms)
    workers = ManualClock(clock.now() + ttl + timedelta(seconds=1))

    swept = await sweep(db, clock=workers)
    await asyncio.wait_for(listening, 5)

    assert swept == Swept(stale_runs=0, expired_approvals=1)
    kinds = [e.kind for e in seen]
    assert kinds[-2:] == ["tool_approval_expired", "message_done"]
    assert seen[-2].tool_call_id == call_id and seen[-1].status == "expired"
    assert (await db["agent_runs"].find_one({}))["status"] == "expired"
    assert (await db["work_orders"].find_one({}))["version"] == 1  # nothing was executed
    assert await session_is_free(db, sam)


async def test_concurrent_sweeps_count_each_run_and_approval_once(
    ai_settings, provider, fake_provider, make_user, make_order, db
):
    people = [await make_user("user") for _ in range(4)]
    for person in people[:2]:
        await stale_run(db, ai_settings, provider, person)
    quick = ai_settings.model_copy(update={"ai_approval_ttl_ms": 1})
    held = []
    for person in people[2:]:
        order = await make_order(person)
        held.append(await held_at_approval(db, quick, provider, fake_provider, person, order.id))
    try:
        for _, staged in held:
            await until(lambda staged=staged: overdue(db, staged.tool_call_id), what="overdue approvals")

        results = await asyncio.gather(*(sweep(db) for _ in range(3)))

        assert sum(r.stale_runs for r in results) == 2
        assert sum(r.expired_approvals for r in results) == 2
        statuses = sorted(r["status"] for r in await db["agent_runs"].find({}).to_list())
        assert statuses == ["error", "error", "expired", "expired"]
        assert await sweep(db) == Swept(stale_runs=0, expired_approvals=0)
    finally:
        for events, _ in held:
            await events.aclose()


async def test_only_pending_approvals_expire_however_many_decided_ones_are_past_their_time(
    ai_settings, provider, fake_provider, approve, make_user, make_order, db
):
    sam, ann, bob = [await make_user("user") for _ in range(3)]
    past = now() - timedelta(minutes=1)
    # months of decided changes, each past its approval time: more than one sweep reads at once
    earlier = [
        {
            "runId": ObjectId(),
            "userId": ObjectId(sam["id"]),
            "tool": "update_work_order",
            "outcome": "executed" if n % 2 else "rejected",
            "approval": {"status": "approved" if n % 2 else "rejected", "expiresAt": past, "decidedAt": past},
            "expiresAt": now() + keep.KEEP_TRANSCRIPT,
        }
        for n in range(500)
    ]
    await db["agent_tool_calls"].insert_many(earlier)
    held = []
    try:
        for person in (sam, ann, bob):
            order = await make_order(person)
            held.append(await held_at_approval(db, ai_settings, provider, fake_provider, person, order.id))
        (_, sams), (_, anns), (_, bobs) = held
        await approve(sam)(sams)
        await approve(ann, approve=False)(anns)  # decided: their runs have yet to act on it
        ids = [ObjectId(staged.tool_call_id) for staged in (sams, anns, bobs)]
        await db["agent_tool_calls"].update_many({"_id": {"$in": ids}}, {"$set": {"approval.expiresAt": past}})

        swept = await sweep(db)

        assert swept == Swept(stale_runs=0, expired_approvals=1)  # bob's, the one still waiting
        found = []
        for call_id in ids:
            call = await db["agent_tool_calls"].find_one({"_id": call_id})
            found.append((call["approval"]["status"], (await run_of(db, call["runId"]))["status"]))
        assert found == [("approved", "running"), ("rejected", "running"), ("expired", "expired")]
        decided = await db["agent_tool_calls"].count_documents({"approval.status": {"$in": ["approved", "rejected"]}})
        assert decided == len(earlier) + 2
    finally:
        for events, _ in held:
            await events.aclose()


# --- the worker process -----------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def worker_running(db, mongo_uri: str, *, interval_ms: int) -> AsyncIterator[asyncio.Event]:
    """The worker's `serve`, as `desk run` starts it; yields its stop switch, and stops it on the way out."""
    stop = asyncio.Event()
    settings = Settings(mongodb_uri=mongo_uri, mongodb_db=db.name, agent_sweep_interval_ms=interval_ms)
    serving = asyncio.create_task(worker(settings).serve(settings, stop=stop))
    try:
        yield stop
    finally:
        stop.set()
        await asyncio.wait_for(serving, 5)


async def test_the_worker_sweeps_on_its_interval_and_stops_when_told(
    ai_settings, provider, make_user, db, mongo_uri, caplog
):
    interval = 0.5
    sam, ann, bob = await make_user("user"), await make_user("user"), await make_user("user")
    before_start = await stale_run(db, ai_settings, provider, sam)
    async with worker_running(db, mongo_uri, interval_ms=int(interval * 1000)):
        await until(lambda: _ended(db, before_start), what="the sweep at start-up")

        later = await stale_run(db, ai_settings, provider, ann)  # only the scheduled job can catch this one
        took = await until(lambda: _ended(db, later), what="the scheduled sweep", within=interval * 10)

        assert took < 2 * interval  # caught by the first scheduled pass after it went stale, not a later one
        assert (await run_of(db, later))["errorCode"] == "lease_expired"
    after_stop = await stale_run(db, ai_settings, provider, bob)
    await asyncio.sleep(interval * 1.5)  # more than an interval with the worker stopped: nothing sweeps it
    assert (await run_of(db, after_stop))["status"] == "running"
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []  # no job left behind
    assert asyncio.get_running_loop().remove_signal_handler(signal.SIGTERM) is False


async def test_a_worker_that_starts_sweeps_at_once_not_an_interval_later(
    ai_settings, provider, make_user, db, mongo_uri
):
    left_by_the_last_worker = await stale_run(db, ai_settings, provider, await make_user("user"))
    async with worker_running(db, mongo_uri, interval_ms=3_600_000):  # the first scheduled pass: in an hour
        await until(lambda: _ended(db, left_by_the_last_worker), what="the sweep at start-up")


async def test_a_worker_stopped_mid_pass_lets_the_pass_finish_and_logs_no_error(
    ai_settings, provider, make_user, db, mongo_uri, monkeypatch, caplog
):
    caplog.set_level(logging.INFO, logger="apscheduler.executors")
    passes, held, go_on = [], asyncio.Event(), asyncio.Event()

    async def a_pass_held_open(db_) -> Swept:  # the scheduled pass waits until the worker has been told to stop
        passes.append(db_)
        if len(passes) > 1:
            held.set()
            await go_on.wait()
        return await sweep(db_)

    monkeypatch.setattr("desk.tasks.sweep", a_pass_held_open)
    async with worker_running(db, mongo_uri, interval_ms=200) as stop:
        await until(lambda: passes, what="the sweep at start-up")
        dead = await stale_run(db, ai_settings, provider, await make_user("user"))
        await until(held.is_set, what="a scheduled pass")

        stop.set()
        await until(lambda: _job_ended(caplog), what="the scheduler to end the running job as it stops")
        go_on.set()

    assert await _ended(db, dead)  # the pass was not cut off halfway
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []


async def test_a_worker_cancelled_during_its_first_pass_is_cancelled(db, mongo_uri, monkeypatch):
    started = asyncio.Event()

    async def a_pass_that_hangs(db_) -> Swept:  # a database that does not answer
        started.set()
        await asyncio.Event().wait()

    monkeypatch.setattr("desk.tasks.sweep", a_pass_that_hangs)
    settings = Settings(mongodb_uri=mongo_uri, mongodb_db=db.name)
    serving = asyncio.create_task(worker(settings).serve(settings))
    await asyncio.wait_for(started.wait(), 5)

    serving.cancel()

    with pytest.raises(asyncio.CancelledError):  # whoever runs the worker can stop it, even mid-pass
        await asyncio.wait_for(serving, 5)


async def test_a_slow_sweep_pass_is_never_run_twice_at_once(db, mongo_uri, monkeypatch):
    calls, running, most, go_on = 0, 0, 0, asyncio.Event()

    async def a_pass_held_open(db_) -> Swept:  # every scheduled pass outlasts many intervals
        nonlocal calls, running, most
        calls, running = calls + 1, running + 1
        most = max(most, running)
        try:
            if calls > 1:  # the start-up pass is quick
                await go_on.wait()
            return Swept(stale_runs=0, expired_approvals=0)
        finally:
            running -= 1

    monkeypatch.setattr("desk.tasks.sweep", a_pass_held_open)
    async with worker_running(db, mongo_uri, interval_ms=50):
        await until(lambda: calls > 1, what="a scheduled pass")
        await asyncio.sleep(0.5)  # ten more intervals while that pass is held open
        go_on.set()

    assert most == 1  # the other nine were skipped, not stacked on a database already slow to answer


def _job_ended(caplog) -> bool:
    """APScheduler has logged the end of a sweep job: done, or failed (cancelled) before the fix."""
    ends = ("executed successfully", "raised an exception")
    return any(r.name.startswith("apscheduler") and any(e in r.getMessage() for e in ends) for r in caplog.records)


async def _ended(db, run_id: ObjectId) -> bool:
    return (await run_of(db, run_id))["status"] == "error"


def test_scheduler_without_mongodb_uri_exits_with_a_readable_config_error(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST") and k != "MONGODB_URI"}

    done = subprocess.run(  # noqa: S603 - our own interpreter and script
        [sys.executable, str(ROOT / "scheduler.py")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert lines[-1].startswith("desk: MONGODB_URI: "), done.stderr
    assert "Traceback" not in done.stderr


# --- sessions nobody will let go ---------------------------------------------------------------------


async def claimed_long_ago(db, person: dict) -> None:
    """The claim is older than a run's lease (played by moving it into the past)."""
    await claimed_ago(db, person, copilot_sessions.CLAIM_GRACE + timedelta(seconds=1))


async def claimed_ago(db, person: dict, ago: timedelta) -> None:
    await db["copilot_sessions"].update_one({"userId": ObjectId(person["id"])}, {"$set": {"claimedAt": now() - ago}})


async def test_a_session_claimed_by_a_run_that_was_never_stored_is_freed(
    ai_settings, provider, fake_provider, copilot, make_user, db
):
    sam, ann = await make_user("user"), await make_user("user")
    for person in (sam, ann):  # their processes died between claiming the session and storing the run
        session = await current_session(db=db, settings=ai_settings, actor=actor(person))
        await copilot_sessions.claim_session(db, ObjectId(session.id), ObjectId())
    await claimed_long_ago(db, sam)  # ann's claim is recent: her run may still be being stored

    swept = await sweep(db)

    assert swept == Swept(stale_runs=0, expired_approvals=0, freed_sessions=1)
    assert await session_is_free(db, sam) and not await session_is_free(db, ann)
    fake_provider.script(Turn.text("I'm back."))
    assert (await copilot(sam, "are you there?"))[-1].status == "complete"


async def test_a_session_held_by_a_run_that_ended_elsewhere_is_freed(ai_settings, provider, make_user, db):
    sam = await make_user("user")
    run_id = await start_run(db, ai_settings, provider, sam)
    await abort_runs(db=db, user_id=sam["id"])  # a logout ended the run; its process died before letting go
    await claimed_long_ago(db, sam)

    swept = await sweep(db)

    assert swept.freed_sessions == 1 and await session_is_free(db, sam)
    assert (await run_of(db, run_id))["status"] == "aborted"  # the run itself is left as it was
    assert await sweep(db) == Swept(stale_runs=0, expired_approvals=0)


async def test_a_session_held_by_an_ended_run_is_freed_only_once_its_last_model_call_is_surely_over(
    ai_settings, provider, make_user, db
):
    sam, ann = await make_user("user"), await make_user("user")
    for person in (sam, ann):
        await start_run(db, ai_settings, provider, person)
        await abort_runs(db=db, user_id=person["id"])  # a logout ended the run: it stops only at its next step
    await claimed_ago(db, sam, timedelta(minutes=2))  # its model call may still be streaming
    await claimed_ago(db, ann, timedelta(minutes=4))  # longer than any model call: its process died

    swept = await sweep(db)

    assert swept.freed_sessions == 1
    assert not await session_is_free(db, sam) and await session_is_free(db, ann)


async def test_a_session_held_long_by_a_run_that_still_runs_is_not_freed(ai_settings, provider, make_user, db):
    sam = await make_user("user")
    run_id = await start_run(db, ai_settings, provider, sam)
    await claimed_ago(db, sam, timedelta(minutes=30))  # a long run, renewing its lease at every step

    swept = await sweep(db)

    assert swept == Swept(stale_runs=0, expired_approvals=0, freed_sessions=0)
    assert not await session_is_free(db, sam) and (await run_of(db, run_id))["status"] == "running"
    with pytest.raises(ApprovalPending):  # sam's next message waits for it: one stream at a time
        await start_run(db, ai_settings, provider, sam, "and another thing")
