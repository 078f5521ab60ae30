"""What the runtime looks at again between model calls and before it makes an approved change.

A run can last minutes (a slow model, a change waiting for its approval). Whatever happened to the
person meanwhile — logged out, deactivated, their budget or the conversation's length used up — the
next model call and the next change go by how things stand now, not by how they stood at the start.
Each test changes the world from inside the run (at an event, while the run waits for its consumer)
and then looks at what the person and the database see.
"""

import asyncio
from dataclasses import replace

import pytest
from bson import ObjectId

from desk.agent.copilot import sessions
from desk.agent.copilot.toolset import REGISTRY
from desk.agent.core import budget
from desk.agent.core.events import RunEvent
from desk.agent.core.store import agent_runs
from desk.errors import ErrorCode
from desk.work_orders import service as work_orders
from desk.work_orders.models import WorkOrderUpdate
from tests.agent.test_first_token import conversation
from tests.agent.test_runtime import deciding, drain, the_run
from tests.fake_provider import Turn
from tests.helpers import actor, tuned, until


async def deactivate(db, person: dict) -> None:
    """`person` deactivated by a write the access-lost hook never saw (as from another process, before its abort lands).

    The service stops the runs itself (desk/agent/copilot/hooks.py); these tests pin the runtime's own re-check
    of the person as stored now, which must hold whatever the hook did or did not do yet.
    """
    await set_stored(db, person, active=False)


async def set_stored(db, person: dict, **fields) -> None:
    """Change the stored person directly: a change the access-lost hook never saw (tests the runtime's own guard)."""
    await db["users"].update_one({"_id": ObjectId(person["id"])}, {"$set": fields})


def after_first_result(action):
    async def hook(event: RunEvent) -> None:
        if event.kind == "tool_result":
            await action()

    return hook


async def test_a_logout_between_steps_stops_the_run_before_the_next_model_call(start, fake_provider, make_user, db):
    sam = await make_user()
    fake_provider.script(Turn.tool_calls(("list_my_work_orders", {})), Turn.text("never asked for"))

    events = await drain(await start(sam), after_first_result(lambda: sessions.abort_runs(db=db, user_id=sam["id"])))

    assert events[-1].kind == "message_done" and events[-1].status == "aborted"
    assert len(fake_provider.requests) == 1
    assert (await the_run(db))["status"] == "aborted"


async def test_a_person_deactivated_mid_run_gets_no_further_model_call(start, fake_provider, make_user, db):
    sam = await make_user()
    fake_provider.script(Turn.tool_calls(("list_my_work_orders", {})), Turn.text("never asked for"))

    events = await drain(await start(sam), after_first_result(lambda: deactivate(db, sam)))

    (error,) = [e for e in events if e.kind == "error"]
    assert error.code == ErrorCode.FORBIDDEN
    assert events[-1].status == "error"
    assert len(fake_provider.requests) == 1


async def test_a_tool_asked_for_after_ai_was_turned_off_mid_call_is_not_used(
    start, fake_provider, make_user, make_order, db
):
    """An admin turns AI off for sam while the model is answering; the tool call in that answer is refused."""
    sam = await make_user()
    await make_order(sam, "Leaking tap in kitchen")
    fake_provider.script(Turn.tool_calls(("list_my_work_orders", {})), Turn.text("never asked for"))

    async def turned_off(event: RunEvent) -> None:
        if event.kind == "tool_call_start":  # the model has answered; the runtime has not used the tool yet
            await set_stored(db, sam, aiEnabled=False)  # the hook never saw it: the runtime's own check

    events = await drain(await start(sam), turned_off)

    assert [(e.kind, e.outcome) for e in events if e.kind == "tool_result"] == [("tool_result", "forbidden")]
    (call,) = await db["agent_tool_calls"].find().to_list()
    assert (call["outcome"], call["result"]) == (
        "forbidden",
        {"error": "AI assistance is off for you. You can turn it on in your profile."},
    )
    (error,) = [e for e in events if e.kind == "error"]
    assert error.code == ErrorCode.FORBIDDEN and events[-1].status == "error"
    assert len(fake_provider.requests) == 1  # and no further model call


async def test_an_admin_demoted_mid_run_loses_the_admin_tools_at_once(start, fake_provider, make_user, db):
    boss = await make_user("admin")
    fake_provider.script(
        Turn.tool_calls(("get_profile", {})), Turn.tool_calls(("admin_list_users", {})), Turn.text("done")
    )
    demote = after_first_result(lambda: set_stored(db, boss, role="user"))  # unseen by the hook: the runtime's check

    events = await drain(await start(boss), demote)

    results = [(e.tool, e.outcome) for e in events if e.kind == "tool_result"]
    assert results == [("get_profile", "ok"), ("admin_list_users", "forbidden")]
    shown = [m for m in conversation(fake_provider.requests[-1]) if m[0] == "tool"]
    assert "admin_list_users is not available" in shown[-1][1] and boss["email"] not in shown[-1][1]


async def test_a_change_approved_just_before_the_person_is_deactivated_is_not_made(
    start, fake_provider, make_user, make_order, db
):
    sam = await make_user()
    tap = await make_order(sam, "Leaking tap")
    fake_provider.script(*Turn.read_then_update(tap.id, status="done"))
    approve = deciding(db, sam)

    async def approve_then_deactivated(event: RunEvent) -> None:
        await approve(event)
        if event.kind == "tool_approval_required":
            await deactivate(db, sam)

    events = await drain(await start(sam), approve_then_deactivated)

    assert [e.outcome for e in events if e.kind == "tool_result"] == ["ok", "forbidden"]
    assert (await work_orders.get(db=db, actor=actor(sam), order_id=tap.id)).status == "pending"
    (staged,) = await db["agent_tool_calls"].find({"tool": "update_work_order"}).to_list()
    assert (staged["approval"]["status"], staged["outcome"]) == ("approved", "forbidden")
    assert events[-1].status == "error"  # and the run goes no further: AI is off for a deactivated person
    assert len(fake_provider.requests) == 2


async def _ledger_broken(db, sam: dict) -> None:  # the budget can no longer be known: no call may be paid for
    today = f"global:{budget.now().date().isoformat()}"
    await db["agent_spend"].update_one({"_id": today}, {"$set": {"spentUsd": "unreadable"}})


async def _record_broken(db, sam: dict) -> None:  # whether AI is still on for sam can no longer be known
    await db["users"].update_one({"_id": ObjectId(sam["id"])}, {"$set": {"aiEnabled": "unreadable"}})


UNREADABLE = {"the ledger": (_ledger_broken, "unreadable"), "the person's record": (_record_broken, "aiEnabled")}


@pytest.mark.parametrize(("breaks", "error"), UNREADABLE.values(), ids=UNREADABLE.keys())
async def test_something_that_cannot_be_read_between_steps_ends_the_run_as_an_error(
    start, fake_provider, make_user, db, breaks, error
):
    sam = await make_user()
    fake_provider.script(Turn.tool_calls(("list_my_work_orders", {})), Turn.text("never asked for"))

    with pytest.raises(ValueError, match=error):
        await drain(await start(sam), after_first_result(lambda: breaks(db, sam)))

    assert len(fake_provider.requests) == 1  # no further call on an unknown answer
    run = await the_run(db)
    assert (run["status"], run["errorCode"]) == ("error", "internal")  # not "aborted": sam did not stop it
    assert (await db["copilot_sessions"].find_one({"userId": ObjectId(sam["id"])}))["runningRunId"] is None


async def test_the_first_charge_drops_the_persons_counters_of_earlier_minutes(start, fake_provider, make_user, db):
    sam = await make_user()
    person_key, *_ = budget.keys(user_id=sam["id"], agent="copilot")
    await db["agent_spend"].insert_one({"_id": person_key, "starts": {"0000-earlier": 7}, "spentUsd": 0.0})
    fake_provider.script(Turn.text("Nothing is open."))

    await drain(await start(sam))

    stored = await db["agent_spend"].find_one({"_id": person_key})
    assert list(stored["starts"]) == [budget._window(budget.now(), "127.0.0.1")]  # this minute's start only
    assert stored["spentUsd"] > 0


# --- the conversation must fit the model's context ---


async def test_the_oldest_turns_are_left_out_when_the_conversation_outgrows_the_context(
    start, fake_provider, make_user, ai_settings
):
    sam = await make_user()
    long_question = "Tell me about this: " + "x" * 2400  # about 600 tokens
    fake_provider.script(Turn.text("a1"), Turn.text("a2"))
    await drain(await start(sam, long_question))

    # a context of 1000 tokens: the system prompt (about 200) and the long question do not fit in 3/4 of it
    events = await drain(await start(sam, "q2", settings=tuned(ai_settings, ai_max_context_tokens=1000)))

    assert events[-1].status == "complete"
    assert conversation(fake_provider.requests[-1]) == [("assistant", "a1"), ("user", "q2")]


async def test_a_message_too_long_for_the_context_is_refused_before_any_model_call(
    start, fake_provider, make_user, ai_settings, db
):
    sam = await make_user()
    settings = tuned(ai_settings, ai_max_context_tokens=500)

    events = await drain(await start(sam, "x" * 4000, settings=settings))

    (error,) = [e for e in events if e.kind == "error"]
    assert error.code == ErrorCode.AI_BUDGET_EXCEEDED and "too long" in error.message
    assert events[-1].status == "budget_exceeded"
    assert fake_provider.requests == []
    (message,) = await db["agent_messages"].find().to_list()  # the question is kept: sam can copy it
    assert message["content"] == "x" * 4000


async def test_a_save_landing_between_the_last_look_and_the_change_is_kept_and_the_change_staged_again(
    start, fake_provider, make_user, make_order, db, monkeypatch
):
    sam = await make_user()
    tap = await make_order(sam, "Leaking tap")
    tool = REGISTRY.tools["update_work_order"]
    looks = 0

    async def saved_elsewhere_after_the_second_look(ctx, args):
        nonlocal looks
        looks += 1
        image = await tool.preimage(ctx, args)
        if looks == 2:  # the look made just before executing the approved change
            change = WorkOrderUpdate(version=image.version, title="Leaking tap (kitchen)")
            await work_orders.update(db=db, actor=actor(sam), order_id=tap.id, data=change)
        return image

    monkeypatch.setitem(REGISTRY.tools, tool.name, replace(tool, preimage=saved_elsewhere_after_the_second_look))
    fake_provider.script(*Turn.read_then_update(tap.id, priority="urgent"), Turn.text("It is urgent now."))

    events = await drain(await start(sam, "Make it urgent"), deciding(db, sam))

    first, second = [e for e in events if e.kind == "tool_approval_required"]
    assert second.diff.before["title"] == "Leaking tap (kitchen)"  # shown again, with the other save in it
    stale = await db["agent_tool_calls"].find_one({"_id": ObjectId(first.tool_call_id)})
    assert (stale["approval"]["status"], stale["outcome"], stale["executedVersion"]) == ("stale", "stale", None)
    order = await work_orders.get(db=db, actor=actor(sam), order_id=tap.id)
    assert (order.title, order.priority, order.version) == ("Leaking tap (kitchen)", "urgent", 3)
    assert events[-1].status == "complete"


async def test_a_run_cancelled_again_while_ending_still_frees_the_session(
    start, fake_provider, make_user, db, monkeypatch
):
    sam = await make_user()
    fake_provider.script(Turn.slow("a long answer", delay=0.2))
    turn = await start(sam)
    first_token = asyncio.Event()
    finish_run = agent_runs.finish_run

    async def cancelled_again_meanwhile(*args, **kwargs):  # as a server's cancel scope does, again and again
        listener.cancel()
        return await finish_run(*args, **kwargs)

    async def listen() -> None:
        async for event in turn.events():
            if event.kind == "token":
                first_token.set()

    listener = asyncio.create_task(listen())
    await first_token.wait()
    monkeypatch.setattr(agent_runs, "finish_run", cancelled_again_meanwhile)
    listener.cancel()  # the person leaves: the run winds down (bills, ends, frees the session)
    await asyncio.wait([listener])

    async def session_free() -> bool:
        session = await db["copilot_sessions"].find_one({"userId": ObjectId(sam["id"])})
        return session["runningRunId"] is None  # sam can send the next message at once

    await until(session_free, what="the wind-down, shielded from the second cancel, to free the session")
    assert (await the_run(db))["status"] == "aborted"
