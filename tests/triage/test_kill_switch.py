"""The desk-wide kill switch (issue 41): `POST /admin/agents/disable` stops every agent, `/enable` undoes it.

It is apart from the triage policy: flipping it moves no policy version, so an admin's open policy form
still saves. Off, the worker claims nothing, a pass in flight is cancelled (its run `aborted`, no
suggestion, nothing applied) and its event waits, pending, its attempt not counted; on again, the
event is triaged once. (The copilot's side: tests/agent/test_kill_switch.py; the worker as a real
process: tests/triage/test_faults.py.)
"""

import asyncio
import threading

import pytest
from bson import ObjectId

from desk.agent.core import switch
from desk.errors import ErrorCode
from tests.triage.conftest import proposal

ADMIN = "/api/v1/admin/agents"


@pytest.fixture
def quick_watch(monkeypatch):
    """A pass looks at the switch every 50 ms instead of every second (speed only)."""
    monkeypatch.setattr(switch, "WATCH_SECONDS", 0.05)


async def event_of(db, order) -> dict:
    return await db["outbox_events"].find_one({"payloadRef": ObjectId(order.id)})


async def test_only_admins_flip_the_switch(make_user, client_for, anonymous, db):
    person = await client_for(await make_user())

    for path in (f"{ADMIN}/disable", f"{ADMIN}/enable"):
        response = await person.post(path)
        assert response.status_code == 403, path
        assert response.json()["error"]["code"] == "FORBIDDEN"
        assert response.json()["error"]["message"] == "Only admins can see or change the agents' settings."
        assert (await anonymous.post(path)).json()["error"]["code"] == "UNAUTHORIZED"
    assert await db["agent_config"].count_documents({"_id": "ai_switch"}) == 0
    assert await db["agent_config_audit"].count_documents({}) == 0


async def test_the_switch_takes_nothing_but_its_address(make_user, client_for, db):
    admin = await client_for(await make_user("admin"))

    response = await admin.post(f"{ADMIN}/disable?force=true")

    assert response.status_code == 400
    assert response.json()["error"]["code"] == "VALIDATION_ERROR"
    assert response.json()["error"]["details"]["fields"][0]["field"] == "force"
    assert await db["agent_config"].count_documents({"_id": "ai_switch"}) == 0  # refused: nothing turned off


async def test_each_flip_is_audited_with_who_and_when_and_the_overview_reports_both_switches(
    db, make_user, client_for, triage_settings
):
    dana = await make_user("admin", name="Dana")
    admin = await client_for(dana)

    off = await admin.post(f"{ADMIN}/disable")
    again = await admin.post(f"{ADMIN}/disable")  # pressed again: already off, nothing changes
    overview = (await admin.get(f"{ADMIN}/triage")).json()

    assert off.status_code == 200
    assert off.json()["enabled"] is False and off.json()["changedBy"] == dana["id"]
    assert again.json() == off.json()
    assert overview["aiSwitch"] == off.json()
    assert (overview["enabled"], overview["aiEnabled"]) == (True, True)  # the triage agent's own, the environment's

    on = await admin.post(f"{ADMIN}/enable")
    assert on.json()["enabled"] is True and on.json()["changedAt"] >= off.json()["changedAt"]
    entries = await db["agent_config_audit"].find({}).sort("createdAt", 1).to_list()
    assert [(e["action"], e["actorId"], e["agentName"]) for e in entries] == [
        ("ai_turned_off", dana["id"], "all"),
        ("ai_turned_on", dana["id"], "all"),
    ]
    assert all(entry["createdAt"] for entry in entries)


async def test_an_open_policy_form_saves_after_the_switch_was_flipped(db, make_user, client_for, triage_settings):
    admin = await client_for(await make_user("admin"))
    read = (await admin.get(f"{ADMIN}/triage/config")).json()  # the admin opens the policy form

    await admin.post(f"{ADMIN}/disable")
    await admin.post(f"{ADMIN}/enable")
    saved = await admin.patch(f"{ADMIN}/triage/config", json={"version": read["version"], "mode": "auto_apply"})
    own = await admin.patch(f"{ADMIN}/triage/config", json={"version": read["version"] + 1, "enabled": False})

    assert saved.status_code == 200, saved.text  # no "Someone else changed the triage settings first"
    assert own.status_code == 200 and own.json()["enabled"] is False  # the triage agent's own switch: the policy's
    overview = (await admin.get(f"{ADMIN}/triage")).json()
    assert (overview["enabled"], overview["aiSwitch"]["enabled"], overview["version"]) == (
        False,
        True,
        read["version"] + 2,
    )


async def test_while_off_nothing_is_claimed_and_on_again_the_order_is_triaged_once(
    db, make_user, make_order, client_for, fake_provider, burst
):
    admin = await client_for(await make_user("admin"))
    order = await make_order(await make_user())

    await admin.post(f"{ADMIN}/disable")
    assert await burst() == 0
    assert fake_provider.requests == []
    assert (await event_of(db, order))["status"] == "pending"
    manual = await admin.post(f"{ADMIN}/triage/run", json={"workOrderId": order.id})
    assert manual.status_code == 503 and manual.json()["error"]["code"] == ErrorCode.AI_TURNED_OFF

    await admin.post(f"{ADMIN}/enable")
    fake_provider.script(proposal())
    assert await burst() == 1
    assert await db["triage_suggestions"].count_documents({"workOrderId": ObjectId(order.id)}) == 1


@pytest.mark.parametrize("mode", ["suggest", "auto_apply"])
async def test_a_pass_in_flight_is_cancelled_and_its_event_waits(
    db, make_user, make_order, client_for, fake_provider, burst, quick_watch, mode
):
    admin = await client_for(await make_user("admin"))
    order = await make_order(await make_user(), priority="low")
    read = (await admin.get(f"{ADMIN}/triage/config")).json()
    await admin.patch(f"{ADMIN}/triage/config", json={"version": read["version"], "mode": mode})
    fake_provider.script(proposal("urgent").with_delay(5.0))  # the model takes its time
    running = asyncio.create_task(burst())
    assert await fake_provider.wait_for_request()

    await admin.post(f"{ADMIN}/disable")
    await running

    assert await fake_provider.wait_for_disconnect()  # the call was cut off, not waited out
    (run,) = await db["agent_runs"].find({"agentName": "triage"}).to_list()
    assert (run["status"], run["errorCode"]) == ("aborted", "turned_off")
    assert await db["triage_suggestions"].count_documents({}) == 0
    event = await event_of(db, order)
    assert (event["status"], event["attempts"]) == ("pending", 0)  # back in the queue, the attempt not counted
    assert (await admin.get(f"/api/v1/work-orders/{order.id}")).json()["priority"] == "low"

    await admin.post(f"{ADMIN}/enable")
    fake_provider.script(proposal("urgent"))
    assert await burst() == 1
    assert await db["triage_suggestions"].count_documents({}) == 1
    assert (await event_of(db, order))["status"] == "done"


@pytest.mark.parametrize("turned_off", ["by an admin here", "in another process, after the claim"])
async def test_an_answer_that_comes_after_the_switch_went_off_is_not_stored(
    db, make_user, make_order, client_for, fake_provider, burst, monkeypatch, turned_off
):
    """The pass's watcher has not looked yet when the answer comes (it never looks here). Turned off by an admin,
    the event was taken back (its fence moved): the lease check before the store refuses it. Turned off just
    after the worker's look but before its claim, nothing was taken back: the switch read before the store
    refuses it (stored here as another process would, without taking anything back)."""
    monkeypatch.setattr(switch, "WATCH_SECONDS", 3600.0)
    admin_user = await make_user("admin")
    admin = await client_for(admin_user)
    order = await make_order(await make_user())
    flipped = threading.Event()
    fake_provider.script(proposal("urgent").held_until(flipped))
    running = asyncio.create_task(burst())
    assert await fake_provider.wait_for_request()

    if turned_off == "by an admin here":
        await admin.post(f"{ADMIN}/disable")
    else:
        await db["agent_config"].insert_one({"_id": switch.SWITCH_ID, "on": False, "changedBy": admin_user["id"]})
    flipped.set()  # the answer comes now, after the switch went off, however long that took
    await running

    assert await db["triage_suggestions"].count_documents({}) == 0
    (run,) = await db["agent_runs"].find({"agentName": "triage"}).to_list()
    assert (run["status"], run["errorCode"]) == ("aborted", "turned_off")
    event = await event_of(db, order)
    assert (event["status"], event["attempts"]) == ("pending", 0)


async def test_a_worker_looks_again_at_its_next_poll_however_soon(
    db, make_user, make_order, fake_provider, burst, triage_settings
):
    """A look before a claim stands for the next claims of its own poll only (task.LOOK_KEPT_SECONDS): turned off
    in another process between two polls, even a moment apart, the second poll claims nothing."""
    admin = await make_user("admin")
    person = await make_user()
    await make_order(person)
    fake_provider.script(proposal())
    assert await burst() == 1
    later = await make_order(person)

    # as another process turns it off: this one has not heard of it
    await db["agent_config"].insert_one({"_id": switch.SWITCH_ID, "on": False, "changedBy": admin["id"]})

    assert await burst() == 0
    assert len(fake_provider.requests) == 1
    assert (await event_of(db, later))["status"] == "pending"
