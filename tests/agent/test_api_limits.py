"""The copilot's limits over HTTP: the daily budget, the message rate, several refusals at once, a 500."""

from datetime import UTC, datetime, timedelta

import httpx
import pytest
from bson import ObjectId

from desk.agent.core import budget
from desk.agent.core.store import agent_idempotency, copilot_sessions
from desk.errors import ErrorCode
from desk.schema import now
from tests.agent.api_helpers import (
    PROMPT_MARKER,
    assert_clean,
    oid,
    open_session,
    refused,
    sam_in_a_session,
    send,
)
from tests.fake_provider import Turn
from tests.helpers import reconfigure


async def test_message_over_budget_is_429(ai_settings, provider, client_for, make_user, db):
    sam, client, session_id = await sam_in_a_session(client_for, make_user)
    await budget.charge(db, user_id=sam["id"], agent="copilot", usd=ai_settings.ai_daily_spend_usd)

    sent_at = now()
    response, _ = await send(client, session_id, f"hello {PROMPT_MARKER}")

    error = refused(response, 429, ErrorCode.AI_BUDGET_EXCEEDED)
    assert await db["agent_runs"].count_documents({}) == 0
    # try again when the ledger's day ends, at midnight UTC
    midnight = datetime(sent_at.year, sent_at.month, sent_at.day, tzinfo=UTC) + timedelta(days=1)
    wait = int(response.headers["Retry-After"])
    assert error["details"] == {"retryAfter": wait}
    assert abs(sent_at + timedelta(seconds=wait) - midnight) < timedelta(seconds=5)


async def test_message_rate_is_limited_per_user_and_address(
    ai_settings, provider, fake_provider, app, db, make_user, client_for, clock
):
    reconfigure(ai_settings, ai_rate_limit_max=2)
    sam, ann = await make_user("user"), await make_user("user")

    async def client(user: dict, ip: str) -> httpx.AsyncClient:
        logged_in = await client_for(user)
        logged_in._transport = httpx.ASGITransport(app, client=(ip, 4711))
        return logged_in

    sam_session = await open_session(await client(sam, "10.9.9.9"))
    address = "10.0.0.1"
    home, statuses = await client(sam, address), []
    clock.move(timedelta(seconds=45))  # the limiter counts per calendar minute: 15 s of this one are left
    for _ in range(2):
        fake_provider.script(Turn.text("ok"))
        statuses.append((await send(home, sam_session, "hi"))[0].status_code)
    response, _ = await send(home, sam_session, f"hi {PROMPT_MARKER}")

    assert statuses == [200, 200]
    error = refused(response, 429, ErrorCode.RATE_LIMITED)
    assert 1 <= int(response.headers["retry-after"]) <= 60 and error["details"]["retryAfter"] >= 1
    assert int(response.headers["retry-after"]) == error["details"]["retryAfter"] == 15
    fake_provider.script(Turn.text("ok"), Turn.text("ok"))
    other_address = await client(sam, "10.1.1.1")
    assert (await send(other_address, sam_session, "hi"))[0].status_code == 200  # same person, other address
    ann_home = await client(ann, address)
    ann_session = await open_session(ann_home)
    assert (await send(ann_home, ann_session, "hi"))[0].status_code == 200  # same address, other person
    clock.move(timedelta(seconds=15))
    fake_provider.script(Turn.text("ok"))
    assert (await send(home, sam_session, "hi"))[0].status_code == 200  # the next minute counts afresh


KEY = "3f1c9a7e-retry"


async def _a_run_in_progress(*, db, session_id, **_) -> None:
    await copilot_sessions.claim_session(db, ObjectId(session_id), ObjectId())  # another run holds the session


async def _a_closed_session(*, client, **_) -> None:
    await open_session(client)  # a new conversation archives the one the message goes to


async def _someone_elses_session(*, make_user, client_for, **_) -> str:
    return await open_session(await client_for(await make_user("user")))


async def _a_replayed_key(*, db, sam, **_) -> None:
    await agent_idempotency.remember_key(db, oid(sam), KEY, ObjectId())  # a message with this key started a run already


async def _the_budget_used_up(*, db, ai_settings, sam, **_) -> None:
    await budget.charge(db, user_id=sam["id"], agent="copilot", usd=ai_settings.ai_daily_spend_usd)


async def _the_rate_used_up(*, ai_settings, client, session_id, fake_provider, **_) -> None:
    reconfigure(ai_settings, ai_rate_limit_max=1)  # the app's clock stands still: both messages fall in one minute
    fake_provider.script(Turn.text("ok"))
    response, _ = await send(client, session_id, "this minute's one message")
    assert response.status_code == 200


async def _a_failure_of_ours(*, db, sam, **_) -> None:
    sams_day = budget.keys(user_id=sam["id"], agent="copilot")[0]
    await db["agent_spend"].insert_one({"_id": sams_day, "starts": "not a counter"})  # counting the start fails


AT_ONCE = {
    "a run in progress, over budget": (_a_run_in_progress, _the_budget_used_up, 429, ErrorCode.AI_BUDGET_EXCEEDED),
    "a replayed key, over the rate": (_a_replayed_key, _the_rate_used_up, 429, ErrorCode.RATE_LIMITED),
    "a closed session, over budget": (_a_closed_session, _the_budget_used_up, 409, ErrorCode.CONFLICT),
    "someone else's session, over the rate": (_someone_elses_session, _the_rate_used_up, 404, ErrorCode.NOT_FOUND),
    "a run in progress, a failure of ours": (_a_run_in_progress, _a_failure_of_ours, 500, ErrorCode.INTERNAL),
    "a closed session, a failure of ours": (_a_closed_session, _a_failure_of_ours, 500, ErrorCode.INTERNAL),
}


@pytest.mark.parametrize(("claim", "admission", "status", "code"), AT_ONCE.values(), ids=AT_ONCE.keys())
async def test_several_refusals_at_once_answer_the_first_and_a_failure_of_ours_is_a_500(
    ai_settings, provider, fake_provider, app, client_for, make_user, db, claim, admission, status, code
):
    sam = await make_user("user")
    client = await client_for(sam)
    client._transport = httpx.ASGITransport(app, raise_app_exceptions=False)  # a 500 is an answer, as over a network
    session_id = await open_session(client)
    given = {"db": db, "ai_settings": ai_settings, "sam": sam, "client": client, "session_id": session_id}
    given |= {"make_user": make_user, "client_for": client_for, "fake_provider": fake_provider}
    await admission(**given)  # first: using up the rate takes a message on the open, idle session
    session_id = await claim(**given) or session_id
    calls, stored_runs = len(fake_provider.requests), await db["agent_runs"].count_documents({})

    response, _ = await send(client, session_id, f"hello {PROMPT_MARKER}", headers={"Idempotency-Key": KEY})

    assert response.status_code == status, response.text
    assert_clean(response.text)
    refused(response, status, code)
    assert len(fake_provider.requests) == calls
    assert await db["agent_runs"].count_documents({}) == stored_runs


async def test_a_failure_of_ours_is_a_500_in_the_envelope(provider, fake_provider, app, client_for, make_user, db):
    sam = await make_user("user")
    client = await client_for(sam)
    client._transport = httpx.ASGITransport(app, raise_app_exceptions=False)  # a 500 is an answer, as over a network
    session_id = await open_session(client)
    await _a_failure_of_ours(db=db, sam=sam)

    response, _ = await send(client, session_id, f"hello {PROMPT_MARKER}")

    error = refused(response, 500, ErrorCode.INTERNAL)
    assert error["message"] == "Something went wrong on our side; it has been logged."
