"""People first (issue 41): what auto-apply leaves alone, and what the triage never touches.

A person who sets the priority while the model looks at the order keeps it, whether the pass that
applies is the one that asked the model or a later one finishing what a dead pass left; a desk can
let the agent raise a priority and never lower it; closed orders and the demo seed's history are
never triaged; and the worker says at start when the stored policy overrules the environment.
"""

import asyncio
import contextlib
import logging
from datetime import UTC, datetime

import pytest
from bson import ObjectId

from desk.actors import SYSTEM_TRIAGE
from desk.errors import Forbidden
from desk.work_orders import service as work_orders
from desk.work_orders import triage_door
from desk.work_orders.models import WorkOrderUpdate
from desk.work_orders.outbox import CREATED
from tests.fake_provider import Turn
from tests.helpers import actor, tuned
from tests.triage.conftest import proposal
from tests.triage.test_worker import (
    _Died,
    a_low_order_on_an_auto_apply_desk,
    a_pass_stopped_before_applying,
    event_of,
    set_policy,
    suggestions_of,
)


async def set_priority(db, person: dict, order_id: str, priority: str) -> None:
    """A person sets the priority on the work order's page (at the version they see)."""
    order = await work_orders.get_or_raise(db=db, actor=actor(person), order_id=order_id)
    change = WorkOrderUpdate(version=order.version, priority=priority)
    await work_orders.update(db=db, actor=actor(person), order_id=order_id, data=change)


async def system_changes(db, person: dict, order_id: str) -> list:
    timeline = await work_orders.activity(db=db, actor=actor(person), order_id=order_id)
    return [entry for entry in timeline if entry.actor_kind == "system"]


async def test_a_person_who_sets_the_priority_while_the_model_looks_keeps_it(
    db, make_user, make_order, fake_provider, burst, triage_settings
):
    owner, order = await a_low_order_on_an_auto_apply_desk(db, make_user, make_order, triage_settings)
    fake_provider.script(proposal("urgent").with_delay(0.1))  # the model's answer is held while the person acts
    passing = asyncio.create_task(burst())
    await fake_provider.wait_for_request()

    await set_priority(db, owner, order.id, "high")
    assert await passing == 1

    stored = await work_orders.get(db=db, actor=actor(owner), order_id=order.id)
    assert stored.priority == "high"  # the person's, not the agent's
    (suggestion,) = await suggestions_of(db, order)
    assert (suggestion["applied"], suggestion["appliedNote"]) == (False, "overtaken")
    assert await system_changes(db, owner, order.id) == []
    assert (await event_of(db, order))["status"] == "done"
    run = await db["agent_runs"].find_one({"workOrderId": ObjectId(order.id)})
    assert (run["status"], run["errorCode"]) == ("complete", "overtaken")


async def test_a_suggestion_left_by_a_dead_pass_is_not_applied_over_a_persons_change_since(
    db, make_user, make_order, fake_provider, burst, triage_settings, provider
):
    owner, order = await a_low_order_on_an_auto_apply_desk(db, make_user, make_order, triage_settings)
    fake_provider.script(proposal("urgent"), proposal("urgent"))

    async def dies() -> bool:
        raise _Died

    with contextlib.suppress(_Died):  # the suggestion is stored; the worker dies before applying it
        await a_pass_stopped_before_applying(db, triage_settings, provider, order, there=dies)
    await set_priority(db, owner, order.id, "high")

    await burst()  # the next worker takes the event and finishes what the dead pass left

    assert (await work_orders.get(db=db, actor=actor(owner), order_id=order.id)).priority == "high"
    (suggestion,) = await suggestions_of(db, order)
    assert (suggestion["applied"], suggestion["appliedNote"]) == (False, "overtaken")
    assert await system_changes(db, owner, order.id) == []
    assert (await event_of(db, order))["status"] == "done"


async def test_a_raise_only_desk_applies_a_raise_and_leaves_a_lowering_as_a_suggestion(
    db, make_user, make_order, fake_provider, burst, triage_settings
):
    owner = await make_user()
    await set_policy(db, triage_settings, mode="auto_apply", applyWhen="raise_only")
    raised = await make_order(owner, "Raise me", priority="medium")
    fake_provider.script(proposal("urgent"))
    await burst()
    lowered = await make_order(owner, "Lower me", priority="high")
    fake_provider.script(proposal("low"))
    await burst()

    assert (await work_orders.get(db=db, actor=actor(owner), order_id=raised.id)).priority == "urgent"
    assert (await work_orders.get(db=db, actor=actor(owner), order_id=lowered.id)).priority == "high"
    (up,), (down,) = await suggestions_of(db, raised), await suggestions_of(db, lowered)
    assert (up["applied"], up["appliedNote"]) == (True, None)
    assert (down["applied"], down["appliedNote"]) == (False, "raise_only")


async def test_a_policy_stored_before_apply_when_existed_applies_either_way(
    db, make_user, make_order, fake_provider, burst, triage_settings
):
    owner = await make_user()
    order = await make_order(owner, priority="high")
    await set_policy(db, triage_settings, mode="auto_apply")
    await db["agent_config"].update_one({"_id": "triage"}, {"$unset": {"applyWhen": "", "daysOff": ""}})
    fake_provider.script(proposal("low"))

    await burst()

    assert (await work_orders.get(db=db, actor=actor(owner), order_id=order.id)).priority == "low"


async def test_a_closed_order_is_skipped_with_no_model_call_and_no_bill(
    db, make_user, make_order, fake_provider, burst
):
    owner = await make_user()
    done, cancelled = await make_order(owner, "Fixed"), await make_order(owner, "Never mind")
    for order, status in ((done, "done"), (cancelled, "cancelled")):
        await work_orders.update(
            db=db, actor=actor(owner), order_id=order.id, data=WorkOrderUpdate(version=order.version, status=status)
        )

    assert await burst() == 2

    assert fake_provider.requests == []
    for order in (done, cancelled):
        event = await event_of(db, order)
        assert (event["status"], event["lastError"]) == ("skipped", "order_closed")
    assert await db["triage_suggestions"].count_documents({}) == 0
    assert await db["agent_runs"].count_documents({}) == 0
    assert await db["agent_spend"].count_documents({"spentUsd": {"$gt": 0}}) == 0  # nothing billed


async def test_the_worker_says_once_which_environment_keys_the_stored_policy_overrules(
    db, make_user, make_order, fake_provider, burst, triage_settings, caplog
):
    await set_policy(db, triage_settings, mode="auto_apply", timeZone="Europe/Berlin")
    await make_order(await make_user())
    fake_provider.script(proposal(), proposal())

    with caplog.at_level(logging.INFO, logger="desk.triage"):
        await burst()
        await make_order(await make_user(), "Another")
        await burst()

    said = [record.getMessage() for record in caplog.records if "stored policy wins" in record.getMessage()]
    assert said == [
        "triage policy: the stored policy wins over the environment for AGENT_TRIAGE_MODE, AGENT_TIME_ZONE"
        " (change it on the agents page)"
    ]
    assert triage_settings.ai_api_key.get_secret_value() not in caplog.text


async def test_the_worker_says_nothing_when_the_policy_is_as_the_environment_seeds_it(
    db, make_user, make_order, fake_provider, burst, triage_settings, caplog
):
    await make_order(await make_user())
    fake_provider.script(proposal())

    with caplog.at_level(logging.INFO, logger="desk.triage"):
        await burst(tuned(triage_settings))

    assert "stored policy wins" not in caplog.text
    assert await db["outbox_events"].count_documents({"type": CREATED, "status": "done"}) == 1


async def test_an_order_closed_while_the_model_looks_is_left_as_it_is(
    db, make_user, make_order, fake_provider, burst, triage_settings
):
    owner, order = await a_low_order_on_an_auto_apply_desk(db, make_user, make_order, triage_settings)
    fake_provider.script(proposal("urgent").with_delay(0.1))
    passing = asyncio.create_task(burst())
    await fake_provider.wait_for_request()

    await work_orders.update(
        db=db, actor=actor(owner), order_id=order.id, data=WorkOrderUpdate(version=order.version, status="done")
    )
    await passing

    stored = await work_orders.get(db=db, actor=actor(owner), order_id=order.id)
    assert (stored.priority, stored.status) == ("low", "done")
    (suggestion,) = await suggestions_of(db, order)
    assert (suggestion["applied"], suggestion["appliedNote"]) == (False, "order_closed")


async def test_the_triage_may_say_a_day_is_near_but_never_sets_when_an_order_is_due(
    db, make_user, make_order, fake_provider, burst, triage_settings
):
    owner, order = await a_low_order_on_an_auto_apply_desk(db, make_user, make_order, triage_settings)
    due = "2026-12-20T17:00:00Z"
    await work_orders.update(
        db=db, actor=actor(owner), order_id=order.id, data=WorkOrderUpdate.model_validate({"version": 1, "dueAt": due})
    )
    sooner = {"summary": "Due tomorrow: urgent.", "suggestedPriority": "urgent", "flagForDispatcher": False}
    fake_provider.script(  # a model that also sends a due moment is refused whole, then answers in the tool's shape
        Turn.tool_calls(("triage_propose", sooner | {"dueAt": "2026-12-09T09:00:00Z"})),
        proposal("urgent", summary="Due on the 20th; the tenant is waiting: urgent."),
    )

    await burst()

    after = await work_orders.get_or_raise(db=db, actor=actor(owner), order_id=order.id)
    assert (after.priority, after.due_at.isoformat()) == ("urgent", "2026-12-20T17:00:00+00:00")
    assert [set(entry.after) for entry in await system_changes(db, owner, order.id)] == [{"priority"}]


async def test_the_triage_door_refuses_a_due_moment_whatever_a_policy_allows(db, make_user, make_order):
    order = await make_order(await make_user())

    with pytest.raises(Forbidden):
        await triage_door.triage_patch(
            db=db,
            actor=SYSTEM_TRIAGE,
            order_id=order.id,
            changes={"dueAt": datetime(2026, 12, 9, tzinfo=UTC)},
            allowed=frozenset({"priority", "dueAt"}),
            run_id="run",
        )

    assert (await db["work_orders"].find_one({"_id": ObjectId(order.id)}))["dueAt"] is None
