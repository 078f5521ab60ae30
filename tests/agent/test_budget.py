"""Spend control (spec §4.7): the AgentSpend ledger, the per-call token cap, billing of every call, the caps."""

import asyncio
import contextlib
import json
import socket
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from desk.agent.copilot.sessions import abort_runs, current_session
from desk.agent.copilot.start import begin
from desk.agent.core import budget
from desk.agent.core.client import use_provider
from desk.agent.core.provider import Provider, Usage
from desk.errors import ErrorCode, RateLimited
from desk.schema import now
from tests.clock import ManualClock
from tests.fake_provider import Turn
from tests.helpers import actor, reconfigure, tuned

AI = "/api/v1/ai"
ONE_CALL = Usage(100, 10)  # what Turn.text / Turn.tool_calls report by default


def keys_for(user: dict) -> dict[str, str]:
    day = now().date().isoformat()
    return {"user": f"user:{user['id']}:{day}", "agent": f"agent:copilot:{day}", "global": f"global:{day}"}


async def ledger(db, user: dict) -> dict[str, float]:
    """Today's stored spend per scope for `user` (0 where nothing was billed)."""
    return {scope: await budget.spent(db, key) for scope, key in keys_for(user).items()}


async def ask(client: httpx.AsyncClient, content: str = "hello") -> httpx.Response:
    """Open (or reuse) a session and send one message; the SSE body is read to its end."""
    sessions = (await client.get(f"{AI}/sessions")).json()
    active = [s for s in sessions if s["status"] == "active"]
    session_id = active[0]["id"] if active else (await client.post(f"{AI}/sessions")).json()["id"]
    async with client.stream("POST", f"{AI}/sessions/{session_id}/messages", json={"content": content}) as response:
        await response.aread()
    return response


def events_of(response: httpx.Response) -> list[dict]:
    found = []
    for frame in response.text.split("\n\n")[:-1]:
        name, data = frame.split("\n")
        found.append({"kind": name.removeprefix("event: "), **json.loads(data.removeprefix("data: "))})
    return found


# --- the ledger ---------------------------------------------------------------------------------


async def test_fifty_concurrent_charges_add_up_exactly(db, make_user):
    sam = await make_user("user")
    amounts = [0.000_123 * (n + 1) for n in range(50)]

    await asyncio.gather(*(budget.charge(db, user_id=sam["id"], agent="copilot", usd=usd) for usd in amounts))

    stored = await ledger(db, sam)
    for scope in ("user", "global"):
        assert stored[scope] == pytest.approx(sum(amounts), abs=1e-9), scope
    assert stored["agent"] == 0  # a person's turns are not the copilot's: no agent scope
    docs = await db["agent_spend"].find({}).to_list()
    assert len(docs) == 2  # one document per scope and day, however many writers raced to create it


async def test_charges_for_another_person_count_against_the_desk_only(db, make_user):
    sam, ann = await make_user("user"), await make_user("user")

    await budget.charge(db, user_id=sam["id"], agent="copilot", usd=0.25)
    await budget.charge(db, user_id=ann["id"], agent="copilot", usd=0.5)
    await budget.charge(db, user_id=None, agent="triage", usd=0.125)  # the System Actor has no user scope

    assert await ledger(db, sam) == {"user": 0.25, "agent": 0, "global": 0.875}
    assert (await ledger(db, ann))["user"] == 0.5
    assert await budget.spent(db, f"agent:triage:{now().date().isoformat()}") == 0.125


# --- every call: capped tokens, and billed whatever happens --------------------------------------


async def test_every_provider_request_carries_the_output_token_cap(
    ai_settings, fake_provider, client_for, make_user, make_order
):
    settings = reconfigure(ai_settings, ai_max_output_tokens=321)
    capped = Provider.from_settings(settings)
    use_provider(capped)
    try:
        sam = await make_user("user")
        await make_order(sam)
        fake_provider.script(
            Turn.tool_calls(("list_my_work_orders", "{broken")),  # a malformed-args retry is a call too
            Turn.tool_calls(("list_my_work_orders", {})),
            Turn.text("One order."),
        )
        response = await ask(await client_for(sam))
    finally:
        use_provider(None)
        await capped.aclose()

    assert response.status_code == 200
    assert len(fake_provider.requests) == 3
    assert [r["max_tokens"] for r in fake_provider.requests] == [321, 321, 321]


async def test_a_successful_call_bills_every_scope(provider, fake_provider, client_for, make_user, db):
    sam = await make_user("user")
    fake_provider.script(Turn.text("Hi.", usage=(1000, 200)))

    await ask(await client_for(sam))

    expected = provider.cost(Usage(1000, 200))
    assert expected == pytest.approx((1000 * 0.15 + 200 * 0.60) / 1e6)
    assert await ledger(db, sam) == pytest.approx({"user": expected, "agent": 0, "global": expected})
    run = await db["agent_runs"].find_one({})
    assert run["costUsd"] == pytest.approx(expected) and (run["inputTokens"], run["outputTokens"]) == (1000, 200)


@pytest.mark.parametrize("failure", [Turn.error(500), Turn.disconnect("half an ans"), Turn.malformed()])
async def test_a_failed_call_still_bills_every_scope(provider, fake_provider, client_for, make_user, db, failure):
    sam = await make_user("user")
    fake_provider.script(failure)

    response = await ask(await client_for(sam))

    assert [e["code"] for e in events_of(response) if e["kind"] == "error"] == [ErrorCode.AI_UNAVAILABLE]
    run = await db["agent_runs"].find_one({})
    assert run["status"] == "error" and run["inputTokens"] > 0  # no usage reported: estimated from the prompt
    stored = await ledger(db, sam)
    assert stored["user"] > 0
    assert stored == pytest.approx({"user": run["costUsd"], "agent": 0, "global": run["costUsd"]})


async def test_a_malformed_args_retry_bills_both_calls(provider, fake_provider, client_for, make_user, db):
    sam = await make_user("user")
    fake_provider.script(Turn.tool_calls(("get_profile", '{"oops": ')), Turn.text("You are Sam."))

    response = await ask(await client_for(sam))

    assert events_of(response)[-1]["status"] == "complete"
    two_calls = 2 * provider.cost(ONE_CALL)
    assert await ledger(db, sam) == pytest.approx({"user": two_calls, "agent": 0, "global": two_calls})
    run = await db["agent_runs"].find_one({})
    assert run["steps"] == 2 and run["costUsd"] == pytest.approx(two_calls)


async def test_a_call_cut_short_by_the_listener_still_bills(ai_settings, provider, fake_provider, make_user, db):
    sam = await make_user("user")
    fake_provider.script(Turn.slow("a long answer that nobody waits for", delay=0.05, chunks=20))
    session = await current_session(db=db, settings=ai_settings, actor=actor(sam))
    turn = await begin(
        db=db, settings=ai_settings, provider=provider, actor=actor(sam), session_id=session.id, content="hi", ip="ip"
    )

    async with contextlib.aclosing(turn.events()) as events:
        async for event in events:
            if event.kind == "token":
                break  # the person stopped the answer

    run = await db["agent_runs"].find_one({})
    assert run["status"] == "aborted"
    stored = await ledger(db, sam)
    assert stored["user"] > 0
    assert stored == pytest.approx({"user": run["costUsd"], "agent": 0, "global": run["costUsd"]})


async def test_a_call_cut_short_by_a_logout_is_billed_to_the_run(ai_settings, provider, fake_provider, make_user, db):
    sam = await make_user("user")
    fake_provider.script(Turn.slow("an answer still on its way", delay=0.05, chunks=4))
    session = await current_session(db=db, settings=ai_settings, actor=actor(sam))
    turn = await begin(
        db=db, settings=ai_settings, provider=provider, actor=actor(sam), session_id=session.id, content="hi", ip="ip"
    )
    events = []
    async for event in turn.events():
        events.append(event)
        if len(events) == 1:  # the first token: sam logs out in another tab while the answer streams
            assert await turn.recorded()
            await abort_runs(db=db, user_id=sam["id"])

    assert [e.kind for e in events] == ["token", "message_done"] and events[-1].status == "aborted"
    assert await fake_provider.wait_for_disconnect()  # the rest of the answer was not waited for
    run = await db["agent_runs"].find_one({})
    assert run["status"] == "aborted"  # the logout ended it; the call it had in flight still counts, estimated
    assert run["steps"] == 1 and run["inputTokens"] > 0 and run["costUsd"] > 0
    assert (await ledger(db, sam))["user"] == pytest.approx(run["costUsd"])


# --- the caps -----------------------------------------------------------------------------------

CAPS = {  # setting -> whether the cap, once reached, also stops others (AGENT_DAILY_SPEND_USD is not the copilot's)
    "ai_daily_spend_usd": False,
    "ai_global_daily_spend_usd": True,
}


@pytest.mark.parametrize("cap", list(CAPS))
async def test_a_run_overshoots_a_cap_by_at_most_one_call_and_the_next_start_is_refused(
    ai_settings, provider, fake_provider, client_for, make_user, make_order, db, cap
):
    one_call = provider.cost(ONE_CALL)
    reconfigure(ai_settings, **{cap: one_call / 2})  # less than a single call
    sam, ann = await make_user("user"), await make_user("user")
    await make_order(sam)
    sam_client, ann_client = await client_for(sam), await client_for(ann)
    # the model wants several steps; only the first call happens before the cap stops the run
    fake_provider.script(Turn.tool_calls(("list_my_work_orders", {})))

    response = await ask(sam_client)

    events = events_of(response)
    assert [e["code"] for e in events if e["kind"] == "error"] == [ErrorCode.AI_BUDGET_EXCEEDED]
    assert events[-1]["status"] == "budget_exceeded"
    assert len(fake_provider.requests) == 1
    spent = await ledger(db, sam)
    assert spent["user"] == pytest.approx(one_call)  # the cap, overshot by at most the one call in flight
    assert spent["user"] <= one_call / 2 + one_call

    refused = await ask(sam_client, "and now?")
    assert refused.status_code == 429
    assert refused.json()["error"]["code"] == ErrorCode.AI_BUDGET_EXCEEDED
    if CAPS[cap]:  # a shared cap: nobody else gets in either
        other = await ask(ann_client)
        assert other.status_code == 429 and other.json()["error"]["code"] == ErrorCode.AI_BUDGET_EXCEEDED
    else:  # sam's own cap: ann still has her whole budget
        fake_provider.script(Turn.text("Hi Ann."))
        other = await ask(ann_client)
        assert other.status_code == 200 and events_of(other)[-1]["status"] == "complete"
    assert await db["agent_runs"].count_documents({}) == (1 if CAPS[cap] else 2)


async def test_one_person_reaching_their_cap_never_stops_the_copilot_for_others(
    ai_settings, provider, fake_provider, client_for, make_user, db
):
    """The copilot has no `agent:` scope: the agent cap (here below one call) is for autonomous agents only."""
    one_call = provider.cost(ONE_CALL)
    reconfigure(ai_settings, ai_daily_spend_usd=one_call / 2, agent_daily_spend_usd=one_call / 2)
    sam, ann = await make_user("user"), await make_user("user")
    fake_provider.script(Turn.text("Hi Sam."), Turn.text("Hi Ann."))

    assert events_of(await ask(await client_for(sam)))[-1]["status"] == "complete"
    refused = await ask(await client_for(sam), "again")  # sam's own cap is reached...
    other = await ask(await client_for(ann))  # ...ann's is not

    assert refused.status_code == 429
    assert other.status_code == 200 and events_of(other)[-1]["status"] == "complete"
    assert (await ledger(db, sam))["agent"] == 0


async def test_a_call_that_never_reached_the_model_costs_nothing_and_says_so(
    ai_settings, fake_provider, client_for, make_user, db
):
    with socket.socket() as probe:  # a port nobody listens on: the connection is refused
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    unreachable = Provider.from_settings(tuned(ai_settings, ai_base_url=f"http://127.0.0.1:{closed}/v1"))
    use_provider(unreachable)
    try:
        sam = await make_user("user")
        response = await ask(await client_for(sam))
    finally:
        use_provider(None)
        await unreachable.aclose()

    assert [e["code"] for e in events_of(response) if e["kind"] == "error"] == [ErrorCode.AI_UNAVAILABLE]
    run = await db["agent_runs"].find_one({})
    assert (run["status"], run["errorCode"]) == ("error", "ai_unreached")
    assert (run["inputTokens"], run["outputTokens"], run["costUsd"]) == (0, 0, 0)
    assert await ledger(db, sam) == {"user": 0, "agent": 0, "global": 0}


async def test_concurrent_check_and_charge_overshoot_by_at_most_one_call_per_caller(db, settings, make_user):
    """What the ledger guarantees under concurrency, stated exactly.

    Every charge is preceded by its caller's own `check`, which saw today's spend below the cap. Once
    the spend reaches the cap, no later `check` passes, so the only charges still to land are those
    whose check already passed: at most one per concurrent caller. Hence, with N callers each charging
    `cost` per call: spent < cap + N * cost; no charge is ever lost (spent == charges * cost); and
    the next check is refused.
    """
    callers, cost, cap = 50, 0.01, 0.1
    capped = settings.model_copy(update={"ai_daily_spend_usd": cap})
    sam = await make_user("user")
    charges = 0

    async def caller() -> None:
        nonlocal charges
        while True:
            try:
                await budget.check(db, capped, user_id=sam["id"], agent="copilot")
            except budget.BudgetExceeded:
                return
            await budget.charge(db, user_id=sam["id"], agent="copilot", usd=cost)
            charges += 1

    await asyncio.gather(*(caller() for _ in range(callers)))

    spent = (await ledger(db, sam))["user"]
    assert spent == pytest.approx(charges * cost, abs=1e-9)
    assert cap <= spent < cap + callers * cost
    with pytest.raises(budget.BudgetExceeded):
        await budget.check(db, capped, user_id=sam["id"], agent="copilot")


async def test_sequential_callers_overshoot_by_less_than_one_call(db, settings, make_user):
    cost, cap = 0.03, 0.1
    capped = settings.model_copy(update={"ai_daily_spend_usd": cap})
    sam = await make_user("user")

    while True:
        try:
            await budget.check(db, capped, user_id=sam["id"], agent="copilot")
        except budget.BudgetExceeded as refused:
            assert refused.code == ErrorCode.AI_BUDGET_EXCEEDED and "your daily limit" in refused.message
            break
        await budget.charge(db, user_id=sam["id"], agent="copilot", usd=cost)

    spent = (await ledger(db, sam))["user"]
    assert cap <= spent < cap + cost


# --- letting a message in: one document per person and day ----------------------------------------


async def test_a_message_start_is_counted_in_the_persons_day_document_beside_their_spend(
    db, settings, make_user, clock
):
    sam = await make_user("user")
    await budget.charge(db, user_id=sam["id"], agent="copilot", usd=0.25)

    for _ in range(3):
        await budget.admit(db, settings, user_id=sam["id"], agent="copilot", ip="10.0.0.7", clock=clock)
    await budget.admit(db, settings, user_id=sam["id"], agent="copilot", ip="10.0.0.8", clock=clock)

    doc = await db["agent_spend"].find_one({"_id": keys_for(sam)["user"]})
    assert doc["spentUsd"] == 0.25
    assert sorted(doc["starts"].values()) == [1, 3]  # per minute and address
    assert not any("10.0.0" in name for name in doc["starts"])  # addresses are not stored
    assert await db["agent_spend"].count_documents({}) == 2  # still one document per scope and day


async def test_counters_of_earlier_minutes_are_dropped_by_the_next_charge(db, settings, make_user, clock):
    sam = await make_user("user")
    key = keys_for(sam)["user"]
    await db["agent_spend"].update_one({"_id": key}, {"$set": {"starts": {"9999-old": 7}}}, upsert=True)

    admitted = await budget.admit(db, settings, user_id=sam["id"], agent="copilot", ip="10.0.0.7", clock=clock)
    await budget.charge(db, user_id=sam["id"], agent="copilot", usd=0.01, tidy=admitted.stale)

    assert admitted.stale == ("9999-old",)
    assert list((await db["agent_spend"].find_one({"_id": key}))["starts"].values()) == [1]  # this minute's only


async def test_a_refused_start_drops_earlier_minutes_itself(db, settings, make_user, clock):
    sam = await make_user("user")
    key = keys_for(sam)["user"]
    await db["agent_spend"].update_one(
        {"_id": key}, {"$set": {"starts": {"9999-old": 7}, "spentUsd": settings.ai_daily_spend_usd}}, upsert=True
    )

    with pytest.raises(budget.BudgetExceeded):
        await budget.admit(db, settings, user_id=sam["id"], agent="copilot", ip="10.0.0.7", clock=clock)

    assert "9999-old" not in (await db["agent_spend"].find_one({"_id": key}))["starts"]


async def test_a_start_from_another_address_leaves_the_count_of_the_first_for_this_minute(
    db, settings, make_user, clock
):
    settings = tuned(settings, ai_rate_limit_max=2)  # the clock stands still: one minute throughout
    sam = await make_user("user")
    for _ in range(2):
        await budget.admit(db, settings, user_id=sam["id"], agent="copilot", ip="10.0.0.7", clock=clock)

    elsewhere = await budget.admit(db, settings, user_id=sam["id"], agent="copilot", ip="10.0.0.8", clock=clock)
    await budget.charge(db, user_id=sam["id"], agent="copilot", usd=0.01, tidy=elsewhere.stale)

    assert elsewhere.stale == ()
    with pytest.raises(RateLimited):  # the first address has used its two messages this minute
        await budget.admit(db, settings, user_id=sam["id"], agent="copilot", ip="10.0.0.7", clock=clock)


async def test_a_start_over_the_days_budget_and_the_minutes_rate_is_told_about_the_budget(
    db, settings, make_user, clock
):
    settings = tuned(settings, ai_rate_limit_max=1)  # the clock stands still: one minute throughout
    sam = await make_user("user")
    await budget.admit(db, settings, user_id=sam["id"], agent="copilot", ip="10.0.0.7", clock=clock)
    await budget.charge(db, user_id=sam["id"], agent="copilot", usd=settings.ai_daily_spend_usd)

    with pytest.raises(budget.BudgetExceeded):  # "wait a minute" would send the person back to a closed door
        await budget.admit(db, settings, user_id=sam["id"], agent="copilot", ip="10.0.0.7", clock=clock)


async def test_a_message_refused_in_the_last_moment_of_a_minute_is_told_to_wait_a_second(
    ai_settings, provider, fake_provider, client_for, make_user, clock
):
    reconfigure(ai_settings, ai_rate_limit_max=1)
    clock.move(timedelta(seconds=59.9))  # hh:mm:59.9, a tenth before the next minute
    client = await client_for(await make_user("user"))
    fake_provider.script(Turn.text("Hi."))
    assert (await ask(client)).status_code == 200

    refused = await ask(client, "and again")

    assert refused.status_code == 429 and refused.json()["error"]["code"] == ErrorCode.RATE_LIMITED
    assert refused.headers["retry-after"] == "1"  # never 0: a client would retry at once, into the same minute
    assert refused.json()["error"]["details"]["retryAfter"] == 1


async def test_a_persons_day_is_the_desks_day_in_its_time_zone(db, settings, make_user):
    # 23:30 UTC is already tomorrow in Berlin, where the desk's policy says it works: one midnight for every scope
    late = ManualClock(datetime(2026, 3, 9, 23, 30, tzinfo=UTC))
    await budget.set_desk_zone(db, "Europe/Berlin")
    sam = await make_user("user")

    admitted = await budget.admit(db, settings, user_id=sam["id"], agent="copilot", ip="10.0.0.7", clock=late)

    assert admitted.zone == "Europe/Berlin"
    assert await db["agent_spend"].find_one({"_id": f"user:{sam['id']}:2026-03-10"}) is not None
    assert budget.keys(user_id=sam["id"], agent="copilot", moment=late.now(), zone=admitted.zone) == [
        f"user:{sam['id']}:2026-03-10",
        "global:2026-03-10",
    ]
