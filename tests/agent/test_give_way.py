"""When several people ask at once, each first token goes before the others' bookkeeping (`live.Opening`).

A turn whose first event is out writes its records (the run, the message, the ledger, the answer)
only once the turns still on their way have sent theirs, or `GIVE_WAY_SECONDS` have passed. These
tests stretch that limit so that only the other turn can end the wait: what they hold is the order.
"""

import asyncio
import gc

import pytest
from bson import ObjectId

from desk.agent.copilot import live
from desk.agent.copilot.turn import CopilotTurn
from desk.agent.core import budget
from desk.agent.core.events import RunEvent
from desk.errors import DeskError, ErrorCode
from tests.fake_provider import Turn


@pytest.fixture(autouse=True)
def patient(monkeypatch):
    monkeypatch.setattr(live, "GIVE_WAY_SECONDS", 30.0)
    gc.collect()  # a turn an earlier test began and never streamed is forgotten here, as in a desk


async def rest_of(events) -> list[RunEvent]:
    return [event async for event in events]


async def runs_of(db, person: dict) -> list[dict]:
    return await db["agent_runs"].find({"userId": ObjectId(person["id"])}).to_list()


async def test_an_answer_begun_waits_for_another_persons_first_token_before_its_records(
    db, start, fake_provider, make_user
):
    ann, bob = await make_user("user"), await make_user("user")
    bobs_turn = await start(bob, "Anything for me?")  # let in, on its way to its first token
    fake_provider.script(Turn.text("Nothing is open for you.", chunks=2), Turn.text("Two are open."))
    anns = (await start(ann, "Anything open?")).events()

    first = await anext(anns)
    rest = asyncio.create_task(rest_of(anns))
    done, _ = await asyncio.wait({rest}, timeout=0.5)

    assert first.kind == "token"
    assert not done  # the rest of her answer, and her records, wait for Bob's first token
    assert await runs_of(db, ann) == []
    bobs = await rest_of(bobs_turn.events())
    anns_rest = await asyncio.wait_for(rest, 10)
    assert bobs[-1].status == anns_rest[-1].status == "complete"
    assert first.text + "".join(e.text for e in anns_rest if e.kind == "token") == "Nothing is open for you."
    assert [run["status"] for run in await runs_of(db, ann)] == ["complete"]


async def test_nobody_waits_for_a_turn_that_was_refused(db, start, fake_provider, make_user, ai_settings):
    ann, bob = await make_user("user"), await make_user("user")
    await budget.charge(db, user_id=bob["id"], agent="copilot", usd=ai_settings.ai_daily_spend_usd)
    with pytest.raises(DeskError) as refused:  # held: a refused turn's frame outlives its refusal
        await start(bob, "Anything for me?")
    fake_provider.script(Turn.text("Nothing is open."))

    events = await asyncio.wait_for(rest_of((await start(ann, "Anything open?")).events()), 10)

    assert refused.value.code == ErrorCode.AI_BUDGET_EXCEEDED
    assert events[-1].status == "complete"


async def test_nobody_waits_for_a_turn_stopped_before_its_first_token(db, start, fake_provider, make_user):
    ann, bob = await make_user("user"), await make_user("user")
    fake_provider.script(Turn.slow(delay=5), Turn.text("Nothing is open."))
    bobs_turn = await start(bob, "Anything for me?")
    bobs = asyncio.create_task(rest_of(bobs_turn.events()))
    assert await fake_provider.wait_for_request()  # his model is thinking it over
    anns = (await start(ann, "Anything open?")).events()
    await anext(anns)
    rest = asyncio.create_task(rest_of(anns))

    bobs.cancel()  # he left before a word came
    anns_rest = await asyncio.wait_for(rest, 10)

    assert anns_rest[-1].status == "complete"
    assert [run["status"] for run in await runs_of(db, bob)] == ["aborted"]


async def test_nobody_waits_for_a_turn_waiting_on_its_model_for_longer_than_the_limit(
    db, start, fake_provider, make_user, monkeypatch
):
    ann, bob = await make_user("user"), await make_user("user")
    bobs_turn: CopilotTurn = await start(bob, "Anything for me?")
    bobs_turn.opening.since -= 60  # he asked a minute ago, and his model has not said a word since
    fake_provider.script(Turn.text("Nothing is open."), Turn.text("Two are open."))

    events = await asyncio.wait_for(rest_of((await start(ann, "Anything open?")).events()), 10)

    assert events[-1].status == "complete"
    assert (await rest_of(bobs_turn.events()))[-1].status == "complete"
