"""The desk-wide kill switch stops the copilot (issue 41): turns end `aborted`, new ones are refused.

While an admin has AI turned off, opening a conversation and sending a message are refused with
503 AI_TURNED_OFF, whose message says an admin turned assistance off; a turn in the middle of a
model call is cut off at once in the admin's process, and within the watcher's look in another
one. `/enable` undoes it. (The triage agent's side: tests/triage/test_kill_switch.py.)
"""

import asyncio

import pytest
from bson import ObjectId

from desk.agent.core import switch
from desk.agent.triage import service as agents
from desk.errors import AiTurnedOff, ErrorCode
from desk.schema import now
from tests.agent.api_helpers import AI, refused, sam_in_a_session, send
from tests.agent.test_runtime import drain, the_run
from tests.fake_provider import Turn
from tests.helpers import actor

ADMIN = "/api/v1/admin/agents"


async def test_new_conversations_and_messages_are_refused_while_ai_is_off(
    provider, client_for, make_user, fake_provider, db
):
    _, client, session_id = await sam_in_a_session(client_for, make_user)
    admin = await client_for(await make_user("admin"))
    assert (await admin.post(f"{ADMIN}/disable")).status_code == 200

    opened = refused(await client.post(f"{AI}/sessions"), 503, ErrorCode.AI_TURNED_OFF)
    response, _ = await send(client, session_id, "Which of my orders are urgent?")
    sent = refused(response, 503, ErrorCode.AI_TURNED_OFF)

    assert opened["message"] == sent["message"] == AiTurnedOff.default_message
    assert "An admin turned AI assistance off" in sent["message"]
    assert fake_provider.requests == []
    assert await db["agent_runs"].count_documents({}) == 0

    await admin.post(f"{ADMIN}/enable")
    fake_provider.script(Turn.text("None of them."))
    response, events = await send(client, session_id, "Which of my orders are urgent?")
    assert response.status_code == 200 and events[-1].status == "complete"


async def test_a_message_is_refused_when_another_process_turned_ai_off_and_gives_its_claim_back(
    provider, client_for, make_user, fake_provider, db, monkeypatch
):
    """This process kept the switch on; it reads it again beside the claim and refuses, leaving the session free."""
    monkeypatch.setattr(switch, "FRESH_SECONDS", 0.0)  # what this process kept is always too old to go by
    sam, client, session_id = await sam_in_a_session(client_for, make_user)
    assert switch.known().on  # read when the conversation was opened
    off = {"_id": switch.SWITCH_ID, "on": False, "changedBy": sam["id"], "changedAt": now()}
    await db["agent_config"].insert_one(off)  # what `switch.turn` stores, in a process of its own

    response, _ = await send(client, session_id, "Which of my orders are urgent?")

    refused(response, 503, ErrorCode.AI_TURNED_OFF)
    assert fake_provider.requests == []
    assert (await db["copilot_sessions"].find_one({"_id": ObjectId(session_id)}))["runningRunId"] is None

    await db["agent_config"].update_one({"_id": switch.SWITCH_ID}, {"$set": {"on": True}})
    fake_provider.script(Turn.text("None of them."))
    response, events = await send(client, session_id, "Which of my orders are urgent?")
    assert response.status_code == 200 and events[-1].status == "complete"


async def test_a_turn_in_the_middle_of_a_model_call_ends_aborted_and_says_why(start, fake_provider, make_user, db):
    sam, admin = await make_user(), await make_user("admin")
    fake_provider.script(Turn.text("A long answer that never comes").with_delay(5.0))

    async def turn_ai_off_while_the_model_thinks() -> None:
        assert await fake_provider.wait_for_request()
        await agents.set_ai(db=db, actor=actor(admin), on=False)

    switching = asyncio.create_task(turn_ai_off_while_the_model_thinks())
    events = await drain(await start(sam))
    await switching

    assert [e.kind for e in events] == ["message_done"]
    assert (events[-1].status, events[-1].notice) == ("aborted", switch.STOPPED)
    assert await fake_provider.wait_for_disconnect()  # the upstream call was closed, not waited out
    run = await the_run(db)
    assert (run["status"], run["errorCode"]) == ("aborted", "turned_off")
    assert (await db["copilot_sessions"].find_one({}))["runningRunId"] is None


async def test_a_turn_stops_when_another_process_turns_ai_off(start, fake_provider, make_user, db, monkeypatch):
    """Another web process stored the switch: nothing is published on this process's bus; its watcher reads it."""
    monkeypatch.setattr(switch, "WATCH_SECONDS", 0.05)  # speed only: the watcher looks every 50 ms, not every second
    sam, admin = await make_user(), await make_user("admin")
    fake_provider.script(Turn.text("A long answer that never comes").with_delay(5.0))

    async def elsewhere() -> None:
        assert await fake_provider.wait_for_request()
        off = {"_id": switch.SWITCH_ID, "on": False, "changedBy": admin["id"], "changedAt": now()}
        await db["agent_config"].insert_one(off)  # what `switch.turn` stores, in a process of its own

    switching = asyncio.create_task(elsewhere())
    events = await drain(await start(sam))
    await switching

    assert (events[-1].kind, events[-1].status, events[-1].notice) == ("message_done", "aborted", switch.STOPPED)
    assert (await the_run(db))["errorCode"] == "turned_off"


@pytest.mark.parametrize("ended_by", ["a logout", "its person's Stop"])
async def test_a_turn_stopped_for_another_reason_does_not_blame_the_switch(
    start, fake_provider, make_user, db, ended_by
):
    sam = await make_user()
    fake_provider.script(Turn.text("A long answer that never comes").with_delay(5.0))
    turn = await start(sam)

    async def stop() -> None:
        assert await fake_provider.wait_for_request()
        turn.interrupt(None if ended_by == "a logout" else sam["id"])
        turn.interrupt(str(ObjectId()))  # someone else's Stop changes nothing

    stopping = asyncio.create_task(stop())
    events = await drain(turn)
    await stopping

    assert events[-1].notice != switch.STOPPED
    assert (await the_run(db))["errorCode"] is None


async def test_a_change_waiting_for_approval_is_not_left_to_approve(start, fake_provider, make_user, make_order, db):
    sam, admin = await make_user(), await make_user("admin")
    tap = await make_order(sam, "Leaking tap")
    fake_provider.script(*Turn.read_then_update(tap.id, priority="urgent"), Turn.text("Done."))

    async def turn_ai_off_at_the_proposal(event) -> None:
        if event.kind == "tool_approval_required":
            await agents.set_ai(db=db, actor=actor(admin), on=False)

    events = await drain(await start(sam), turn_ai_off_at_the_proposal)

    assert (events[-1].kind, events[-1].status, events[-1].notice) == ("message_done", "aborted", switch.STOPPED)
    (call,) = await db["agent_tool_calls"].find({"tool": "update_work_order"}).to_list()
    assert call["approval"]["status"] == "expired"  # nothing left for Sam to approve once AI is back
    assert (await the_run(db))["errorCode"] == "turned_off"
