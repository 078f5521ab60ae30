"""The earlier turns a copilot turn starts from, and the window this process keeps of them.

Through real turns: the model is shown the questions and answers as stored, never a tool's result,
never what the retention has dropped, and a session the database alone knows is read from it.
Through `Histories` itself: what a conversation's window is once others have pushed it, or it has
been dropped; a conversation that fell out of memory still reads right, only slower, so its own
answer (None: ask the database) is the only place a lost window shows.
"""

import json
from datetime import timedelta

import pytest
from bson import ObjectId

from desk.agent.core import history
from desk.agent.core.history import WINDOW, Histories, kept
from desk.agent.core.provider import CHARS_PER_TOKEN
from desk.agent.core.store import agent_messages, keep
from desk.schema import now
from tests.agent.test_first_token import conversation, drain, said, session_of
from tests.fake_provider import Turn

# --- what the model is shown of the earlier turns -------------------------------------------------------


@pytest.mark.parametrize("forgotten", [False, True], ids=["from memory", "from the database"])
async def test_a_tool_result_is_never_shown_to_the_model_in_a_later_turn(
    db, start, fake_provider, make_user, make_order, forgotten: bool
):
    sam = await make_user("user")
    await make_order(sam, "Leaking tap in kitchen")
    fake_provider.script(Turn.tool_calls(("list_my_work_orders", {})), Turn.text("a1"))
    assert (await drain(await start(sam, "q1")))[-1].status == "complete"
    if forgotten:  # another web process takes the next turn
        history.HISTORIES.drop((await session_of(db, sam))["_id"])
    fake_provider.script(Turn.text("a2"))

    await drain(await start(sam, "q2"))

    assert await db["agent_messages"].count_documents({"role": "tool"}) == 1  # the tool did answer in turn 1
    assert conversation(fake_provider.requests[-1]) == said(1, 2)


async def test_a_session_from_before_history_marks_shows_the_model_its_stored_turns(
    db, start, fake_provider, make_user
):
    sam = await make_user("user")
    fake_provider.script(Turn.text("a1"))
    await drain(await start(sam, "q1"))
    session = await session_of(db, sam)
    await db["copilot_sessions"].update_one({"_id": session["_id"]}, {"$unset": {"historyMark": ""}})
    fake_provider.script(Turn.text("a2"))

    await drain(await start(sam, "q2"))

    assert conversation(fake_provider.requests[-1]) == said(1, 2)


async def test_a_turn_exactly_at_the_retention_cutoff_is_forgotten_in_memory_as_in_the_database(
    db, start, fake_provider, make_user, monkeypatch
):
    sam = await make_user("user")
    moment = now()
    monkeypatch.setattr(history, "now", lambda: moment)
    monkeypatch.setattr(agent_messages, "now", lambda: moment)
    fake_provider.script(Turn.text("a1"))
    await drain(await start(sam, "q1"))  # stored, and kept here, at `moment`
    cutoff = moment + keep.KEEP_TRANSCRIPT  # SEC-12: the very moment turn 1 expires
    monkeypatch.setattr(history, "now", lambda: cutoff)
    monkeypatch.setattr(agent_messages, "now", lambda: cutoff)
    in_the_database = await agent_messages.session_messages(db, (await session_of(db, sam))["_id"])
    fake_provider.script(Turn.text("a2"))

    await drain(await start(sam, "q2"))

    assert in_the_database == []
    assert conversation(fake_provider.requests[-1]) == [("user", "q2")]


async def test_memory_never_keeps_a_message_longer_than_the_database(db, start, fake_provider, make_user, monkeypatch):
    """Each message kept here is stamped no later than its stored copy, so it expires here first (SEC-12)."""
    sam = await make_user("user")
    ticks = iter(range(10_000))
    base = now()

    def clock():  # a clock that moves on every reading, as a busy machine's does between two writes
        return base + timedelta(milliseconds=next(ticks))

    monkeypatch.setattr(history, "now", clock)
    monkeypatch.setattr(agent_messages, "now", clock)
    fake_provider.script(Turn.tool_calls(("list_my_work_orders", {})), Turn.text("a1"))
    await drain(await start(sam, "q1"))

    session = await session_of(db, sam)
    stored = {
        (m["role"], m["content"]): m["createdAt"] for m in await agent_messages.session_messages(db, session["_id"])
    }
    in_memory = {(m.role, m.content): m.at for m in history.HISTORIES.current(session) if m.content}
    assert set(in_memory) == {("user", "q1"), ("assistant", "a1")}
    assert in_memory[("assistant", "a1")] == stored[("assistant", "a1")]
    assert in_memory[("user", "q1")] <= stored[("user", "q1")]


async def test_one_persons_turn_does_not_push_another_persons_conversation_out_of_memory(
    db, start, fake_provider, make_user
):
    sam, eve = await make_user("user"), await make_user("user")
    fake_provider.script(Turn.text("a1"))
    await drain(await start(sam, "q1"))
    fake_provider.script(Turn.text("Nothing is open."))

    await drain(await start(eve, "Anything open?"))

    window = history.HISTORIES.current(await session_of(db, sam))
    assert window is not None  # sam's next turn needs no read
    assert [(m.role, m.content) for m in window] == [("user", "q1"), ("assistant", "a1")]


async def test_a_turn_sizes_its_conversation_as_the_json_the_model_is_sent(db, start, fake_provider, make_user):
    sam = await make_user("user")
    fake_provider.script(
        Turn.tool_calls(("list_my_work_orders", {})), Turn.text('An "answer"\nwith ünïcode ✓ and 🛠'), Turn.text("a2")
    )
    await drain(await start(sam, 'A "question",\twith a tab, ünïcode and 🛠'))  # a tool call, then its answer
    turn = await start(sam, "q2")

    await drain(turn)

    sent = fake_provider.requests[-1]["messages"]
    assert len(sent) == 4  # the system prompt, the first question and answer (not the tool's), this question
    assert turn.prompt is not None and turn.prompt.tokens == len(json.dumps(sent)) // CHARS_PER_TOKEN


# --- the window kept of each conversation -----------------------------------------------------------------


def claimed(session_id: ObjectId, mark: ObjectId | None) -> dict:
    """A session as its claim returns it: the id of its last stored message as its history mark."""
    return {"_id": session_id, "historyMark": mark}


def exchange(n: int) -> list[history.Message]:
    return [kept("user", f"q{n}"), kept("assistant", f"a{n}")]


def test_a_session_where_nothing_was_said_starts_from_an_empty_window_without_the_database():
    assert Histories().current(claimed(ObjectId(), None)) == []


def test_a_session_from_before_history_marks_is_left_to_the_database():
    assert Histories().current({"_id": ObjectId()}) is None


def test_a_kept_window_is_only_the_newest_messages():
    histories, session, mark = Histories(), ObjectId(), ObjectId()
    messages = [message for n in range(WINDOW) for message in exchange(n)]  # twice the window

    histories.put(session, mark, messages)

    assert histories.current(claimed(session, mark)) == messages[-WINDOW:]


def test_a_dropped_conversation_is_left_to_the_database():
    histories, session, mark = Histories(), ObjectId(), ObjectId()
    histories.put(session, mark, exchange(1))

    histories.drop(session)

    assert histories.current(claimed(session, mark)) is None


def test_a_full_memory_forgets_the_conversation_used_longest_ago_and_keeps_the_rest():
    histories = Histories(size=2)
    first, second, third = [(ObjectId(), ObjectId(), exchange(n)) for n in (1, 2, 3)]

    for session, mark, window in (first, second, third):
        histories.put(session, mark, window)

    assert histories.current(claimed(*first[:2])) is None
    assert histories.current(claimed(*second[:2])) == second[2]
    assert histories.current(claimed(*third[:2])) == third[2]


def test_a_conversation_read_since_is_kept_over_one_not_used_since():
    histories = Histories(size=2)
    first, second = [(ObjectId(), ObjectId(), exchange(n)) for n in (1, 2)]
    for session, mark, window in (first, second):
        histories.put(session, mark, window)
    assert histories.current(claimed(*first[:2])) == first[2]  # its next turn starts

    histories.put(ObjectId(), ObjectId(), exchange(3))

    assert histories.current(claimed(*first[:2])) == first[2]
    assert histories.current(claimed(*second[:2])) is None


def test_a_conversation_written_again_is_kept_over_one_not_used_since():
    histories = Histories(size=2)
    first, second = [(ObjectId(), ObjectId(), exchange(n)) for n in (1, 2)]
    for session, mark, window in (first, second):
        histories.put(session, mark, window)
    longer = (first[0], ObjectId(), [*first[2], *exchange(3)])
    histories.put(*longer)  # the first conversation's next turn ended

    histories.put(ObjectId(), ObjectId(), exchange(4))

    assert histories.current(claimed(*longer[:2])) == longer[2]
    assert histories.current(claimed(*second[:2])) is None


def test_a_window_peeked_while_the_claim_is_out_is_used_only_under_the_mark_the_claim_returns():
    histories, session, mark, first = Histories(), ObjectId(), ObjectId(), exchange(1)
    histories.put(session, mark, first)
    peeked = histories.peek(session)  # a turn starts here ...
    newer = ObjectId()
    histories.put(session, newer, [*first, *exchange(2)])  # ... as another turn of it ends here

    assert peeked is not None
    assert histories.confirmed(claimed(session, newer), peeked) is None  # its claim saw that turn: ask the database
    assert histories.confirmed(claimed(session, mark), peeked) == first
    assert histories.confirmed(claimed(session, ObjectId()), None) is None  # nothing kept when it looked
