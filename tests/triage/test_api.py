"""The triage agent's HTTP surface (AGT-8, DESIGN §3a): admins steer it; owners see and decide on suggestions."""

import asyncio
from datetime import timedelta

from bson import ObjectId

from desk.actors import SYSTEM_TRIAGE
from desk.agent.core.store import agent_runs
from desk.agent.triage import task as triage_task
from desk.jobs import backoff
from tests.fake_provider import Turn
from tests.helpers import reconfigure, tuned
from tests.triage.conftest import proposal

ADMIN = "/api/v1/admin/agents"


async def triaged_order(make_user, make_order, fake_provider, burst, *, flag=False, priority="high", owner=None):
    owner = owner or await make_user()
    order = await make_order(owner)
    fake_provider.script(proposal(priority, flag=flag))
    await burst()
    return owner, order


async def test_only_admins_reach_the_agent_routes(make_user, client_for, burst):
    person = await client_for(await make_user())

    for method, path in [("GET", f"{ADMIN}/triage"), ("GET", f"{ADMIN}/runs"), ("POST", f"{ADMIN}/disable")]:
        response = await person.request(method, path)
        assert response.status_code == 403, path
        assert response.json()["error"]["code"] == "FORBIDDEN"


async def test_an_admin_sees_the_policy_and_the_queue(make_user, make_order, client_for, triage_settings):
    admin = await client_for(await make_user("admin"))
    await make_order(await make_user())

    body = (await admin.get(f"{ADMIN}/triage")).json()

    assert (body["mode"], body["enabled"], body["allowedFields"], body["workingHours"]) == (
        "suggest",
        True,
        ["priority"],
        "*",
    )
    assert body["events"]["pending"] == 1 and body["aiEnabled"] is True


async def test_a_policy_change_is_versioned_validated_and_audited(db, make_user, client_for, triage_settings):
    admin_user = await make_user("admin")
    admin = await client_for(admin_user)
    version = (await admin.get(f"{ADMIN}/triage")).json()["version"]

    changed = await admin.patch(
        f"{ADMIN}/triage/config",
        json={"version": version, "mode": "auto_apply", "workingHours": "08:00-18:00", "timeZone": "Europe/Berlin"},
    )
    stale = await admin.patch(f"{ADMIN}/triage/config", json={"version": version, "mode": "suggest"})
    secret = await admin.patch(f"{ADMIN}/triage/config", json={"version": version + 1, "aiBaseUrl": "https://evil"})
    hours = await admin.patch(f"{ADMIN}/triage/config", json={"version": version + 1, "workingHours": "9-5"})
    zone = await admin.patch(f"{ADMIN}/triage/config", json={"version": version + 1, "timeZone": "Mars/Olympus"})
    never = await admin.patch(f"{ADMIN}/triage/config", json={"version": version + 1, "workingHours": "09:00-09:00"})
    twice = await admin.patch(
        f"{ADMIN}/triage/config", json={"version": version + 1, "allowedFields": ["priority"] * 2}
    )
    huge = await admin.patch(f"{ADMIN}/triage/config", json={"version": 2**63, "mode": "suggest"})  # was a 500

    assert changed.status_code == 200
    assert (changed.json()["mode"], changed.json()["version"]) == ("auto_apply", version + 1)
    assert stale.status_code == 409
    assert [r.status_code for r in (secret, hours, zone, never, twice, huge)] == [400] * 6
    assert "another time" in never.json()["error"]["message"] and "once" in twice.json()["error"]["message"]
    (entry,) = await db["agent_config_audit"].find({"action": "config_updated"}).to_list()
    assert entry["actorId"] == admin_user["id"]
    assert (entry["before"]["mode"], entry["after"]["mode"]) == ("suggest", "auto_apply")


async def test_a_manual_run_triages_now_under_the_admins_name(
    db, make_user, make_order, client_for, fake_provider, triage_settings, provider
):
    admin_user = await make_user("admin")
    admin = await client_for(admin_user)
    order = await make_order(await make_user())
    fake_provider.script(proposal("urgent"))

    response = await admin.post(f"{ADMIN}/triage/run", json={"workOrderId": order.id})

    body = response.json()
    assert response.status_code == 200
    assert body["outcome"] == "suggested" and body["suggestion"]["suggestedPriority"] == "urgent"
    run = await agent_runs.get_run(db, ObjectId(body["runId"]))
    assert (run["agentName"], run["mode"], run["triggeredBy"]) == ("triage", "autonomous", admin_user["id"])
    audit = await db["agent_config_audit"].find_one({"action": "manual_run"})
    assert audit["actorId"] == admin_user["id"] and audit["after"]["runId"] == body["runId"]


async def test_a_manual_run_holds_the_orders_event_so_the_worker_does_not_triage_it_again(
    db, make_user, make_order, client_for, fake_provider, triage_settings, provider, burst
):
    admin = await client_for(await make_user("admin"))
    order = await make_order(await make_user())
    fake_provider.script(proposal("urgent").with_delay(0.3))  # the model takes its time

    manual = asyncio.create_task(admin.post(f"{ADMIN}/triage/run", json={"workOrderId": order.id}))
    assert await fake_provider.wait_for_request()
    claimed_meanwhile = await burst()
    response = await manual
    claimed_after = await burst()

    assert response.status_code == 200 and response.json()["outcome"] == "suggested"
    assert (claimed_meanwhile, claimed_after, len(fake_provider.requests)) == (0, 0, 1)  # one call, one bill
    assert await db["triage_suggestions"].count_documents({"workOrderId": ObjectId(order.id)}) == 1
    event = await db["outbox_events"].find_one({"payloadRef": ObjectId(order.id)})
    assert (event["status"], event["leaseOwner"]) == ("done", None)


async def test_a_manual_run_while_a_worker_triages_the_order_is_refused(
    db, make_user, make_order, client_for, fake_provider, triage_settings, provider, burst
):
    admin = await client_for(await make_user("admin"))
    order = await make_order(await make_user())
    fake_provider.script(proposal("urgent").with_delay(0.3))

    working = asyncio.create_task(burst())
    assert await fake_provider.wait_for_request()
    response = await admin.post(f"{ADMIN}/triage/run", json={"workOrderId": order.id})
    await working

    assert response.status_code == 409 and response.json()["error"]["code"] == "CONFLICT"
    assert "working on this work order right now" in response.json()["error"]["message"]
    assert len(fake_provider.requests) == 1
    assert await db["triage_suggestions"].count_documents({"workOrderId": ObjectId(order.id)}) == 1


async def test_a_manual_run_takes_a_desk_wide_slot_and_is_refused_while_the_worker_holds_every_one(
    db, make_user, make_order, client_for, fake_provider, triage_settings, provider
):
    settings = reconfigure(triage_settings, agent_concurrency=1)
    admin = await client_for(await make_user("admin"))
    person = await make_user()
    busy, waiting = await make_order(person), await make_order(person)
    fake_provider.script(proposal("urgent").with_delay(0.3), proposal())

    working = asyncio.create_task(triage_task.process_due(db, settings, provider=provider))  # `waiting` first: newest
    assert await fake_provider.wait_for_request()
    refused = await admin.post(f"{ADMIN}/triage/run", json={"workOrderId": busy.id})
    await working  # it then triages `busy` too, in the one slot
    fake_provider.script(proposal())
    after = await admin.post(f"{ADMIN}/triage/run", json={"workOrderId": waiting.id})

    assert refused.status_code == 429 and refused.json()["error"]["code"] == "RATE_LIMITED"
    assert "as many passes at once as this desk allows" in refused.json()["error"]["message"]
    assert refused.headers["retry-after"] == "5"
    assert len(fake_provider.requests) == 3  # the worker's two, then the manual run once the slot was free
    assert after.status_code == 200 and after.json()["outcome"] == "suggested"
    assert await db["job_slots"].count_documents({"owner": {"$ne": None}}) == 0  # each let go


async def test_a_failed_manual_run_gives_the_event_back_as_it_was(
    db, make_user, make_order, client_for, fake_provider, triage_settings, provider, burst
):
    admin = await client_for(await make_user("admin"))
    order = await make_order(await make_user())
    fake_provider.script(Turn.malformed())

    response = await admin.post(f"{ADMIN}/triage/run", json={"workOrderId": order.id})

    assert response.json()["outcome"] == "failed"
    event = await db["outbox_events"].find_one({"payloadRef": ObjectId(order.id)})
    assert (event["status"], event["attempts"], event["leaseOwner"]) == ("pending", 0, None)  # the worker's to take
    fake_provider.script(proposal())
    assert await burst() == 1


async def test_triage_runs_run_as_the_system_actor(
    make_user, make_order, client_for, fake_provider, triage_settings, provider, burst
):
    admin = await client_for(await make_user("admin"))
    await triaged_order(make_user, make_order, fake_provider, burst)
    fake_provider.script(proposal())
    manual = await admin.post(f"{ADMIN}/triage/run", json={"workOrderId": (await make_order(await make_user())).id})

    runs = (await admin.get(f"{ADMIN}/runs", params={"agent": "triage"})).json()["items"]
    detail = (await admin.get(f"{ADMIN}/runs/{manual.json()['runId']}")).json()

    assert [(run["actorId"], run["actorKind"]) for run in runs] == [(SYSTEM_TRIAGE.id, "system")] * 2
    assert (detail["run"]["actorId"], detail["run"]["actorKind"]) == (SYSTEM_TRIAGE.id, "system")


async def test_a_manual_run_of_a_missing_order_is_not_found(make_user, client_for, triage_settings, provider):
    admin = await client_for(await make_user("admin"))

    response = await admin.post(f"{ADMIN}/triage/run", json={"workOrderId": str(ObjectId())})

    assert response.status_code == 404


async def test_runs_list_both_agents_and_filter_by_agent(
    db, make_user, make_order, client_for, fake_provider, burst, settings
):
    admin = await client_for(await make_user("admin"))
    await triaged_order(make_user, make_order, fake_provider, burst)
    copilot = agent_runs.new_run(session_id=None, user_id=None, mode="copilot", model="m", lease=timedelta(seconds=1))
    await agent_runs.insert_run(db, copilot)

    every = (await admin.get(f"{ADMIN}/runs")).json()
    triage_only = (await admin.get(f"{ADMIN}/runs", params={"agent": "triage"})).json()

    assert {run["agentName"] for run in every["items"]} == {"copilot", "triage"} and every["total"] == 2
    assert [run["agentName"] for run in triage_only["items"]] == ["triage"] and triage_only["total"] == 1


async def test_viewing_a_transcript_is_itself_audited(db, make_user, make_order, client_for, fake_provider, burst):
    admin_user = await make_user("admin")
    admin = await client_for(admin_user)
    await triaged_order(make_user, make_order, fake_provider, burst)
    run_id = (await admin.get(f"{ADMIN}/runs")).json()["items"][0]["id"]

    detail = (await admin.get(f"{ADMIN}/runs/{run_id}")).json()

    assert [m["role"] for m in detail["messages"]] == ["system", "user", "assistant"]
    assert detail["toolCalls"][0]["tool"] == "triage_propose"
    viewed = await db["agent_config_audit"].find_one({"action": "run_viewed"})
    assert (viewed["actorId"], viewed["after"]["runId"]) == (admin_user["id"], run_id)


async def test_the_owner_sees_and_accepts_a_suggestion_which_applies_it_as_them(
    db, make_user, make_order, client_for, fake_provider, burst
):
    owner, order = await triaged_order(make_user, make_order, fake_provider, burst, priority="urgent")
    client = await client_for(owner)
    (suggestion,) = (await client.get(f"/api/v1/work-orders/{order.id}/triage")).json()

    accepted = await client.post(
        f"/api/v1/work-orders/{order.id}/triage/{suggestion['id']}/decide", json={"accept": True}
    )
    again = await client.post(
        f"/api/v1/work-orders/{order.id}/triage/{suggestion['id']}/decide", json={"accept": False}
    )

    assert accepted.status_code == 200 and accepted.json()["decision"] == "accepted"
    assert again.status_code == 409
    current = (await client.get(f"/api/v1/work-orders/{order.id}")).json()
    assert (current["priority"], current["version"]) == ("urgent", 2)
    (latest, *_) = (await client.get(f"/api/v1/work-orders/{order.id}/activity")).json()
    assert (latest["actorId"], latest["actorKind"]) == (owner["id"], "human")


async def test_accepting_a_suggestion_never_undoes_a_priority_set_since(
    make_user, make_order, client_for, fake_provider, burst
):
    owner, order = await triaged_order(make_user, make_order, fake_provider, burst, priority="urgent")
    client = await client_for(owner)
    (suggestion,) = (await client.get(f"/api/v1/work-orders/{order.id}/triage")).json()
    decide = f"/api/v1/work-orders/{order.id}/triage/{suggestion['id']}/decide"
    retitled = await client.patch(f"/api/v1/work-orders/{order.id}", json={"version": 1, "title": "Boiler, floor 2"})
    assert retitled.status_code == 200

    at_an_old_version = await client.post(decide, json={"accept": True, "version": 1})
    set_low = await client.patch(f"/api/v1/work-orders/{order.id}", json={"version": 2, "priority": "low"})
    overtaken = await client.post(decide, json={"accept": True})

    assert (
        at_an_old_version.status_code == 409 and at_an_old_version.json()["error"]["details"]["current"]["version"] == 2
    )
    assert set_low.status_code == 200
    assert overtaken.status_code == 409 and "set to low" in overtaken.json()["error"]["message"]
    current = (await client.get(f"/api/v1/work-orders/{order.id}")).json()
    assert (current["priority"], current["version"]) == ("low", 3)
    dismissed = await client.post(decide, json={"accept": False})
    assert dismissed.status_code == 200 and dismissed.json()["decision"] == "dismissed"  # still open to decide


async def test_the_requester_and_the_owner_may_decide_and_a_viewer_only_reads(
    make_user, make_order, client_for, fake_provider, burst
):
    sam, priya, vic = await make_user(), await make_user(), await make_user("viewer")
    order = await make_order(sam, ownerId=None)  # Sam asks; the queue holds it
    taken = await (await client_for(priya)).patch(
        f"/api/v1/work-orders/{order.id}", json={"version": order.version, "ownerId": priya["id"]}
    )
    assert taken.status_code == 200  # Priya works on it now; Sam is still its requester
    fake_provider.script(proposal("urgent"))
    await burst()
    (suggestion,) = (await (await client_for(sam)).get(f"/api/v1/work-orders/{order.id}/triage")).json()
    decide = f"/api/v1/work-orders/{order.id}/triage/{suggestion['id']}/decide"

    by_viewer = await (await client_for(vic)).post(decide, json={"accept": True})
    by_requester = await (await client_for(sam)).post(decide, json={"accept": False})

    assert by_viewer.status_code == 403
    assert by_requester.status_code == 200 and by_requester.json()["decision"] == "dismissed"


async def test_a_person_who_turned_ai_off_is_shown_no_suggestions_on_their_orders(
    make_user, make_order, client_for, fake_provider, burst
):
    owner, order = await triaged_order(make_user, make_order, fake_provider, burst)
    client = await client_for(owner)
    assert len((await client.get(f"/api/v1/work-orders/{order.id}/triage")).json()) == 1

    assert (await client.patch("/api/v1/auth/me", json={"aiEnabled": False})).status_code == 200

    assert (await client.get(f"/api/v1/work-orders/{order.id}/triage")).json() == []
    admin = await client_for(await make_user("admin"))
    assert len((await admin.get(f"/api/v1/work-orders/{order.id}/triage")).json()) == 1  # the desk keeps it


async def test_someone_else_cannot_see_or_decide_an_orders_suggestions(
    make_user, make_order, client_for, fake_provider, burst
):
    _, order = await triaged_order(make_user, make_order, fake_provider, burst)
    stranger = await client_for(await make_user())

    listed = await stranger.get(f"/api/v1/work-orders/{order.id}/triage")

    assert listed.status_code == 404


async def test_the_attention_list_shows_flagged_suggestions_on_open_orders_only(
    make_user, make_order, client_for, fake_provider, burst
):
    admin = await client_for(await make_user("admin"))
    owner, flagged = await triaged_order(make_user, make_order, fake_provider, burst, flag=True)
    _, _calm = await triaged_order(make_user, make_order, fake_provider, burst, flag=False, priority="low")
    _, closed = await triaged_order(make_user, make_order, fake_provider, burst, flag=True, owner=owner)
    mine = await client_for(owner)
    await mine.patch(f"/api/v1/work-orders/{closed.id}", json={"version": 1, "status": "done"})

    page = (await admin.get(f"{ADMIN}/triage/attention")).json()

    assert [item["order"]["id"] for item in page["items"]] == [flagged.id]
    assert page["total"] == 1


async def test_a_dead_lettered_event_can_be_retried_by_an_admin(
    db, make_user, make_order, client_for, fake_provider, burst
):
    admin = await client_for(await make_user("admin"))
    order = await make_order(await make_user())
    fake_provider.script(*[proposal("none-such")] * 2)  # invalid, and invalid again: given up
    await burst()
    (failed,) = (await admin.get(f"{ADMIN}/triage")).json()["failed"]

    retried = await admin.post(f"{ADMIN}/triage/events/{failed['id']}/retry")
    fake_provider.script(proposal())
    await burst()

    assert retried.json()["status"] == "pending"
    assert (await db["outbox_events"].find_one({"payloadRef": ObjectId(order.id)}))["status"] == "done"
    assert backoff.BASE_SECONDS == 0.0  # retries in these tests are due at once


async def test_with_ai_off_on_the_desk_a_manual_run_says_so(make_user, make_order, client_for):
    admin = await client_for(await make_user("admin"))
    order = await make_order(await make_user())

    response = await admin.post(f"{ADMIN}/triage/run", json={"workOrderId": order.id})

    assert response.status_code == 403
    message = response.json()["error"]["message"]
    assert message == "AI is turned off on this desk: neither the assistant nor the triage agent runs."


async def test_a_suggestion_on_a_closed_order_cannot_be_accepted_and_says_why(
    make_user, make_order, client_for, fake_provider, burst
):
    owner, order = await triaged_order(make_user, make_order, fake_provider, burst, priority="urgent")
    client = await client_for(owner)
    (suggestion,) = (await client.get(f"/api/v1/work-orders/{order.id}/triage")).json()
    decide = f"/api/v1/work-orders/{order.id}/triage/{suggestion['id']}/decide"
    assert (await client.patch(f"/api/v1/work-orders/{order.id}", json={"version": 1, "status": "done"})).is_success

    accepted = await client.post(decide, json={"accept": True})
    dismissed = await client.post(decide, json={"accept": False})

    assert accepted.status_code == 409
    assert accepted.json()["error"]["message"] == (
        "This work order is done: reopen it to accept a suggestion, or dismiss it."
    )
    current = (await client.get(f"/api/v1/work-orders/{order.id}")).json()
    assert (current["priority"], current["status"]) == ("medium", "done")
    assert dismissed.status_code == 200 and dismissed.json()["decision"] == "dismissed"


async def test_working_hours_with_weekdays_days_off_and_apply_when_are_validated_and_audited(
    db, make_user, client_for, triage_settings
):
    admin = await client_for(await make_user("admin"))
    version = (await admin.get(f"{ADMIN}/triage/config")).json()["version"]
    body = {
        "version": version,
        "workingHours": "Mon-Fri 08:00-18:00; Sat 09:00-13:00",
        "daysOff": ["2026-12-25", "2026-12-24", "2026-12-25"],
        "applyWhen": "raise_only",
    }

    changed = await admin.patch(f"{ADMIN}/triage/config", json=body)
    bad_day = await admin.patch(f"{ADMIN}/triage/config", json={"version": version + 1, "daysOff": ["2026-02-30"]})
    bad_days = await admin.patch(f"{ADMIN}/triage/config", json={"version": version + 1, "daysOff": ["Christmas"]})
    bad_hours = await admin.patch(
        f"{ADMIN}/triage/config", json={"version": version + 1, "workingHours": "Weekdays 08:00-18:00"}
    )
    bad_when = await admin.patch(f"{ADMIN}/triage/config", json={"version": version + 1, "applyWhen": "lower_only"})

    assert changed.status_code == 200, changed.text
    saved = changed.json()
    assert (saved["workingHours"], saved["daysOff"], saved["applyWhen"]) == (
        "Mon-Fri 08:00-18:00; Sat 09:00-13:00",
        ["2026-12-24", "2026-12-25"],  # in order, once each
        "raise_only",
    )
    assert [r.status_code for r in (bad_day, bad_days, bad_hours, bad_when)] == [400] * 4
    assert "2026-01-31" in bad_day.json()["error"]["message"]
    assert "Mon-Fri 08:00-18:00" in bad_hours.json()["error"]["message"]
    (entry,) = await db["agent_config_audit"].find({"action": "config_updated"}).to_list()
    assert (entry["before"]["applyWhen"], entry["after"]["applyWhen"]) == ("any", "raise_only")
    assert entry["after"]["daysOff"] == ["2026-12-24", "2026-12-25"]


async def test_a_policy_stored_before_days_off_and_apply_when_reads_with_their_defaults(
    db, make_user, client_for, triage_settings
):
    admin = await client_for(await make_user("admin"))
    await admin.get(f"{ADMIN}/triage/config")
    await db["agent_config"].update_one({"_id": "triage"}, {"$unset": {"daysOff": "", "applyWhen": ""}})

    body = (await admin.get(f"{ADMIN}/triage/config")).json()

    assert (body["daysOff"], body["applyWhen"]) == ([], "any")


async def test_a_manual_run_of_a_closed_order_is_skipped_without_a_model_call(
    make_user, make_order, client_for, fake_provider, triage_settings, provider
):
    admin = await client_for(await make_user("admin"))
    owner = await make_user()
    order = await make_order(owner)
    closed = await (await client_for(owner)).patch(
        f"/api/v1/work-orders/{order.id}", json={"version": 1, "status": "cancelled"}
    )
    assert closed.is_success

    response = await admin.post(f"{ADMIN}/triage/run", json={"workOrderId": order.id})

    assert response.status_code == 200
    body = response.json()
    assert (body["outcome"], body["error"], body["runId"], body["suggestion"]) == (
        "skipped",
        "order_closed",
        None,
        None,
    )
    assert fake_provider.requests == []


async def test_retry_all_puts_every_dead_letter_back_and_says_how_many(
    db, make_user, make_order, client_for, fake_provider, burst
):
    admin_user = await make_user("admin")
    admin = await client_for(admin_user)
    orders = [await make_order(await make_user()) for _ in range(3)]
    fake_provider.script(*[Turn.error(401)] * 3)  # a bad key: each refused, each a dead letter at once
    await burst()
    before = (await admin.get(f"{ADMIN}/triage")).json()

    answer = await admin.post(f"{ADMIN}/triage/events/retry", json={"status": "failed"})
    fake_provider.script(*[proposal() for _ in orders])
    await burst()

    assert before["events"]["failed"] == 3
    assert {event["lastError"] for event in before["failed"]} == {"provider_status 401"}
    assert (answer.status_code, answer.json()) == (200, {"requeued": 3})
    assert await db["outbox_events"].count_documents({"status": "done"}) == 3
    (entry,) = await db["agent_config_audit"].find({"action": "events_retried"}).to_list()
    assert (entry["actorId"], entry["after"]) == (admin_user["id"], {"requeued": 3})
    again = await admin.post(f"{ADMIN}/triage/events/retry", json={"status": "failed"})
    assert again.json() == {"requeued": 0}


async def test_retry_all_takes_only_failed_and_only_from_admins(make_user, client_for):
    admin = await client_for(await make_user("admin"))
    person = await client_for(await make_user())

    wrong = [
        await admin.post(f"{ADMIN}/triage/events/retry", json=body)
        for body in ({"status": "done"}, {}, {"status": "failed", "type": "x"}, [])
    ]
    refused = await person.post(f"{ADMIN}/triage/events/retry", json={"status": "failed"})

    assert {(r.status_code, r.json()["error"]["code"]) for r in wrong} == {(400, "VALIDATION_ERROR")}
    assert (refused.status_code, refused.json()["error"]["code"]) == (403, "FORBIDDEN")


async def test_the_overview_says_whether_the_provider_is_reachable(
    make_user, make_order, client_for, fake_provider, burst, triage_settings
):
    admin = await client_for(await make_user("admin"))
    up = (await admin.get(f"{ADMIN}/triage")).json()["provider"]
    person = await make_user()
    for _ in range(3):
        await make_order(person)
    fake_provider.script(*[Turn.error(503)] * 3)
    one_at_a_time = tuned(triage_settings, agent_concurrency=1)
    for _ in range(3):  # each poll stops at its failure
        await burst(one_at_a_time)

    down = (await admin.get(f"{ADMIN}/triage")).json()["provider"]

    assert up == {"state": "ok", "since": None, "lastError": None}
    assert (down["state"], down["lastError"]) == ("unreachable", "status 503")
    assert down["since"] is not None
