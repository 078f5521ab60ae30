"""The copilot's conversations over HTTP: opening one, listing them and one's own runs."""

import asyncio
from datetime import timedelta

from bson import ObjectId

from desk.agent.core.store import agent_messages, agent_runs
from desk.errors import ErrorCode
from desk.schema import now
from desk.users import service as users_service
from tests.agent.api_helpers import (
    AI,
    PROMPT_MARKER,
    next_of,
    oid,
    open_session,
    refused,
    sam_in_a_session,
    send,
    waiting_for_approval,
)
from tests.fake_provider import Turn
from tests.helpers import actor, reconfigure


async def test_open_session_is_201_and_archives_the_previous_one(provider, client_for, make_user, db):
    sam = await make_user("user")
    client = await client_for(sam)

    response = await client.post(f"{AI}/sessions")
    second = await client.post(f"{AI}/sessions")

    assert response.status_code == 201 and second.status_code == 201
    body = second.json()
    assert body["userId"] == sam["id"] and body["status"] == "active"
    assert set(body) == {"id", "userId", "status", "createdAt", "updatedAt"}
    stored = {str(s["_id"]): s["status"] for s in await db["copilot_sessions"].find({}).to_list()}
    assert stored == {response.json()["id"]: "archived", body["id"]: "active"}


async def test_open_session_is_403_when_the_desk_has_ai_off(settings, client_for, make_user, db):
    assert settings.ai_enabled is False  # the default: a fresh checkout has no AI
    sam = await make_user("user")
    client = await client_for(sam)

    refused(await client.post(f"{AI}/sessions"), 403, ErrorCode.FORBIDDEN)
    # no provider is configured either: the message route must still say "off", not "unavailable"
    refused(await client.post(f"{AI}/sessions/{'a' * 24}/messages", json={"content": "hi"}), 403, ErrorCode.FORBIDDEN)
    # and it says so before it looks at the message: the whole feature is off, whatever is sent
    refused(await client.post(f"{AI}/sessions/{'a' * 24}/messages", json={"content": ""}), 403, ErrorCode.FORBIDDEN)
    assert await db["copilot_sessions"].count_documents({}) == 0


async def test_open_session_is_403_when_the_person_turned_ai_off(provider, client_for, make_user, db):
    sam, client, session_id = await sam_in_a_session(client_for, make_user)
    await users_service.set_own_ai(db=db, actor=actor(sam), enabled=False)

    refused(await client.post(f"{AI}/sessions"), 403, ErrorCode.FORBIDDEN)
    response, _ = await send(client, session_id, f"hello {PROMPT_MARKER}")
    refused(response, 403, ErrorCode.FORBIDDEN)
    assert await db["agent_runs"].count_documents({}) == 0


async def test_ten_concurrent_opens_leave_exactly_one_active_session(provider, client_for, make_user, db):
    sam = await make_user("user")
    client = await client_for(sam)

    responses = await asyncio.gather(*(client.post(f"{AI}/sessions") for _ in range(10)))

    created = {r.json()["id"] for r in responses if r.status_code == 201}
    assert created, [r.text for r in responses]
    for response in responses:
        if response.status_code != 201:
            refused(response, 409, ErrorCode.AI_APPROVAL_PENDING)
    active = await db["copilot_sessions"].find({"userId": oid(sam), "status": "active"}).to_list()
    assert len(active) == 1 and str(active[0]["_id"]) in created


async def test_new_session_while_a_run_waits_for_approval_is_409(
    provider, fake_provider, live_client_for, make_user, make_order, db
):
    sam, client, session_id = await sam_in_a_session(live_client_for, make_user)
    order = await make_order(sam, "Leaking tap")

    async with waiting_for_approval(client, session_id, fake_provider, order.id) as (events, seen, staged):
        busy = refused(await client.post(f"{AI}/sessions"), 409, ErrorCode.AI_APPROVAL_PENDING)
        assert busy["message"] == "Your last conversation is still running or waiting for your approval."

        decided = await client.post(f"{AI}/tool-calls/{staged.tool_call_id}/decide", json={"approve": False})
        assert decided.status_code == 200
        done = await next_of(events, "message_done", seen)
    assert done.status == "complete"
    assert (await client.post(f"{AI}/sessions")).status_code == 201  # idle again: a new one may start


async def test_list_sessions_shows_recent_sessions_with_at_most_50_messages(
    ai_settings, provider, fake_provider, client_for, make_user
):
    reconfigure(ai_settings, ai_rate_limit_max=1000)
    sam, other = await make_user("user"), await make_user("user")
    client = await client_for(sam)
    first = await open_session(client)
    fake_provider.script(Turn.text("an old answer"))
    await send(client, first, "an old question")
    session_id = await open_session(client)
    for n in range(1, 27):  # 26 turns: 52 messages
        fake_provider.script(Turn.text(f"answer {n}"))
        response, events = await send(client, session_id, f"question {n}")
        assert response.status_code == 200 and events[-1].status == "complete"
    other_client = await client_for(other)
    await open_session(other_client)

    listed = (await client.get(f"{AI}/sessions")).json()

    assert [s["id"] for s in listed] == [session_id, first]  # newest first, only sam's
    messages = listed[0]["messages"]
    assert len(messages) == 50
    # the newest 50, oldest first: question 1 and answer 1 fell off the front
    assert [m["content"] for m in messages[:2]] == ["question 2", "answer 2"]
    assert [m["content"] for m in messages[-2:]] == ["question 26", "answer 26"]
    assert [m["role"] for m in messages[:4]] == ["user", "assistant", "user", "assistant"]
    assert [m["content"] for m in listed[1]["messages"]] == ["an old question", "an old answer"]
    assert (await other_client.get(f"{AI}/sessions")).json()[0]["messages"] == []


async def test_a_long_history_lists_the_20_newest_conversations_and_the_50_newest_runs(
    provider, client_for, make_user, db
):
    sam = await make_user("user")
    client = await client_for(sam)
    opened, started, day_one = [], [], now() - timedelta(days=1)
    for n in range(21):
        opened.append(await open_session(client))
        a_minute_apart = {"$set": {"createdAt": day_one + timedelta(minutes=n)}}  # no two in one millisecond
        await db["copilot_sessions"].update_one({"_id": ObjectId(opened[-1])}, a_minute_apart)
    for n in range(51):  # runs as the runtime writes them (the turns themselves are not the point here)
        run = agent_runs.new_run(
            session_id=ObjectId(opened[-1]), user_id=oid(sam), mode="copilot", model="m", lease=timedelta(0)
        )
        await agent_runs.insert_run(db, {**run, "startedAt": day_one + timedelta(minutes=n)})
        await agent_runs.finish_run(db, run["_id"], "complete")
        started.append(str(run["_id"]))

    sessions_listed = (await client.get(f"{AI}/sessions")).json()
    runs_listed = (await client.get(f"{AI}/runs")).json()

    assert [s["id"] for s in sessions_listed] == opened[::-1][:20]
    assert [r["id"] for r in runs_listed] == started[::-1][:50]
    oldest = await client.get(f"{AI}/runs/{started[0]}")  # off the list, still there by its id
    assert oldest.status_code == 200 and oldest.json()["run"]["id"] == started[0]


async def test_messages_written_in_the_same_millisecond_keep_their_order(
    provider, fake_provider, client_for, make_user, monkeypatch
):
    frozen = now()
    monkeypatch.setattr(agent_messages, "now", lambda: frozen)  # every message of the turn gets one timestamp
    _sam, client, session_id = await sam_in_a_session(client_for, make_user)
    fake_provider.script(Turn.tool_calls(("get_profile", {}), text="Let me look."), Turn.text("You are Sam."))

    _, events = await send(client, session_id, "who am I?")

    listed = (await client.get(f"{AI}/sessions")).json()[0]["messages"]
    assert [m["content"] for m in listed] == ["who am I?", "Let me look.", "You are Sam."]
    detail = (await client.get(f"{AI}/runs/{events[-1].run_id}")).json()
    assert [m["role"] for m in detail["messages"]] == ["user", "assistant", "tool", "assistant"]


async def test_a_step_that_only_called_tools_is_not_listed_as_an_empty_message(
    provider, fake_provider, client_for, make_user, db
):
    _sam, client, session_id = await sam_in_a_session(client_for, make_user)
    fake_provider.script(Turn.tool_calls(("get_profile", {})), Turn.text("You are Sam."))

    await send(client, session_id, "who am I?")

    listed = (await client.get(f"{AI}/sessions")).json()[0]["messages"]
    assert [(m["role"], m["content"]) for m in listed] == [("user", "who am I?"), ("assistant", "You are Sam.")]
    silent = await db["agent_messages"].find_one({"role": "assistant", "content": ""})
    assert silent["toolCalls"] == ["get_profile"]  # stored with the run, only not shown in the conversation


async def test_runs_are_listed_and_shown_to_their_owner_only(provider, fake_provider, client_for, make_user):
    sam, eve = await make_user("user"), await make_user("user")
    sam_client, eve_client = await client_for(sam), await client_for(eve)
    sam_session = await open_session(sam_client)
    fake_provider.script(Turn.tool_calls(("get_profile", {})), Turn.text("You are Sam."), Turn.text("Hi Eve."))
    _, sam_events = await send(sam_client, sam_session, "who am I?")
    _, eve_events = await send(eve_client, await open_session(eve_client), "hi")
    sam_run = sam_events[-1].run_id

    listed = (await sam_client.get(f"{AI}/runs")).json()
    detail = await sam_client.get(f"{AI}/runs/{sam_run}")

    assert [r["id"] for r in listed] == [sam_run]
    assert listed[0]["status"] == "complete" and listed[0]["mode"] == "copilot"
    assert listed[0]["actorId"] == sam["id"] and listed[0]["inputTokens"] == 200
    body = detail.json()
    assert body["run"]["id"] == sam_run
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert [c["tool"] for c in body["toolCalls"]] == ["get_profile"]
    refused(await sam_client.get(f"{AI}/runs/{eve_events[-1].run_id}"), 404, ErrorCode.NOT_FOUND)
    refused(await sam_client.get(f"{AI}/runs/nonsense"), 404, ErrorCode.NOT_FOUND)


async def test_a_person_switches_their_own_ai_off_and_on_through_the_api(provider, client_for, make_user, db):
    sam = await make_user()
    client = await client_for(sam)

    off = await client.patch("/api/v1/auth/me", json={"aiEnabled": False})
    refused = await client.post(f"{AI}/sessions")
    on = await client.patch("/api/v1/auth/me", json={"aiEnabled": True})
    opened = await client.post(f"{AI}/sessions")
    promoted = await client.patch("/api/v1/auth/me", json={"aiEnabled": True, "role": "admin"})

    assert (off.status_code, off.json()["aiEnabled"]) == (200, False)
    assert (refused.status_code, refused.json()["error"]["code"]) == (403, ErrorCode.FORBIDDEN)
    assert (on.status_code, on.json()["aiEnabled"]) == (200, True)
    assert opened.status_code == 201, opened.text
    assert promoted.status_code == 400  # only one's own AI switch: nothing else about oneself (VALIDATION_ERROR)
    assert (await db["users"].find_one({"_id": ObjectId(sam["id"])}))["role"] == "user"
