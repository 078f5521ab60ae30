"""The copilot's Idempotency-Key: one run per key, for one day, also under races and retries."""

import asyncio
from datetime import timedelta

import pytest
from bson import ObjectId
from pymongo import AsyncMongoClient, MongoClient, monitoring

from desk.agent.copilot import start
from desk.agent.copilot.sessions import current_session
from desk.agent.core.store import agent_idempotency, copilot_sessions
from desk.errors import ErrorCode
from desk.schema import now
from tests.agent.api_helpers import (
    refused,
    run_docs,
    sam_in_a_session,
    send,
)
from tests.fake_provider import Turn
from tests.helpers import actor


async def test_idempotency_key_replay_is_409_with_the_first_run(provider, fake_provider, client_for, make_user, db):
    _sam, client, session_id = await sam_in_a_session(client_for, make_user)
    fake_provider.script(Turn.text("Hi there."))
    prefix = "nightly-import/3f1c9a7e/" + "x" * 150  # keys are compared whole, however long the shared start
    key = {"Idempotency-Key": f"{prefix}-1"}

    first, events = await send(client, session_id, "hello", headers=key)
    replay, _ = await send(client, session_id, "hello", headers=key)

    assert first.status_code == 200
    error = refused(replay, 409, ErrorCode.AI_MESSAGE_DUPLICATE)
    assert error["details"]["runId"] == events[-1].run_id
    assert [str(r["_id"]) for r in await run_docs(db)] == [events[-1].run_id]
    assert len(fake_provider.requests) == 1
    # another key is another message
    fake_provider.script(Turn.text("Again."))
    other, more = await send(client, session_id, "hello", headers={"Idempotency-Key": f"{prefix}-2"})
    assert other.status_code == 200 and more[-1].status == "complete"
    assert await db["agent_runs"].count_documents({}) == 2


async def test_concurrent_requests_with_one_idempotency_key_start_one_run(
    provider, fake_provider, client_for, make_user, db
):
    _sam, client, session_id = await sam_in_a_session(client_for, make_user)
    fake_provider.script(Turn.text("Hi there."))
    key = {"Idempotency-Key": "same-key"}

    answers = await asyncio.gather(*(send(client, session_id, "hello", headers=key) for _ in range(3)))

    statuses = sorted(response.status_code for response, _ in answers)
    assert statuses == [200, 409, 409]
    for response, _ in answers:
        if response.status_code == 409:
            refused(response, 409, ErrorCode.AI_MESSAGE_DUPLICATE)
    assert await db["agent_runs"].count_documents({}) == 1
    assert len(fake_provider.requests) == 1


@pytest.mark.parametrize(("taken_again", "let_in"), [(0, True), (1, True), (2, False)])
async def test_a_key_given_back_under_a_retry_is_tried_again(mongo_uri, db, taken_again, let_in):
    """The earlier message with this key is refused and gives it back between the retry's insert and its read.

    Should other messages keep taking the key and giving it back under the retry, it stops after
    three tries and is refused as a duplicate (of itself: its run never starts) instead of spinning.
    """
    user_id, key, retry_run = ObjectId(), "3f1c9a7e-given-back", ObjectId()
    held = {"_id": f"{user_id}:{key}", "runId": ObjectId(), "expiresAt": now() + timedelta(days=1)}
    await db["agent_idempotency"].insert_one(held)

    class GiveBack(monitoring.CommandListener):
        given_back = 0

        def started(self, event) -> None:
            pass

        def failed(self, event) -> None:
            pass

        def succeeded(self, event) -> None:
            with MongoClient(mongo_uri) as other:
                keys = other[db.name]["agent_idempotency"]
                if event.command_name == "insert" and event.reply.get("writeErrors"):
                    self.given_back += 1  # the retry found the key taken: now its holder lets go of it
                    keys.delete_one({"_id": held["_id"]})
                elif event.command_name == "find" and self.given_back <= taken_again:
                    keys.insert_one(held)  # and another message with the key takes it before the retry's next try

    listener = GiveBack()
    client: AsyncMongoClient = AsyncMongoClient(mongo_uri, tz_aware=True, event_listeners=[listener])
    try:
        earlier = await agent_idempotency.remember_key(client[db.name], user_id, key, retry_run)
    finally:
        await client.close()

    assert listener.given_back == taken_again + 1
    remembered = [doc["runId"] for doc in await db["agent_idempotency"].find().to_list()]
    if let_in:
        assert earlier is None  # not refused as a duplicate of a run that never started
        assert remembered == [retry_run]
    else:
        assert earlier == retry_run
        assert remembered == []  # the last holder gave it back: the person's next retry gets in


async def test_an_idempotency_key_is_remembered_for_one_day(provider, fake_provider, client_for, make_user, db):
    _sam, client, session_id = await sam_in_a_session(client_for, make_user)
    fake_provider.script(Turn.text("Hi there."))
    sent_at = now()

    response, events = await send(client, session_id, "hello", headers={"Idempotency-Key": "3f1c9a7e-today"})

    assert response.status_code == 200
    (remembered,) = await db["agent_idempotency"].find().to_list()
    assert str(remembered["runId"]) == events[-1].run_id
    assert abs(remembered["expiresAt"] - (sent_at + timedelta(days=1))) < timedelta(minutes=1)


async def test_a_message_refused_as_pending_can_be_retried_with_its_key(db, ai_settings, provider, make_user):
    sam = await make_user("user")
    session = await current_session(db=db, settings=ai_settings, actor=actor(sam))
    await copilot_sessions.claim_session(db, ObjectId(session.id), ObjectId())  # another run holds the session

    with pytest.raises(start.ApprovalPending):
        await start.begin(
            db=db,
            settings=ai_settings,
            provider=provider,
            actor=actor(sam),
            session_id=session.id,
            content="Hello",
            ip="127.0.0.1",
            idempotency_key="retry-me",
        )

    assert await db["agent_idempotency"].count_documents({}) == 0
