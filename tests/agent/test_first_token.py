"""What stands between a message and the model's first token, and what is written while it streams.

`begin` runs its checks side by side and the run and message records are written once the first
token is out (issue 4). These tests hold the guarantees that ordering must keep: a refused message
never reaches the provider and gives back what it took; a record that cannot be stored stops the
answer and leaves a run that says why; the earlier turns the model is shown are the stored ones,
whichever web process wrote them.
"""

import asyncio
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta

import pytest
from bson import ObjectId

from desk.agent.copilot import start
from desk.agent.copilot import turn as copilot_turn
from desk.agent.copilot.sessions import current_session, open_session
from desk.agent.core import budget, history
from desk.agent.core.events import RunEvent
from desk.agent.core.store import agent_messages, copilot_sessions, keep
from desk.config import Settings
from desk.errors import DeskError, ErrorCode
from desk.schema import now
from desk.users import service as users_service
from tests.fake_provider import Turn
from tests.helpers import actor


@pytest.fixture
def send(db, ai_settings: Settings, provider):
    """Send one message as `person` on their active session (or `session_id`); returns the unstarted turn."""

    async def begin(
        person: dict,
        content: str = "Anything open?",
        *,
        settings: Settings | None = None,
        session_id: str | None = None,
        key: str | None = None,
    ) -> copilot_turn.CopilotTurn:
        chosen = settings or ai_settings
        if session_id is None:
            session_id = (await current_session(db=db, settings=ai_settings, actor=actor(person))).id
        return await start.begin(
            db=db,
            settings=chosen,
            provider=provider,
            actor=actor(person),
            session_id=session_id,
            content=content,
            ip="127.0.0.1",
            idempotency_key=key,
        )

    return begin


async def drain(turn: copilot_turn.CopilotTurn) -> list[RunEvent]:
    return [event async for event in turn.events()]


async def session_of(db, person: dict) -> dict:
    return await db["copilot_sessions"].find_one({"userId": ObjectId(person["id"]), "status": "active"})


# --- a refused message never reaches the provider, and gives back what it took -----------------------

Setup = Callable[..., Awaitable[dict]]


async def _desk_ai_off(*, ai_settings, **_) -> dict:
    return {"settings": ai_settings.model_copy(update={"ai_enabled": False})}


async def _person_ai_off(*, db, sam, **_) -> dict:
    await users_service.set_own_ai(db=db, actor=actor(sam), enabled=False)
    return {}


async def _someone_elses_session(*, db, ai_settings, make_user, **_) -> dict:
    eve = await make_user("user")
    return {"session_id": (await current_session(db=db, settings=ai_settings, actor=actor(eve))).id}


async def _closed_session(*, db, ai_settings, sam, **_) -> dict:
    old = await current_session(db=db, settings=ai_settings, actor=actor(sam))
    await open_session(db=db, settings=ai_settings, actor=actor(sam))  # archives the old one
    return {"session_id": old.id}


async def _budget_used_up(*, db, ai_settings, sam, **_) -> dict:
    await budget.charge(db, user_id=sam["id"], agent="copilot", usd=ai_settings.ai_daily_spend_usd)
    return {}


async def _rate_used_up(*, ai_settings, sam, send, fake_provider, **_) -> dict:
    once = ai_settings.model_copy(update={"ai_rate_limit_max": 1})
    fake_provider.script(Turn.text("Nothing is open."))
    await drain(await send(sam, settings=once))  # the one message this minute allows
    return {"settings": once}


async def _run_in_progress(*, db, sam, **_) -> dict:
    session = await session_of(db, sam)
    await copilot_sessions.claim_session(db, session["_id"], ObjectId())  # another run holds the session
    return {}


async def _key_replayed(*, sam, send, fake_provider, **_) -> dict:
    fake_provider.script(Turn.text("Nothing is open."))
    await drain(await send(sam, key="retry-1"))
    return {"key": "retry-1"}


REFUSALS: dict[str, tuple[Setup, ErrorCode]] = {
    "AI off for the desk": (_desk_ai_off, ErrorCode.FORBIDDEN),
    "AI off for the person": (_person_ai_off, ErrorCode.FORBIDDEN),
    "someone else's session": (_someone_elses_session, ErrorCode.NOT_FOUND),
    "a closed session": (_closed_session, ErrorCode.CONFLICT),
    "budget used up": (_budget_used_up, ErrorCode.AI_BUDGET_EXCEEDED),
    "rate used up": (_rate_used_up, ErrorCode.RATE_LIMITED),
    "a run in progress": (_run_in_progress, ErrorCode.AI_APPROVAL_PENDING),
    "a replayed key": (_key_replayed, ErrorCode.AI_MESSAGE_DUPLICATE),
}


@pytest.mark.parametrize(("setup", "code"), REFUSALS.values(), ids=REFUSALS.keys())
async def test_a_refused_message_never_reaches_the_provider_and_gives_back_what_it_took(
    db, ai_settings, send, fake_provider, make_user, setup: Setup, code: ErrorCode
):
    sam = await make_user("user")
    await current_session(db=db, settings=ai_settings, actor=actor(sam))
    options = await setup(
        db=db, ai_settings=ai_settings, sam=sam, send=send, fake_provider=fake_provider, make_user=make_user
    )
    calls, runs_before = len(fake_provider.requests), await db["agent_runs"].count_documents({})
    sessions_before = {s["_id"]: s for s in await db["copilot_sessions"].find().to_list()}
    keys_before = await db["agent_idempotency"].count_documents({})

    with pytest.raises(DeskError) as refused:
        await send(sam, "PROMPT-CANARY-31 hello", **options)

    assert refused.value.code == code
    assert len(fake_provider.requests) == calls  # not one byte went to the provider
    assert await db["agent_runs"].count_documents({}) == runs_before
    assert await db["agent_messages"].count_documents({"content": {"$regex": "PROMPT-CANARY-31"}}) == 0
    for session in await db["copilot_sessions"].find().to_list():  # claims given back, history marks as they were
        before = sessions_before[session["_id"]]
        assert (session["runningRunId"], session.get("historyMark")) == (
            before["runningRunId"],
            before.get("historyMark"),
        )
    assert await db["agent_idempotency"].count_documents({}) == keys_before


async def test_a_message_refused_by_budget_can_be_sent_again_with_its_key(
    db, ai_settings, send, fake_provider, make_user
):
    sam = await make_user("user")
    await budget.charge(db, user_id=sam["id"], agent="copilot", usd=ai_settings.ai_daily_spend_usd)
    with pytest.raises(budget.BudgetExceeded):
        await send(sam, key="first-try")

    caps = ("ai_daily_spend_usd", "agent_daily_spend_usd", "ai_global_daily_spend_usd")
    richer = ai_settings.model_copy(update={cap: 100.0 for cap in caps})  # the budget was raised meanwhile
    fake_provider.script(Turn.text("Nothing is open."))
    events = await drain(await send(sam, settings=richer, key="first-try"))  # same key: it started nothing

    assert events[-1].kind == "message_done" and events[-1].status == "complete"


# --- a record that cannot be stored stops the answer; what is stored says why ---------------------------


@pytest.fixture
async def unstorable(db):
    """Make inserts into `collection` fail for documents whose `field` equals `value` (a real write error)."""
    before: dict[str, set[str]] = {}

    async def refuse(collection: str, field: str, value: object) -> None:
        before[collection] = set(await db[collection].index_information())
        await db[collection].create_index([(field, 1)], unique=True)
        await db[collection].insert_one({field: value, "planted": True})

    yield refuse
    for collection, names in before.items():
        # by the names stored: the embedded engine keeps its own name, not the one asked for
        for name in set(await db[collection].index_information()) - names:
            await db[collection].drop_index(name)


async def test_a_run_record_that_cannot_be_stored_stops_the_answer(
    db, ai_settings, send, fake_provider, make_user, unstorable
):
    sam = await make_user("user")
    await unstorable("agent_runs", "model", ai_settings.ai_model)  # every new run collides
    fake_provider.script(Turn.slow("Let me look at all of your work orders one by one", delay=0.1))

    events = await drain(await send(sam))

    error, done = events[-2:]
    assert error.kind == "error" and error.code == ErrorCode.INTERNAL
    assert done.kind == "message_done" and done.status == "error"
    assert await fake_provider.wait_for_disconnect()  # the answer was cut off, not streamed to its end
    assert await db["agent_runs"].count_documents({"planted": {"$ne": True}}) == 0
    assert await db["agent_messages"].count_documents({}) == 0  # no message points at a missing run
    assert (await session_of(db, sam))["runningRunId"] is None
    assert await budget.spent(db, f"user:{sam['id']}:{budget.now().date().isoformat()}") > 0  # the call bills


async def test_an_answer_that_arrives_before_its_records_fail_is_still_billed(
    db, send, fake_provider, make_user, unstorable
):
    sam = await make_user("user")
    await unstorable("agent_messages", "content", "Anything open?")  # the person's message collides
    fake_provider.script(Turn.text("Nothing is open.", usage=(120, 4)))  # whole before the failure shows

    events = await drain(await send(sam, "Anything open?"))

    assert [e.kind for e in events[-2:]] == ["error", "message_done"] and events[-1].status == "error"
    run = await db["agent_runs"].find_one({})
    assert (run["status"], run["errorCode"], run["steps"]) == ("error", "record_failed", 1)
    # billed whether the failure showed mid-answer (an estimate) or after it (the reported usage)
    spent = await budget.spent(db, f"user:{sam['id']}:{budget.now().date().isoformat()}")
    assert spent == pytest.approx(run["costUsd"]) and spent > 0  # every call bills, ledger and run alike


async def test_a_message_that_cannot_be_stored_ends_its_run_as_an_error_that_says_so(
    db, send, fake_provider, make_user, unstorable
):
    sam = await make_user("user")
    await unstorable("agent_messages", "content", "Anything open?")  # the person's message collides
    fake_provider.script(Turn.slow("Let me look at all of your work orders one by one", delay=0.1))

    events = await drain(await send(sam, "Anything open?"))

    assert [e.kind for e in events[-2:]] == ["error", "message_done"] and events[-1].status == "error"
    run = await db["agent_runs"].find_one({})
    assert (run["status"], run["errorCode"]) == ("error", "record_failed") and run["finishedAt"] is not None
    assert run["inputTokens"] > 0 and run["steps"] == 1  # the cut-off call is on the run, as in the ledger
    spent = await budget.spent(db, f"user:{sam['id']}:{budget.now().date().isoformat()}")
    assert spent == pytest.approx(run["costUsd"])
    assert await db["agent_messages"].count_documents({"runId": run["_id"]}) == 0
    assert (await session_of(db, sam))["runningRunId"] is None


async def test_an_answer_that_cannot_be_stored_ends_the_run_as_an_error_with_its_call_billed(
    db, send, fake_provider, make_user, unstorable
):
    sam = await make_user("user")
    await unstorable("agent_messages", "content", "Nothing is open.")  # the model's answer collides
    fake_provider.script(Turn.text("Nothing is open.", usage=(120, 4)))

    events = await drain(await send(sam, "Anything open?"))

    assert [e.kind for e in events[-2:]] == ["error", "message_done"] and events[-1].status == "error"
    run = await db["agent_runs"].find_one({})
    assert (run["status"], run["errorCode"], run["inputTokens"], run["steps"]) == ("error", "record_failed", 120, 1)
    spent = await budget.spent(db, f"user:{sam['id']}:{budget.now().date().isoformat()}")
    assert spent == pytest.approx(run["costUsd"]) and spent > 0
    stored = await db["agent_messages"].find({"runId": run["_id"]}).to_list()
    assert [m["role"] for m in stored] == ["user"]
    assert (await session_of(db, sam))["runningRunId"] is None


async def test_a_person_who_leaves_while_their_message_fails_to_store_sees_the_failure_not_a_stop(
    db, send, fake_provider, make_user, unstorable
):
    sam = await make_user("user")
    await unstorable("agent_messages", "content", "Anything open?")  # the person's message collides
    fake_provider.script(Turn.slow("Let me look at all of your work orders one by one", delay=0.1))
    stream = (await send(sam, "Anything open?")).events()

    await anext(stream)
    await stream.aclose()  # gone at the first token, before the failed write could show

    run = await db["agent_runs"].find_one({})
    assert (run["status"], run["errorCode"]) == ("error", "record_failed")  # their runs list says why it stopped
    assert (await session_of(db, sam))["runningRunId"] is None


# --- the earlier turns the model is shown are the stored ones, whichever process wrote them -------------


def conversation(request: dict) -> list[tuple[str, str]]:
    return [(m["role"], m["content"]) for m in request["messages"] if m["role"] != "system"]


def said(*turns: int) -> list[tuple[str, str]]:
    """What the model should be shown: the questions and answers of `turns`, then the last question."""
    *answered, last = turns
    return [item for n in answered for item in (("user", f"q{n}"), ("assistant", f"a{n}"))] + [("user", f"q{last}")]


async def test_earlier_turns_come_from_memory_only_while_no_other_process_has_written(
    db, send, fake_provider, make_user, monkeypatch
):
    sam = await make_user("user")
    this_process = history.HISTORIES

    async def turn(n: int) -> list[tuple[str, str]]:
        fake_provider.script(Turn.text(f"a{n}"))
        assert (await drain(await send(sam, f"q{n}")))[-1].status == "complete"
        return conversation(fake_provider.requests[-1])

    assert await turn(1) == said(1)
    monkeypatch.setattr(history, "HISTORIES", history.Histories())  # another web process takes turn 2
    assert await turn(2) == said(1, 2)
    monkeypatch.setattr(history, "HISTORIES", this_process)  # back here, where the memory lacks turn 2
    assert await turn(3) == said(1, 2, 3)
    assert await turn(4) == said(1, 2, 3, 4)
    assert await db["agent_messages"].count_documents({}) == 8  # and every turn was stored as it went


async def test_after_stop_mid_answer_the_next_turn_shows_the_model_the_conversation_as_stored(
    db, send, fake_provider, make_user
):
    sam = await make_user("user")
    fake_provider.script(Turn.text("a1"))
    await drain(await send(sam, "q1"))
    fake_provider.script(Turn.slow("a2 that never ends", delay=0.2))
    stream = (await send(sam, "q2")).events()
    await anext(stream)
    await stream.aclose()  # Stop pressed mid-answer: no assistant message for turn 2
    fake_provider.script(Turn.text("a3"))

    await drain(await send(sam, "q3"))

    assert conversation(fake_provider.requests[-1]) == [*said(1, 2), ("user", "q3")]


async def test_an_answer_stored_just_as_the_person_left_is_shown_to_the_model_next_turn(
    db, send, fake_provider, make_user, monkeypatch
):
    sam = await make_user("user")
    store = agent_messages.add_messages

    async def stored_then_left(database, messages: list[dict]) -> datetime:
        stored_at = await store(database, messages)
        if any(message["role"] == "assistant" for message in messages):  # the person leaves before the answer is seen
            asyncio.current_task().cancel()
            await asyncio.sleep(0)  # where the cancel lands: no time passes
        return stored_at

    monkeypatch.setattr(agent_messages, "add_messages", stored_then_left)
    fake_provider.script(Turn.text("a1"))
    first = asyncio.create_task(drain(await send(sam, "q1")))
    await asyncio.wait([first])
    monkeypatch.setattr(agent_messages, "add_messages", store)
    fake_provider.script(Turn.text("a2"))

    await drain(await send(sam, "q2"))

    assert first.cancelled()
    assert await db["agent_messages"].count_documents({"role": "assistant", "content": "a1"}) == 1
    # this process never saw its answer stored, so it must not trust what it kept of the conversation
    assert conversation(fake_provider.requests[-1]) == said(1, 2)


async def test_a_finished_turn_marks_the_session_with_its_last_message(db, send, fake_provider, make_user):
    sam = await make_user("user")
    fake_provider.script(Turn.text("a1"))

    await drain(await send(sam, "q1"))

    answer = await db["agent_messages"].find_one({"role": "assistant"})
    # the mark says what this process keeps of the conversation is current: the next turn needs no read
    assert (await session_of(db, sam))["historyMark"] == answer["_id"]


async def test_the_window_is_the_newest_fifty_messages_as_stored(db, ai_settings, send, fake_provider, make_user):
    sam = await make_user("user")
    many = ai_settings.model_copy(update={"ai_rate_limit_max": 1000})
    for n in range(27):  # 54 messages: the oldest fall out of the window
        fake_provider.script(Turn.text(f"a{n}"))
        await drain(await send(sam, f"q{n}", settings=many))
    from_memory = conversation(fake_provider.requests[-1])
    history.HISTORIES.drop((await session_of(db, sam))["_id"])

    fake_provider.script(Turn.text("a27"))
    await drain(await send(sam, "q27", settings=many))

    from_database = conversation(fake_provider.requests[-1])
    assert len(from_memory) == 50 and from_memory[-1] == ("user", "q26")
    assert from_database[:-2] == from_memory[2:] and from_database[-2:] == [("assistant", "a26"), ("user", "q27")]


async def test_turns_past_the_transcript_retention_are_forgotten_in_memory_and_in_the_database(
    db, send, fake_provider, make_user, monkeypatch
):
    sam = await make_user("user")
    fake_provider.script(Turn.text("a1"))
    await drain(await send(sam, "q1"))
    later = now() + keep.KEEP_TRANSCRIPT + timedelta(days=1)  # SEC-12: 90 days on, turn 1 is gone
    monkeypatch.setattr(history, "now", lambda: later)
    monkeypatch.setattr(agent_messages, "now", lambda: later)

    fake_provider.script(Turn.text("a2"))
    await drain(await send(sam, "q2"))  # the window kept in this process
    from_memory = conversation(fake_provider.requests[-1])
    history.HISTORIES.drop((await session_of(db, sam))["_id"])
    fake_provider.script(Turn.text("a3"))
    await drain(await send(sam, "q3"))  # read from the database, before its TTL purge ran

    assert from_memory == [("user", "q2")]
    assert conversation(fake_provider.requests[-1]) == [("user", "q2"), ("assistant", "a2"), ("user", "q3")]


async def test_a_run_letting_go_late_never_frees_a_session_a_newer_run_holds(db, ai_settings, make_user):
    sam = await make_user("user")
    session = await open_session(db=db, settings=ai_settings, actor=actor(sam))
    sid, aborted, newer = ObjectId(session.id), ObjectId(), ObjectId()
    assert await copilot_sessions.claim_session(db, sid, aborted) is not None
    await copilot_sessions.release_session(db, sid, aborted)  # ended by a logout: it lets go
    assert await copilot_sessions.claim_session(db, sid, newer) is not None  # the person's next message

    await copilot_sessions.release_session(db, sid, aborted)  # the aborted run's clean-up, arriving late

    assert (await db["copilot_sessions"].find_one({"_id": sid}))["runningRunId"] == newer
    assert await copilot_sessions.claim_session(db, sid, ObjectId()) is None  # one stream at a time still holds
