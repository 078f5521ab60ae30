"""What the copilot's message route accepts and refuses before a run starts (the JSON envelope)."""

import pytest
from bson import ObjectId

from desk.agent.copilot import start
from desk.agent.copilot.sessions import current_session
from desk.errors import DeskError, ErrorCode
from desk.users import service as users_service
from desk.users.models import UserAdminUpdate
from tests.agent.api_helpers import (
    AI,
    PROMPT_MARKER,
    frames,
    next_of,
    open_session,
    refused,
    sam_in_a_session,
    send,
    waiting_for_approval,
)
from tests.fake_provider import Turn
from tests.helpers import actor, reconfigure


async def test_someone_elses_session_is_404(provider, client_for, make_user, db):
    sam, eve = await make_user("user"), await make_user("user")
    sams_session = await open_session(await client_for(sam))
    eve_client = await client_for(eve)

    response, _ = await send(eve_client, sams_session, f"read sam's chat {PROMPT_MARKER}")
    refused(response, 404, ErrorCode.NOT_FOUND)
    for garbage in ("not-an-id", "0" * 24):
        response, _ = await send(eve_client, garbage, "hi")
        refused(response, 404, ErrorCode.NOT_FOUND)
    assert await db["agent_runs"].count_documents({}) == 0


@pytest.mark.parametrize("content", ["", "   ", "x" * (4001 - len(PROMPT_MARKER)) + PROMPT_MARKER])
async def test_message_length_outside_1_to_4000_is_400(provider, client_for, make_user, db, content):
    _sam, client, session_id = await sam_in_a_session(client_for, make_user)

    response, _ = await send(client, session_id, content)

    refused(response, 400, ErrorCode.VALIDATION_ERROR)
    assert await db["agent_runs"].count_documents({}) == 0


JSON = {"Content-Type": "application/json"}


UNUSUAL_REQUESTS = {  # each goes FastAPI's own way (api.StreamRoute), and is answered as on any route
    "a query the route does not take": ({"params": {"draft": "1"}}, "draft: unknown field"),
    "a JSON body sent as text": ({"headers": {"Content-Type": "text/plain"}}, "Send the request body as JSON"),
    "an idempotency key over 200 characters": ({"headers": {"Idempotency-Key": "k" * 201}}, "idempotency-key: may"),
    "a body that is not JSON": ({"content": b'{"content": "hi"', "headers": JSON}, "not valid JSON"),
    "a field the message does not have": ({"json": {"content": "hi", "urgent": True}}, "urgent: unknown field"),
}


@pytest.mark.parametrize("unusual", UNUSUAL_REQUESTS.values(), ids=UNUSUAL_REQUESTS.keys())
async def test_an_unusual_message_request_is_refused_as_any_route_refuses_it(
    provider, fake_provider, client_for, make_user, db, unusual
):
    _sam, client, session_id = await sam_in_a_session(client_for, make_user)
    request, says = unusual

    response = await client.post(f"{AI}/sessions/{session_id}/messages", **({"json": {"content": "hi"}} | request))

    assert says in refused(response, 400, ErrorCode.VALIDATION_ERROR)["message"] + response.text
    assert await db["agent_runs"].count_documents({}) == 0 and fake_provider.requests == []


async def test_a_message_sent_as_json_with_a_charset_streams_too(provider, fake_provider, client_for, make_user):
    _sam, client, session_id = await sam_in_a_session(client_for, make_user)
    fake_provider.script(Turn.text("Three are open."), Turn.text("Still three."))
    url = f"{AI}/sessions/{session_id}/messages"

    plain = await client.post(url, json={"content": "what is open?"})
    with_charset = await client.post(
        url, content=b'{"content": "and now?"}', headers={"Content-Type": "application/json; charset=utf-8"}
    )

    assert [event.kind for event in frames(plain.text)] == [event.kind for event in frames(with_charset.text)]
    assert "".join(event.text for event in frames(with_charset.text) if event.kind == "token") == "Still three."
    assert fake_provider.requests[1]["messages"][-1] == {"role": "user", "content": "and now?"}


async def test_message_of_4000_chars_is_accepted(provider, fake_provider, client_for, make_user):
    _sam, client, session_id = await sam_in_a_session(client_for, make_user)
    fake_provider.script(Turn.text("That is long."))

    response, events = await send(client, session_id, "x" * 4000)

    assert response.status_code == 200 and events[-1].status == "complete"
    assert fake_provider.requests[0]["messages"][-1] == {"role": "user", "content": "x" * 4000}


async def test_message_when_the_desk_turned_ai_off_is_403(ai_settings, provider, client_for, make_user, db):
    _sam, client, session_id = await sam_in_a_session(client_for, make_user)
    reconfigure(ai_settings, ai_enabled=False)

    response, _ = await send(client, session_id, f"hello {PROMPT_MARKER}")

    refused(response, 403, ErrorCode.FORBIDDEN)
    assert await db["agent_runs"].count_documents({}) == 0


async def test_a_message_keeps_its_line_breaks_but_no_other_control_character(
    provider, fake_provider, client_for, make_user, db
):
    _sam, client, session_id = await sam_in_a_session(client_for, make_user)

    response, _ = await send(client, session_id, f"hello\u001b[2J {PROMPT_MARKER}")

    error = refused(response, 400, ErrorCode.VALIDATION_ERROR)
    assert [problem["field"] for problem in error["details"]["fields"]] == ["content"]
    assert await db["agent_runs"].count_documents({}) == 0 and not fake_provider.requests
    fake_provider.script(Turn.text("Noted."))
    response, events = await send(client, session_id, "Two things:\r\n1. the tap\r\n2. the door")
    assert response.status_code == 200 and events[-1].status == "complete"
    assert fake_provider.requests[-1]["messages"][-1]["content"] == "Two things:\n1. the tap\n2. the door"


async def test_second_message_while_a_run_waits_for_approval_is_409(
    provider, fake_provider, live_client_for, make_user, make_order, db
):
    sam = await make_user("user")
    order = await make_order(sam)
    client = await live_client_for(sam)
    session_id = await open_session(client)

    async with waiting_for_approval(client, session_id, fake_provider, order.id) as (events, seen, staged):
        response, _ = await send(client, session_id, f"and another thing {PROMPT_MARKER}")
        refused(response, 409, ErrorCode.AI_APPROVAL_PENDING)

        await client.post(f"{AI}/tool-calls/{staged.tool_call_id}/decide", json={"approve": True})
        await next_of(events, "message_done", seen)
    assert await db["agent_runs"].count_documents({}) == 1


async def test_a_message_to_ones_own_archived_session_is_409_closed(provider, client_for, make_user, db):
    sam = await make_user("user")
    client = await client_for(sam)
    old_session = await open_session(client)
    await open_session(client)  # a new conversation archives the old one

    response, _ = await send(client, old_session, f"hello again {PROMPT_MARKER}")

    error = refused(response, 409, ErrorCode.CONFLICT)
    assert error["message"] == "This conversation is closed; start a new one."
    assert await db["agent_runs"].count_documents({}) == 0


async def test_a_deactivated_person_is_refused_before_a_run_starts(db, ai_settings, provider, fake_provider, make_user):
    sam, boss = await make_user("user"), await make_user("admin")
    session = await current_session(db=db, settings=ai_settings, actor=actor(sam))
    await users_service.update_user(db=db, actor=actor(boss), user_id=sam["id"], data=UserAdminUpdate(active=False))

    with pytest.raises(DeskError) as caught:  # e.g. a request authenticated just before the deactivation
        await start.begin(
            db=db,
            settings=ai_settings,
            provider=provider,
            actor=actor(sam),
            session_id=session.id,
            content=f"hello {PROMPT_MARKER}",
            ip="127.0.0.1",
        )

    assert (caught.value.status, caught.value.code) == (403, ErrorCode.FORBIDDEN)
    assert await db["agent_runs"].count_documents({}) == 0
    assert (await db["copilot_sessions"].find_one({"_id": ObjectId(session.id)}))["runningRunId"] is None
    assert fake_provider.requests == []
