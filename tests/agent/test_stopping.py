"""How a run stops when the person goes away or loses access while it is in the middle of something.

A logout (or a deactivation) ends the person's runs in the database; a turn in this web process is
interrupted at once, even in the middle of a model call, and one in another process notices at
its next check. A change the person approved is made only if the run is still going when it
comes to be made, and one that never was is recorded as such. A model call that outlasts the
run's lease keeps its run: the sweeper ends only runs whose process is gone.
"""

import asyncio
from datetime import timedelta

import pytest
from bson import ObjectId

from desk.agent.copilot import approvals
from desk.agent.copilot import start as start_module
from desk.agent.copilot import turn as copilot_turn
from desk.agent.copilot.sessions import abort_runs
from desk.agent.copilot.sweeper import sweep
from desk.agent.core import record
from desk.agent.core.store import agent_runs, copilot_sessions
from desk.work_orders import service as work_orders
from tests.agent.test_runtime import drain, the_run
from tests.fake_provider import Turn
from tests.helpers import actor


async def logged_out_elsewhere(db, person: dict) -> None:
    """What a logout in another web process does to this one: the database only, no interrupt here."""
    for run in await agent_runs.running_runs(db, ObjectId(person["id"])):
        if await agent_runs.finish_run(db, run["_id"], "aborted"):
            await approvals.expire_for_run(db, run["_id"])


@pytest.fixture
def short_lease(monkeypatch):
    """A 0.3 s lease (renewed every 0.1 s) and a 0.2 s grace for claims: minutes of a real run in a second."""
    monkeypatch.setattr(record, "LEASE", timedelta(seconds=0.3))
    monkeypatch.setattr(start_module, "LEASE", timedelta(seconds=0.3))
    monkeypatch.setattr(copilot_sessions, "CLAIM_GRACE", timedelta(seconds=0.2))


async def test_a_logout_mid_call_cuts_the_call_short_and_nothing_it_asked_for_runs(
    start, fake_provider, make_user, make_order, db
):
    sam = await make_user()
    tap = await make_order(sam, "Leaking tap")
    fake_provider.script(Turn.tool_calls(("delete_work_order", {"id": tap.id})).with_delay(1.0))

    async def log_out_while_the_model_thinks() -> None:
        assert await fake_provider.wait_for_request()
        await abort_runs(db=db, user_id=sam["id"])

    logout = asyncio.create_task(log_out_while_the_model_thinks())
    events = await drain(await start(sam))
    await logout

    assert [e.kind for e in events] == ["message_done"]
    assert events[-1].status == "aborted" and events[-1].notice == copilot_turn.INTERRUPTED
    assert await fake_provider.wait_for_disconnect()  # the upstream call was closed, not waited out
    assert (await the_run(db))["status"] == "aborted"
    assert await db["agent_tool_calls"].count_documents({}) == 0
    assert await work_orders.get(db=db, actor=actor(sam), order_id=tap.id) is not None
    assert (await db["copilot_sessions"].find_one({}))["runningRunId"] is None  # the next message may start


@pytest.mark.parametrize("where", ["this process", "another process"])
async def test_a_change_approved_as_the_person_logs_out_is_not_made(
    start, fake_provider, make_user, make_order, db, where
):
    sam = await make_user()
    tap = await make_order(sam, "Leaking tap")
    fake_provider.script(*Turn.read_then_update(tap.id, status="done"), Turn.text("never asked for"))

    async def approve_then_log_out(event) -> None:
        if event.kind == "tool_approval_required":
            await approvals.decide(db=db, actor=actor(sam), tool_call_id=event.tool_call_id, approve=True)
            if where == "this process":
                await abort_runs(db=db, user_id=sam["id"])
            else:
                await logged_out_elsewhere(db, sam)

    events = await drain(await start(sam), approve_then_log_out)

    assert events[-1].kind == "message_done" and events[-1].status == "aborted"
    assert (await work_orders.get(db=db, actor=actor(sam), order_id=tap.id)).status == "pending"
    (staged,) = await db["agent_tool_calls"].find({"tool": "update_work_order"}).to_list()
    assert (staged["approval"]["status"], staged["outcome"]) == ("approved", "aborted")
    assert (await the_run(db))["status"] == "aborted"
    assert len(fake_provider.requests) == 2


async def test_a_logout_while_a_change_waits_expires_it_on_the_stream(start, fake_provider, make_user, make_order, db):
    sam = await make_user()
    tap = await make_order(sam, "Leaking tap")
    fake_provider.script(*Turn.read_then_update(tap.id, status="done"))

    async def log_out(event) -> None:
        if event.kind == "tool_approval_required":
            await abort_runs(db=db, user_id=sam["id"])

    events = await drain(await start(sam), log_out)

    (asked,) = [e for e in events if e.kind == "tool_approval_required"]
    assert [e.kind for e in events][-2:] == ["tool_approval_expired", "message_done"]
    assert events[-2].tool_call_id == asked.tool_call_id and events[-1].status == "aborted"
    (staged,) = await db["agent_tool_calls"].find({"tool": "update_work_order"}).to_list()
    assert (staged["approval"]["status"], staged["outcome"]) == ("expired", "expired")


async def test_a_change_approved_just_before_the_stream_closed_is_recorded_as_never_made(
    start, fake_provider, make_user, make_order, db
):
    sam = await make_user()
    tap = await make_order(sam, "Leaking tap")
    fake_provider.script(*Turn.read_then_update(tap.id, status="done"))
    stream = (await start(sam)).events()
    async for event in stream:
        if event.kind == "tool_approval_required":
            await approvals.decide(db=db, actor=actor(sam), tool_call_id=event.tool_call_id, approve=True)
            break  # and the tab closes before the run looks at the decision
    await stream.aclose()

    (staged,) = await db["agent_tool_calls"].find({"tool": "update_work_order"}).to_list()
    assert (staged["approval"]["status"], staged["outcome"]) == ("approved", "aborted")
    assert (await work_orders.get(db=db, actor=actor(sam), order_id=tap.id)).status == "pending"
    assert (await the_run(db))["status"] == "aborted"


async def test_a_model_call_longer_than_the_lease_keeps_its_run(start, fake_provider, make_user, db, short_lease):
    sam = await make_user()
    fake_provider.script(Turn.slow("a long answer that keeps on coming", delay=0.1, chunks=10))
    swept = []

    async def sweep_while_it_streams(event) -> None:
        if event.kind == "token":
            swept.append(await sweep(db))

    events = await drain(await start(sam), sweep_while_it_streams)

    assert events[-1].kind == "message_done" and events[-1].status == "complete"
    assert len(swept) >= 8 and all(s.stale_runs == 0 and s.freed_sessions == 0 for s in swept)
    assert (await the_run(db))["status"] == "complete"


async def test_a_model_slow_to_its_first_token_keeps_its_conversation(start, fake_provider, make_user, db, short_lease):
    sam = await make_user()
    fake_provider.script(Turn.text("at last", chunks=1).with_delay(0.25))  # first token after 0.5 s: past the grace

    async def sweep_meanwhile() -> list:
        assert await fake_provider.wait_for_request()
        swept = []
        for _ in range(4):
            await asyncio.sleep(0.1)  # the point: sweeps spread over the slow first token (leases are real time)
            swept.append(await sweep(db))
        return swept

    sweeping = asyncio.create_task(sweep_meanwhile())
    events = await drain(await start(sam))
    swept = await sweeping

    assert events[-1].status == "complete"
    assert all(s.stale_runs == 0 and s.freed_sessions == 0 for s in swept)


async def test_a_logout_in_another_process_stops_a_long_call_within_a_renewal(
    start, fake_provider, make_user, db, short_lease
):
    sam = await make_user()
    fake_provider.script(Turn.slow("a long answer that keeps on coming", delay=0.2, chunks=10))
    turn, done = await start(sam), []

    async def log_out_elsewhere(event) -> None:
        if event.kind == "token" and not done:
            assert await turn.recorded()
            await logged_out_elsewhere(db, sam)
            done.append(event)

    events = await drain(turn, log_out_elsewhere)

    assert events[-1].kind == "message_done" and events[-1].status == "aborted"
    assert sum(e.kind == "token" for e in events) < 5  # stopped after a renewal (0.1 s), not at the answer's end
    assert await fake_provider.wait_for_disconnect()


async def test_a_logout_while_the_reader_is_busy_never_cancels_the_readers_own_code(
    start, fake_provider, make_user, db
):
    """The drawer or an SSE pump may wait between events; the stop must come from the run, not as a cancel there."""
    sam = await make_user()
    fake_provider.script(Turn.slow("a long answer that keeps on coming", delay=0.05, chunks=10))
    busy = []

    async def log_out_then_keep_busy(event) -> None:
        if event.kind == "token" and not busy:
            await abort_runs(db=db, user_id=sam["id"])
            await asyncio.sleep(0.1)  # the reader's own work between two events
            busy.append(event)

    events = await drain(await start(sam), log_out_then_keep_busy)

    assert busy and events[-1].kind == "message_done" and events[-1].status == "aborted"
    assert events[-1].notice == copilot_turn.INTERRUPTED
    assert sum(e.kind == "token" for e in events) == 1
