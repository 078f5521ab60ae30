"""The copilot loop (spec §4.4, §4.5, §4.7): termination, convergence, version injection, cancellation, records.

Each test scripts the model with the fake provider and then looks where a person (or an auditor)
would: the events the drawer shows, the stored run, tool calls and messages, the work orders.
"""

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable
from datetime import timedelta

import pytest

from desk.agent.copilot import approvals, sessions
from desk.agent.core.events import RunEvent
from desk.agent.core.store import agent_messages, agent_runs, agent_tool_calls
from desk.errors import ErrorCode
from desk.work_orders import service as work_orders
from desk.work_orders.models import WorkOrderUpdate
from tests.fake_provider import FAKE_SECRET, Turn
from tests.helpers import actor, tuned

Hook = Callable[[RunEvent], Awaitable[None]]
SAME_RESULT = {"note": "Same result as your earlier identical call."}


async def drain(turn, hook: Hook | None = None) -> list[RunEvent]:
    """Every event of the turn; `hook` sees each one before the run goes on."""
    events = []
    async for event in turn.events():
        events.append(event)
        if hook is not None:
            await hook(event)
    return events


def deciding(db, person: dict, *, approve: bool = True, reason: str | None = None) -> Hook:
    async def hook(event: RunEvent) -> None:
        if event.kind == "tool_approval_required":
            await approvals.decide(
                db=db, actor=actor(person), tool_call_id=event.tool_call_id, approve=approve, reason=reason
            )

    return hook


def tool_messages(request: dict) -> list[dict]:
    return [m for m in request["messages"] if m["role"] == "tool"]


async def staged_calls(db) -> list[dict]:
    """Tool calls that were put before the person for approval."""
    return [c for c in await db["agent_tool_calls"].find().to_list() if c.get("approval")]


async def the_run(db) -> dict:
    (run,) = await db["agent_runs"].find().to_list()
    return run


# --- termination rules (spec §4.4) ---


async def test_text_without_tool_calls_completes(start, fake_provider, make_user, db):
    sam = await make_user()
    fake_provider.script(Turn.text("You have no open work orders.", chunks=4))

    events = await drain(await start(sam, "Anything open?"))

    assert "".join(e.text for e in events if e.kind == "token") == "You have no open work orders."
    assert events[-1].kind == "message_done" and events[-1].status == "complete" and events[-1].notice is None
    assert (await the_run(db))["status"] == "complete"
    assert len(fake_provider.requests) == 1


async def test_empty_answer_without_tool_calls_completes_with_a_notice(start, fake_provider, make_user, db):
    sam = await make_user()
    fake_provider.script(Turn.text(""))

    events = await drain(await start(sam))

    assert not [e for e in events if e.kind == "token"]
    assert events[-1].status == "complete"
    assert events[-1].notice == "The assistant finished without an answer."
    assert (await the_run(db))["status"] == "complete"


async def test_an_unknown_tool_is_an_error_result_and_the_run_goes_on(start, fake_provider, make_user, db):
    sam = await make_user()
    fake_provider.script(Turn.tool_calls(("make_coffee", {"sugar": 2})), Turn.text("I cannot make coffee."))

    events = await drain(await start(sam))

    (result,) = [e for e in events if e.kind == "tool_result"]
    assert result.outcome == "unknown_tool"
    (told,) = tool_messages(fake_provider.requests[1])
    assert json.loads(told["content"]) == {"error": "There is no tool named 'make_coffee'."}
    assert events[-1].status == "complete"
    (call,) = await db["agent_tool_calls"].find().to_list()
    assert call["tool"] == "make_coffee" and call["outcome"] == "unknown_tool"


async def test_three_unknown_tools_end_the_run_as_an_error(start, fake_provider, make_user, db):
    sam = await make_user()
    fake_provider.script(
        Turn.tool_calls(("make_coffee", {})),
        Turn.tool_calls(("list_my_work_orders", {})),  # a good call in between does not reset the count
        Turn.tool_calls(("order_pizza", {})),
        Turn.tool_calls(("fly_to_the_moon", {})),
        Turn.text("never asked for"),
    )

    events = await drain(await start(sam))

    assert len(fake_provider.requests) == 4
    errors = [e for e in events if e.kind == "error"]
    assert [e.code for e in errors] == [ErrorCode.INTERNAL]
    assert events[-1].status == "error"
    run = await the_run(db)
    assert run["status"] == "error" and run["errorCode"] == "unknown_tools"


BAD_ARGS = {
    "broken JSON": '{"status": ',
    "value outside the schema": {"status": "closed"},
    "an unknown field": {"colour": "red"},
    "a JSON array": "[1, 2]",
    "a JSON string": '"pending"',
}


@pytest.mark.parametrize("args", BAD_ARGS.values(), ids=BAD_ARGS.keys())
async def test_bad_arguments_are_an_error_result_and_the_model_may_retry(start, fake_provider, make_user, db, args):
    sam = await make_user()
    fake_provider.script(Turn.tool_calls(("list_my_work_orders", args)), Turn.text("Let me answer without it."))

    events = await drain(await start(sam))

    (told,) = tool_messages(fake_provider.requests[1])
    assert json.loads(told["content"])["error"].startswith("Invalid arguments: ")
    assert [e.outcome for e in events if e.kind == "tool_result"] == ["error"]
    assert events[-1].status == "complete"


async def test_two_bad_argument_calls_end_the_run_as_an_error(start, fake_provider, make_user, db):
    sam = await make_user()
    fake_provider.script(
        Turn.tool_calls(("list_my_work_orders", '{"status": ')),
        Turn.tool_calls(("search_my_work_orders", {"q": ""})),  # valid JSON, fails the schema (min length)
        Turn.text("never asked for"),
    )

    events = await drain(await start(sam))

    assert len(fake_provider.requests) == 2
    assert [e.code for e in events if e.kind == "error"] == [ErrorCode.VALIDATION_ERROR]
    run = await the_run(db)
    assert run["status"] == "error" and run["errorCode"] == "malformed_args"


async def test_parallel_reads_run_in_the_order_the_model_gave(start, fake_provider, make_user, make_order):
    sam = await make_user(name="Sam Reyes")
    await make_order(sam, "Leaking tap")
    fake_provider.script(
        Turn.tool_calls(
            ("search_my_work_orders", {"q": "tap"}, "call_c"),
            ("get_profile", {}, "call_a"),
            ("list_my_work_orders", {"status": "done"}, "call_b"),
            interleaved=True,
        ),
        Turn.text("Found it."),
    )

    events = await drain(await start(sam))

    told = tool_messages(fake_provider.requests[1])
    assert [m["tool_call_id"] for m in told] == ["call_c", "call_a", "call_b"]
    found, profile, done = (json.loads(m["content"]) for m in told)
    assert [o["title"] for o in found["workOrders"]] == ["Leaking tap"]
    assert profile["name"] == "Sam Reyes"
    assert done == {"total": 0, "shown": 0, "workOrders": []}
    steps = [(e.kind, e.tool) for e in events if e.kind in ("tool_call_start", "tool_result")]
    order = ("search_my_work_orders", "get_profile", "list_my_work_orders")
    assert steps == [(kind, tool) for tool in order for kind in ("tool_call_start", "tool_result")]


async def test_a_second_write_in_the_same_step_is_held_back(start, fake_provider, make_user, make_order, db):
    sam = await make_user()
    tap = await make_order(sam, "Leaking tap")
    door = await make_order(sam, "Squeaky door")
    fake_provider.script(
        Turn.tool_calls(("list_my_work_orders", {})),
        Turn.tool_calls(
            ("update_work_order", {"id": tap.id, "priority": "high"}, "call_update"),
            ("delete_work_order", {"id": door.id}, "call_delete"),
        ),
        Turn.text("Made the tap high priority; ask me again about the door."),
    )

    events = await drain(await start(sam), deciding(db, sam))

    assert [e.tool for e in events if e.kind == "tool_approval_required"] == ["update_work_order"]
    held = next(m for m in tool_messages(fake_provider.requests[2]) if m["tool_call_id"] == "call_delete")
    assert "Only one change can be proposed at a time" in json.loads(held["content"])["error"]
    assert (await work_orders.get(db=db, actor=actor(sam), order_id=tap.id)).priority == "high"
    assert await work_orders.get(db=db, actor=actor(sam), order_id=door.id) is not None
    assert len(await staged_calls(db)) == 1
    assert await db["agent_tool_calls"].count_documents({"tool": "delete_work_order", "outcome": "error"}) == 1


async def test_the_step_cap_ends_the_run_as_budget_exceeded(start, fake_provider, make_user, ai_settings, db):
    sam = await make_user()
    fake_provider.script(
        Turn.tool_calls(("list_my_work_orders", {"status": "pending"})),
        Turn.tool_calls(("list_my_work_orders", {"status": "done"})),
        Turn.text("never asked for"),
    )

    events = await drain(await start(sam, settings=tuned(ai_settings, ai_max_steps_per_run=2)))

    assert len(fake_provider.requests) == 2
    assert [e.code for e in events if e.kind == "error"] == [ErrorCode.AI_BUDGET_EXCEEDED]
    assert events[-1].status == "budget_exceeded"
    run = await the_run(db)
    assert run["status"] == "budget_exceeded" and run["errorCode"] == "step_cap" and run["steps"] == 2


# --- convergence guard ---


async def test_an_identical_read_is_answered_from_the_cache(start, fake_provider, make_user, make_order, db):
    sam = await make_user()
    await make_order(sam, "Leaking tap")
    fake_provider.script(
        Turn.tool_calls(("list_my_work_orders", {})),
        Turn.tool_calls(("list_my_work_orders", {})),
        Turn.text("You have one."),
    )

    async def another_order_arrives(event: RunEvent) -> None:
        if event.kind == "tool_result":  # were the tool run again, it would now list two orders
            await make_order(sam, f"Arrived after call {event.tool_call_id}")

    await drain(await start(sam), another_order_arrives)

    first, second = tool_messages(fake_provider.requests[2])
    assert json.loads(first["content"])["total"] == 1
    assert json.loads(second["content"]) == SAME_RESULT


async def test_a_different_question_with_the_same_answer_is_not_pasted_twice(
    start, fake_provider, make_user, make_order, db
):
    """Spec §4.7: identical results are never re-pasted (here, every order is pending: the filter changes nothing)."""
    sam = await make_user()
    await make_order(sam, "Leaking tap")
    fake_provider.script(
        Turn.tool_calls(("list_my_work_orders", {})),
        Turn.tool_calls(("list_my_work_orders", {"status": "pending"})),
        Turn.tool_calls(("search_my_work_orders", {"q": "door"})),  # another answer: shown in full
        Turn.text("You have one."),
    )

    events = await drain(await start(sam))

    listed, filtered, searched = tool_messages(fake_provider.requests[3])
    assert json.loads(listed["content"])["total"] == 1
    assert json.loads(filtered["content"]) == {
        "note": "Same result as your earlier list_my_work_orders call in this turn."
    }
    assert json.loads(searched["content"])["total"] == 0
    assert [e.outcome for e in events if e.kind == "tool_result"] == ["ok", "ok", "ok"]


async def test_a_read_after_the_runs_own_change_is_not_answered_from_the_cache(
    start, fake_provider, make_user, make_order, db
):
    sam = await make_user()
    tap = await make_order(sam, "Leaking tap")
    fake_provider.script(
        *Turn.read_then_update(tap.id, priority="urgent"),
        Turn.tool_calls(("list_my_work_orders", {})),  # checking its work must see the change
        Turn.text("It is urgent now."),
    )

    await drain(await start(sam), deciding(db, sam))

    checked = json.loads(tool_messages(fake_provider.requests[3])[-1]["content"])
    assert [o["priority"] for o in checked["workOrders"]] == ["urgent"]


async def test_an_executed_change_proposed_again_is_not_staged_again(start, fake_provider, make_user, db):
    sam = await make_user()
    fake_provider.script(
        Turn.tool_calls(("create_work_order", {"title": "Replace bulb in hall"})),
        Turn.tool_calls(("create_work_order", {"title": "Replace bulb in hall"})),
        Turn.text("Created it."),
    )

    events = await drain(await start(sam), deciding(db, sam))

    assert len([e for e in events if e.kind == "tool_approval_required"]) == 1
    assert await db["work_orders"].count_documents({"title": "Replace bulb in hall"}) == 1
    assert "already" in tool_messages(fake_provider.requests[2])[-1]["content"]
    assert events[-1].status == "complete"


async def test_the_same_change_rejected_twice_is_a_loop(start, fake_provider, make_user, make_order, db):
    sam = await make_user()
    tap = await make_order(sam, "Leaking tap")
    change = ("update_work_order", {"id": tap.id, "status": "cancelled"})
    fake_provider.script(
        Turn.tool_calls(("list_my_work_orders", {})),
        Turn.tool_calls(change),
        Turn.tool_calls(change),
        Turn.text("never asked for"),
    )

    events = await drain(await start(sam), deciding(db, sam, approve=False))

    assert len(fake_provider.requests) == 3
    assert [e.kind for e in events].count("tool_approval_required") == 2
    run = await the_run(db)
    assert run["status"] == "error" and run["errorCode"] == "loop_detected"
    assert (await work_orders.get(db=db, actor=actor(sam), order_id=tap.id)).status == "pending"
    assert await db["activity"].count_documents({"action": "updated"}) == 0


# --- version and owner are never the model's to give (spec §4.3) ---


async def test_the_model_never_sees_version_or_owner_in_any_tool_schema(start, fake_provider, make_user):
    for role in ("admin", "user", "viewer"):
        fake_provider.reset()
        fake_provider.script(Turn.text("Hi"))
        await drain(await start(await make_user(role)))
        schemas = json.dumps(fake_provider.requests[0]["tools"]).lower()
        assert "version" not in schemas and "ownerid" not in schemas and "owner_id" not in schemas


async def test_the_runtime_injects_the_version_it_read(start, fake_provider, make_user, make_order, db):
    sam = await make_user()
    tap = await make_order(sam, "Leaking tap")
    await work_orders.update(db=db, actor=actor(sam), order_id=tap.id, data=WorkOrderUpdate(version=1, priority="low"))
    fake_provider.script(
        *Turn.read_then_update(tap.id, title="Leaking tap (kitchen)"),
        Turn.text("Renamed."),
    )

    await drain(await start(sam), deciding(db, sam))

    stored = await work_orders.get(db=db, actor=actor(sam), order_id=tap.id)
    assert (stored.title, stored.priority, stored.version) == ("Leaking tap (kitchen)", "low", 3)
    call = await db["agent_tool_calls"].find_one({"tool": "update_work_order"})
    assert (call["stagedVersion"], call["executedVersion"]) == (2, 3)


async def test_a_change_made_after_the_models_read_is_in_the_diff_and_the_staged_version(
    start, fake_provider, make_user, make_order, db
):
    """The version is staged with the pre-image, read together when the change is proposed: what the
    person sees and the version the change is made at always match (decided over the spec's "latest
    read", which would stage a version older than the diff and only go stale at execution)."""
    sam = await make_user()
    tap = await make_order(sam, "Leaking tap")
    fake_provider.script(*Turn.read_then_update(tap.id, priority="urgent"), Turn.text("Done."))
    shown = []

    async def renamed_after_the_read(event) -> None:
        if event.kind == "tool_result" and event.tool == "list_my_work_orders":  # read at version 1: now renamed
            change = WorkOrderUpdate(version=1, title="Leaking tap (kitchen)")
            await work_orders.update(db=db, actor=actor(sam), order_id=tap.id, data=change)
        shown.append(event)
        await deciding(db, sam)(event)

    await drain(await start(sam), renamed_after_the_read)

    (asked,) = [e for e in shown if e.kind == "tool_approval_required"]
    assert asked.diff.before["title"] == "Leaking tap (kitchen)" and asked.diff.changed == ["priority"]
    (call,) = await staged_calls(db)
    assert (call["stagedVersion"], call["executedVersion"], call["outcome"]) == (2, 3, "executed")
    stored = await work_orders.get(db=db, actor=actor(sam), order_id=tap.id)
    assert (stored.title, stored.priority) == ("Leaking tap (kitchen)", "urgent")


@pytest.mark.parametrize("fields", [{}, {"priority": "medium", "title": "Leaking tap"}], ids=["no field", "as it is"])
async def test_a_change_that_changes_nothing_is_never_put_to_the_person(
    start, fake_provider, make_user, make_order, db, fields
):
    sam = await make_user()
    tap = await make_order(sam, "Leaking tap")  # medium priority
    fake_provider.script(*Turn.read_then_update(tap.id, **fields), Turn.text("Nothing to do."))

    events = await drain(await start(sam))

    assert not [e for e in events if e.kind == "tool_approval_required"]
    assert [e.outcome for e in events if e.kind == "tool_result"] == ["ok", "error"]
    told = json.loads(tool_messages(fake_provider.requests[2])[-1]["content"])
    assert told == {"error": "This change would change nothing."}
    assert (await work_orders.get(db=db, actor=actor(sam), order_id=tap.id)).version == 1


async def test_an_id_quoted_in_a_description_is_not_seen(start, fake_provider, make_user, make_order, db):
    """Only the objects a tool returned count as seen: an id in their text is somebody's words, even of one's own."""
    sam = await make_user()
    boiler = await make_order(sam, "Boiler service contract")
    await make_order(sam, "Leaking tap", description=f"Same plumber as work order {boiler.id}.")
    fake_provider.script(
        Turn.tool_calls(("search_my_work_orders", {"q": "tap"})),
        Turn.tool_calls(("update_work_order", {"id": boiler.id, "priority": "low"})),
        Turn.text("I need to look that one up first."),
    )

    events = await drain(await start(sam))

    assert [e.outcome for e in events if e.kind == "tool_result"] == ["ok", "blocked"]
    told = json.loads(tool_messages(fake_provider.requests[2])[-1]["content"])
    assert told["error"] == "AI_INJECTION_BLOCKED"
    assert not [e for e in events if e.kind == "tool_approval_required"]
    assert len(await staged_calls(db)) == 0
    assert (await work_orders.get(db=db, actor=actor(sam), order_id=boiler.id)).version == 1


# --- run lifecycle and cancellation (spec §4.5) ---


async def test_only_running_to_a_terminal_status_is_legal(start, fake_provider, make_user, db):
    sam = await make_user()
    fake_provider.script(Turn.text("Done."))
    await drain(await start(sam))
    run = await the_run(db)

    for status in agent_runs.TERMINAL:
        assert await agent_runs.finish_run(db, run["_id"], status) is False
    assert (await the_run(db))["status"] == "complete"
    assert (await the_run(db))["finishedAt"] == run["finishedAt"]


async def test_closing_the_stream_mid_answer_aborts_the_run_and_the_upstream_call(start, fake_provider, make_user, db):
    sam = await make_user()
    fake_provider.script(Turn.slow("Let me think about all of your work orders", delay=0.2))
    turn = await start(sam)
    stream = turn.events()

    first = await anext(stream)
    await stream.aclose()  # the person pressed Stop / the browser went away

    run = await the_run(db)  # all settled when close returns, before anything else gets to run
    assert run["status"] == "aborted"
    assert run["inputTokens"] > 0  # the cancelled call still bills (spec §4.7)
    assert await db["agent_spend"].count_documents({"spentUsd": {"$gt": 0}}) == 2  # the person's day and global
    assert first.kind == "token"
    assert await fake_provider.wait_for_disconnect()
    assert await db["agent_tool_calls"].count_documents({"approval.status": "pending"}) == 0
    session = await db["copilot_sessions"].find_one({})
    assert session["runningRunId"] is None  # the person can ask again


async def test_leaving_before_the_first_token_still_keeps_the_run_and_the_message(start, fake_provider, make_user, db):
    sam = await make_user()
    fake_provider.script(Turn.slow("Still thinking", delay=5))
    stream = (await start(sam, "Which of my orders are late?")).events()
    waiting = asyncio.create_task(anext(stream))
    assert await fake_provider.wait_for_request()  # the model has the question, and has said nothing yet

    waiting.cancel()  # the person closed the drawer
    with contextlib.suppress(asyncio.CancelledError):
        await waiting
    await stream.aclose()

    run = await the_run(db)
    assert run["status"] == "aborted"
    (message,) = await db["agent_messages"].find({"runId": run["_id"]}).to_list()
    assert message["role"] == "user" and message["content"] == "Which of my orders are late?"
    assert (await db["copilot_sessions"].find_one({}))["runningRunId"] is None


async def test_a_model_that_fails_before_any_token_leaves_the_question_stored(start, fake_provider, make_user, db):
    sam = await make_user()
    fake_provider.script(Turn.error(503))

    events = await drain(await start(sam, "Anything urgent?"))

    assert events[-1].status == "error"
    run = await the_run(db)
    assert run["errorCode"] == "AI_UNAVAILABLE"
    (message,) = await db["agent_messages"].find({"runId": run["_id"]}).to_list()
    assert message["content"] == "Anything urgent?"


async def test_closing_the_stream_while_a_change_waits_expires_it(start, fake_provider, make_user, make_order, db):
    sam = await make_user()
    tap = await make_order(sam, "Leaking tap")
    fake_provider.script(
        Turn.tool_calls(("list_my_work_orders", {})),
        Turn.tool_calls(("delete_work_order", {"id": tap.id})),
    )
    stream = (await start(sam)).events()

    async for event in stream:
        if event.kind == "tool_approval_required":
            break
    await stream.aclose()

    assert (await the_run(db))["status"] == "aborted"
    (staged,) = await db["agent_tool_calls"].find({"tool": "delete_work_order"}).to_list()
    assert staged["approval"]["status"] == "expired"
    assert await work_orders.get(db=db, actor=actor(sam), order_id=tap.id) is not None


async def test_logout_aborts_a_run_waiting_for_approval(start, fake_provider, make_user, make_order, db):
    sam = await make_user()
    tap = await make_order(sam, "Leaking tap")
    fake_provider.script(
        *Turn.read_then_update(tap.id, status="done"),
        Turn.text("never asked for"),
    )

    async def log_out(event: RunEvent) -> None:
        if event.kind == "tool_approval_required":
            await sessions.abort_runs(db=db, user_id=sam["id"])

    events = await drain(await start(sam), log_out)

    assert events[-1].kind == "message_done" and events[-1].status == "aborted"
    assert "tool_approval_expired" in [e.kind for e in events]
    assert (await the_run(db))["status"] == "aborted"
    (staged,) = await db["agent_tool_calls"].find({"tool": "update_work_order"}).to_list()
    assert staged["approval"]["status"] == "expired"
    assert (await work_orders.get(db=db, actor=actor(sam), order_id=tap.id)).status == "pending"
    assert len(fake_provider.requests) == 2


async def test_a_provider_failure_is_ai_unavailable_and_still_billed(start, fake_provider, make_user, db):
    sam = await make_user()
    fake_provider.script(Turn.tool_calls(("get_profile", {})), Turn.error(500))

    events = await drain(await start(sam))

    (error,) = [e for e in events if e.kind == "error"]
    assert error.code == ErrorCode.AI_UNAVAILABLE and FAKE_SECRET not in error.message
    assert events[-1].status == "error"
    run = await the_run(db)
    assert run["status"] == "error" and run["errorCode"] == "AI_UNAVAILABLE"
    assert run["steps"] == 2  # the failed call counts and bills like the good one
    spent = await db["agent_spend"].find_one({"_id": {"$regex": f"^user:{sam['id']}:"}})
    assert spent["spentUsd"] == pytest.approx(run["costUsd"]) and run["costUsd"] > (100 * 0.15 + 10 * 0.6) / 1e6


async def test_every_event_about_a_tool_call_carries_the_desks_id_for_it(
    start, fake_provider, make_user, make_order, db
):
    """The model's ids may repeat from step to step (the fake's do: call_fake_0); a client links events by ours."""
    sam = await make_user()
    tap = await make_order(sam, "Leaking tap")
    fake_provider.script(*Turn.read_then_update(tap.id, status="done"), Turn.text("Done."))

    events = await drain(await start(sam), deciding(db, sam))

    about_calls = [(e.kind, e.tool_call_id) for e in events if hasattr(e, "tool_call_id")]
    (listed, updated) = [e.tool_call_id for e in events if e.kind == "tool_call_start"]
    assert about_calls == [
        ("tool_call_start", listed),
        ("tool_result", listed),
        ("tool_call_start", updated),
        ("tool_approval_required", updated),
        ("tool_result", updated),
    ]
    stored = {str(c["_id"]): (c["tool"], c["callId"]) for c in await db["agent_tool_calls"].find().to_list()}
    assert stored == {listed: ("list_my_work_orders", "call_fake_0"), updated: ("update_work_order", "call_fake_0")}


# --- what is kept (spec §6 COP-10, SEC-11) and what is never logged (SEC-1) ---


async def test_a_run_is_recorded_with_tokens_messages_and_tool_calls(start, fake_provider, make_user, make_order, db):
    sam = await make_user()
    tap = await make_order(sam, "Leaking tap")
    fake_provider.script(
        Turn.tool_calls(("list_my_work_orders", {"priority": "medium"}), usage=(300, 20)),
        Turn.tool_calls(("update_work_order", {"id": tap.id, "priority": "high"}), usage=(400, 25)),
        Turn.text("The tap is high priority now.", usage=(500, 12)),
    )

    await drain(await start(sam, "Raise the tap"), deciding(db, sam))

    run = await the_run(db)
    assert (run["status"], run["inputTokens"], run["outputTokens"], run["steps"]) == ("complete", 1200, 57, 3)
    assert run["costUsd"] == pytest.approx((1200 * 0.15 + 57 * 0.60) / 1_000_000)
    assert run["finishedAt"] is not None
    messages = await agent_messages.run_messages(db, run["_id"])
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant", "tool", "assistant"]
    assert messages[0]["content"] == "Raise the tap"
    assert messages[-1]["content"] == "The tap is high priority now."
    read, write = await agent_tool_calls.run_tool_calls(db, run["_id"])
    assert (read["tool"], read["outcome"], read["args"]) == ("list_my_work_orders", "ok", {"priority": "medium"})
    assert read["result"]["workOrders"][0]["id"] == tap.id
    assert (write["tool"], write["outcome"], write["approval"]["status"]) == (
        "update_work_order",
        "executed",
        "approved",
    )
    assert write["preImage"]["priority"] == "medium" and write["result"]["updated"]["priority"] == "high"
    assert all(isinstance(c["latencyMs"], int) and c["latencyMs"] >= 0 for c in (read, write))
    (entry,) = [
        a for a in await work_orders.activity(db=db, actor=actor(sam), order_id=tap.id) if a.action == "updated"
    ]
    assert entry.run_id == str(run["_id"]) and entry.actor_id == sam["id"] and entry.after == {"priority": "high"}


KEPT = {  # SEC-12: transcripts for 90 days; runs and sessions (who asked what, when, at what cost) for a year
    "agent_messages": ("createdAt", timedelta(days=90)),
    "agent_tool_calls": ("createdAt", timedelta(days=90)),
    "agent_runs": ("startedAt", timedelta(days=365)),
    "copilot_sessions": ("updatedAt", timedelta(days=365)),  # from its last use
}


async def test_every_record_of_a_turn_is_set_to_expire_when_its_retention_ends(start, fake_provider, make_user, db):
    sam = await make_user()
    fake_provider.script(Turn.tool_calls(("get_profile", {})), Turn.text("You are Sam."))

    await drain(await start(sam, "Who am I?"))

    for collection, (created, kept_for) in KEPT.items():
        docs = await db[collection].find().to_list()
        assert docs and all(d["expiresAt"] - d[created] == kept_for for d in docs), collection
        ttl = [i for i in (await db[collection].index_information()).values() if "expireAfterSeconds" in i]
        assert [(i["key"], i["expireAfterSeconds"]) for i in ttl] == [([("expiresAt", 1)], 0)], collection


async def test_prompt_and_answer_text_never_reach_the_logs(start, fake_provider, make_user, make_order, db, caplog):
    caplog.set_level(logging.DEBUG)
    caplog.set_level(logging.WARNING, logger="pymongo")  # as desk.logs.configure_logging runs the desk
    sam = await make_user()
    await make_order(sam, "Canary tap", description="ORDER-CANARY-81 boiler code 4471")
    fake_provider.script(
        Turn.tool_calls(("list_my_work_orders", {}), text="MODEL-CANARY-22 let me look"),
        Turn.tool_calls(("no_such_tool", {"x": "ARGS-CANARY-57"})),
        Turn.text("MODEL-CANARY-23 all done"),
        Turn.error(500),
    )

    await drain(await start(sam, "PROMPT-CANARY-13 what is open?"))
    await drain(await start(sam, "PROMPT-CANARY-14 and now?"))  # this one fails at the provider

    assert any("AI provider call failed" in r.getMessage() for r in caplog.records)  # the failure was logged
    logged = "\n".join(f"{r.getMessage()} {r.exc_text or ''}" for r in caplog.records)
    for canary in ("PROMPT-CANARY", "MODEL-CANARY", "ORDER-CANARY", "ARGS-CANARY", FAKE_SECRET, "sk-test-key"):
        assert canary not in logged
