"""/app/admin/agents: the kill switch, the policy saved at the version read, the audit, the worker, attention."""

import asyncio
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from bson import ObjectId
from nicegui import ui
from nicegui.testing import User
from nicegui.testing.user_notify import UserNotify

from components.forbidden import MESSAGE as NO_ACCESS
from desk.agent.core import budget
from desk.agent.core.breaker import THRESHOLD, Breaker
from desk.agent.triage import policy
from desk.agent.triage import service as triage
from desk.agent.triage import task as triage_task
from desk.agent.triage.models import AgentConfigUpdate
from desk.jobs import backoff, queue
from desk.notifications import mail_queue
from desk.schema import now
from desk.work_orders import service as work_orders
from desk.work_orders.models import WorkOrderUpdate
from tests.fake_provider import Turn
from tests.helpers import actor, error_of, reconfigure, until
from tests.triage.conftest import proposal
from tests.ui.conftest import WAIT

PAGE = "/app/admin/agents"
SETTLE = 1.0  # seconds: a second click that the guard did not stop would have saved (or conflicted) by then


async def config(db) -> dict:
    return await db["agent_config"].find_one({"_id": "triage"})


def label_text(user: User, marker: str) -> str:
    found = user.find(kind=ui.label, marker=marker).elements
    return next(iter(found)).text if len(found) == 1 else ""  # "" while the card is being drawn again


async def test_only_admins_reach_the_page_and_the_nav_leads_there(user: User, make_user, log_in):
    await log_in(user, await make_user("user"), landing=PAGE)
    await user.should_see(NO_ACCESS)
    await user.should_not_see("Triage agent")
    await user.should_not_see("Agents")


async def test_the_kill_switch_asks_before_turning_off_and_says_who_and_when(
    user: User, make_user, log_in, db, ai_settings
):
    dana = await make_user("admin", name="Dana Scully")
    await log_in(user, dana, landing=PAGE)
    await user.should_see(marker="switch-state", content="ON")
    await user.should_not_see(marker="agents-off-banner")

    user.find(marker="switch-button").click()
    await user.should_see("Turn AI off for the whole desk?")
    user.find("Cancel").click()
    await user.should_not_see("Turn AI off for the whole desk?")
    assert await db["agent_config"].count_documents({"_id": "ai_switch"}) == 0

    user.find(marker="switch-button").click()
    await user.should_see(marker="confirm-switch-off")
    user.find(marker="confirm-switch-off").click()
    await user.should_see("AI is turned off for the whole desk.")
    await user.should_see(marker="switch-state", content="OFF")
    await user.should_see(marker="agents-off-banner")
    stored = await db["agent_config"].find_one({"_id": "ai_switch"})
    assert (stored["on"], stored["changedBy"]) == (False, dana["id"])
    at = stored["changedAt"].astimezone(UTC)
    assert label_text(user, "switch-note").startswith(f"Turned off by Dana Scully at {at:%H:%M} UTC.")
    await user.should_see("Dana Scully turned AI off for the whole desk", retries=WAIT)
    assert label_text(user, "last-pass-value") == "off"  # nothing runs: the figure stands still
    assert (await config(db))["version"] == 1  # the policy was not touched

    user.find(marker="switch-button").click()  # turning it on needs no confirmation
    await user.should_see(marker="switch-state", content="ON")
    assert (await db["agent_config"].find_one({"_id": "ai_switch"}))["on"] is True
    await user.should_see("Dana Scully turned AI on again for the desk", retries=WAIT)


async def test_the_switch_turned_off_elsewhere_shows_here_live(user: User, make_user, log_in, db, ai_settings):
    ada, bob = await make_user("admin"), await make_user("admin", name="Bob Builder")
    await log_in(user, ada, landing=PAGE)
    await user.should_see(marker="switch-state", content="ON")

    await triage.set_ai(db=db, actor=actor(bob), on=False)

    await user.should_see(marker="switch-state", content="OFF", retries=WAIT)
    await user.should_see(marker="agents-off-banner")
    assert label_text(user, "switch-note").startswith("Turned off by Bob Builder at ")


async def test_an_open_policy_form_saves_after_the_switch_was_flipped(user: User, make_user, log_in, db, ai_settings):
    await log_in(user, await make_user("admin"), landing=PAGE)
    await user.should_see(marker="policy")

    user.find(marker="switch-button").click()
    await user.should_see(marker="confirm-switch-off")
    user.find(marker="confirm-switch-off").click()
    await user.should_see(marker="switch-state", content="OFF")
    user.find(marker="switch-button").click()
    await user.should_see(marker="switch-state", content="ON")
    user.find(marker="policy-dailyActionCap").clear().type("50")
    user.find(marker="policy-enabled").click()  # the triage agent's own switch, saved with the policy
    user.find(marker="policy-save").click()

    await user.should_see("Policy saved.")
    await user.should_not_see(marker="policy-conflict")
    stored = await config(db)
    assert (stored["dailyActionCap"], stored["enabled"], stored["version"]) == (50, False, 2)
    # held off by its own switch now (the card is drawn again just after the notice)
    await until(lambda: label_text(user, "last-pass-value") == "off", what="the last pass to read off")


async def test_the_time_zone_picker_offers_canonical_names_and_keeps_a_stored_legacy_one(
    user: User, make_user, log_in, db, ai_settings
):
    # found by an admin: W-SU, Zulu and ROC sat among the time zones, names kept only for old settings
    await policy.current(db, ai_settings)
    await db["agent_config"].update_one({"_id": "triage"}, {"$set": {"timeZone": "W-SU"}})  # saved long ago
    await log_in(user, await make_user("admin"), landing=PAGE)
    await user.should_see(marker="policy")

    (zone,) = user.find(marker="policy-timeZone").elements
    assert {"UTC", "Europe/Moscow", "America/New_York"} <= set(zone.options)
    assert not set(zone.options) & {"Zulu", "ROC", "US/Pacific", "Etc/GMT+3", "GB"}
    assert zone.value == "W-SU" and "W-SU" in zone.options  # the stored one still shows
    user.find(marker="policy-dailyActionCap").clear().type("50")
    user.find(marker="policy-save").click()

    await user.should_see("Policy saved.")
    stored = await config(db)
    assert (stored["timeZone"], stored["dailyActionCap"]) == ("W-SU", 50)


async def test_the_policy_is_validated_saved_and_audited(user: User, make_user, log_in, db, ai_settings):
    ada = await make_user("admin", name="Ada Lovelace")
    await log_in(user, ada, landing=PAGE)
    await user.should_see(marker="policy")

    user.find(marker="policy-workingHours").clear().type("9 to 5")
    user.find(marker="policy-save").click()
    await user.should_see('Must be "*" or "HH:MM-HH:MM", after weekdays if need be (Mon-Fri 08:00-18:00).')
    user.find(marker="policy-workingHours").clear().type("25:00-99:99")
    user.find(marker="policy-save").click()
    await user.should_see("Must use times of day, from 00:00 to 23:59.")
    assert (await config(db))["version"] == 1

    user.find(marker="policy-workingHours").clear().type("08:00-18:00")
    user.find(marker="policy-timeZone").click()
    user.find("Europe/Berlin").click()
    user.find(marker="policy-mode").click()
    user.find("Apply the priority automatically").click()
    user.find(marker="policy-save").click()
    await user.should_see(marker="confirm-auto-apply")  # no eval of the model: asked first (test_agents_quality.py)
    user.find(marker="confirm-auto-apply").click()

    await user.should_see("Policy saved.")
    stored = await config(db)
    assert (stored["workingHours"], stored["timeZone"], stored["mode"], stored["version"]) == (
        "08:00-18:00",
        "Europe/Berlin",
        "auto_apply",
        2,
    )
    await user.should_see("Ada Lovelace changed the policy", retries=WAIT)
    await user.should_see("Working hours: * → 08:00-18:00")
    await user.should_see("Mode: Suggest only (people decide) → Apply the priority automatically")


@pytest.mark.parametrize(
    ("typed", "told"),
    [
        ("100001", "May be at most 100000."),
        ("-5", "Must be at least 0."),
        ("12.5", "Must be a whole number."),
        ("", "Enter a number."),  # also what a browser leaves of "abc" in a number field
    ],
)
async def test_a_daily_cap_out_of_bounds_is_refused_in_words_and_left_as_typed(
    typed, told, user: User, make_user, log_in, db, ai_settings
):
    # the field clamped what was typed on its way out (100001 became 100000) and said nothing;
    # an empty one said "must not be null; leave the field out", 12.5 pydantic's "Input should be ..."
    ada = await make_user("admin")
    await log_in(user, ada, landing=PAGE)
    await user.should_see(marker="policy")

    field = user.find(marker="policy-dailyActionCap").clear()
    if typed:
        field.type(typed)
    user.find(marker="policy-save").click()

    await user.should_see(told)
    assert error_of(user, "policy-dailyActionCap") == told
    (cap,) = user.find(marker="policy-dailyActionCap").elements
    assert (cap.props.get("min"), cap.props.get("max")) == (None, None)  # nothing clamps what was typed
    assert (await config(db))["version"] == 1


async def test_a_stale_save_is_refused_and_overwrites_nothing(user: User, make_user, log_in, db, ai_settings):
    ada, bob = await make_user("admin"), await make_user("admin", name="Bob Builder")
    await log_in(user, ada, landing=PAGE)
    await user.should_see(marker="policy")

    # Bob saves first, from his own screen.
    await policy.update_config(
        db=db, settings=ai_settings, actor=actor(bob), data=AgentConfigUpdate(version=1, daily_action_cap=5)
    )
    user.find(marker="policy-dailyActionCap").clear().type("50")
    user.find(marker="policy-save").click()

    await user.should_see(marker="policy-conflict")
    await user.should_see("Someone else changed the triage settings first. Nothing of yours was saved.")
    await user.should_see("They changed Daily action cap: 200 → 5")
    assert ((await config(db))["dailyActionCap"], (await config(db))["version"]) == (5, 2)

    user.find(marker="policy-load-theirs").click()
    await user.should_not_see(marker="policy-conflict")
    user.find(marker="policy-flagThreshold").click()
    user.find("High").click()
    user.find(marker="policy-save").click()
    await user.should_see("Policy saved.")
    stored = await config(db)
    assert (stored["dailyActionCap"], stored["flagThreshold"], stored["version"]) == (5, "high", 3)


async def test_the_worker_health_with_a_failed_event_to_retry(
    user: User, make_user, make_order, log_in, db, ai_settings, provider, fake_provider, monkeypatch
):
    monkeypatch.setattr(backoff, "BASE_SECONDS", 0.0)
    settings = reconfigure(ai_settings, agent_max_attempts=1)
    ada, sam = await make_user("admin"), await make_user("user")
    order = await make_order(sam, "Leaking tap")
    await make_order(sam, "Waiting one")
    await db["outbox_events"].update_one(
        {"payloadRef": {"$ne": ObjectId(order.id)}}, {"$set": {"availableAt": now() + timedelta(hours=1)}}
    )
    fake_provider.script(Turn(status=400, body=b'{"error": {"message": "refused"}}'))  # refused: given up at once
    await triage_task.process_due(db, settings, provider=provider)
    await budget.charge(db, user_id=None, agent="triage", usd=0.5)

    await log_in(user, ada, landing=PAGE)
    await user.should_see(marker="failed-event")
    await user.should_see("Failed events (1)")
    with user.scope(marker="failed-event"):  # which order, and why in words, not the worker's code
        await user.should_see("Leaking tap")
        await user.should_see("1 attempt: the AI provider failed (")
    assert label_text(user, "queue-depth-value") == "1"
    assert label_text(user, "failed-count-value") == "1"
    assert label_text(user, "last-pass-value") == "just now"
    assert label_text(user, "last-pass-note") == "Failed: the AI provider failed (status 400)"  # words, not codes
    (row,) = user.find(marker="spend-triage-agent").elements
    (_, spent) = [child.text for child in row.descendants() if isinstance(child, ui.label)]
    assert spent.startswith("$0.50") and spent.endswith(" of $1.00")  # and the failed call's few tokens

    user.find(marker="retry").click()
    await user.should_see("Back in the queue.")
    await user.should_not_see(marker="failed-event")
    assert (await db["outbox_events"].find_one({"payloadRef": ObjectId(order.id)}))["status"] == "pending"
    await user.should_see("retried a failed event", retries=WAIT)


async def test_an_email_that_failed_is_listed_as_one_and_retry_all_puts_it_back(
    user: User, make_user, make_order, log_in, db, ai_settings
):
    ada, sam = await make_user("admin"), await make_user("user")
    await make_order(sam, "Leaking tap")
    await queue.enqueue(db, mail_queue.TASK, ObjectId())  # a notification's email, the mail server refused for good
    given_up = {"status": "failed", "attempts": 3, "lastError": "mail refused (550)"}
    await db["outbox_events"].update_many({}, {"$set": given_up})

    await log_in(user, ada, landing=PAGE)
    await user.should_see("Failed events (2)")
    await user.should_see("An email notification")
    await user.should_see("3 attempts: mail refused (550)")  # not "a deleted work order" with nothing to retry
    assert len(user.find(marker="retry").elements) == 2

    user.find(marker="retry-all").click()
    await user.should_see("2 failed events back in the queue.")
    assert await db["outbox_events"].count_documents({"type": mail_queue.TASK, "status": "pending"}) == 1


async def test_failed_events_come_a_page_at_a_time_and_retry_all_puts_them_all_back(
    user: User, make_user, make_order, log_in, db, ai_settings
):
    ada, sam = await make_user("admin"), await make_user("user")
    for number in range(23):
        await make_order(sam, f"Leak {number:02d}")
    await db["outbox_events"].update_many({}, {"$set": {"status": "failed", "lastError": "provider_status 401"}})

    await log_in(user, ada, landing=PAGE)
    await user.should_see("Failed events (1–20 of 23, the latest first)")
    assert len(user.find(marker="failed-event").elements) == 20
    user.find(marker="failed-pages").elements.pop().set_value(2)
    await user.should_see("Failed events (21–23 of 23, the latest first)")
    assert len(user.find(marker="failed-event").elements) == 3

    user.find(marker="retry-all").click()
    await user.should_see("23 failed events back in the queue.")
    await user.should_not_see(marker="failed-events")
    assert await db["outbox_events"].count_documents({"status": "pending", "attempts": 0}) == 23
    await user.should_see("retried every failed event", retries=WAIT)


async def test_an_unreachable_provider_is_said_with_since_when_and_why(user: User, make_user, log_in, db, ai_settings):
    breaker = Breaker(ai_settings)
    for _ in range(THRESHOLD):
        await breaker.failed(db, error="status 503")

    await log_in(user, await make_user("admin"), landing=PAGE)
    await user.should_see(marker="provider-unreachable")
    with user.scope(marker="provider-unreachable"):
        await user.should_see("Provider unreachable since")
        await user.should_see("The last failure: status 503.")

    await breaker.answered(db)
    await user.should_not_see(marker="provider-unreachable", retries=WAIT)


async def test_the_attention_list_follows_new_flags_and_links_to_the_order(
    user: User, make_user, make_order, log_in, db, ai_settings, provider, fake_provider
):
    ada, sam = await make_user("admin"), await make_user("user")
    calm = await make_order(sam, "Squeaky door")
    fake_provider.script(proposal("low", summary="Oil the hinge."))
    await triage_task.process_due(db, ai_settings, provider=provider)
    await log_in(user, ada, landing=PAGE)
    await user.should_see("Nothing flagged right now.")

    burst = await make_order(sam, "Burst pipe")
    fake_provider.script(proposal("urgent", summary="Water everywhere in the basement.", flag=True))
    await triage_task.process_due(db, ai_settings, provider=provider)

    await user.should_see("Water everywhere in the basement.", retries=WAIT)  # live, through the change feed
    await user.should_not_see("Oil the hinge.")
    link = user.find(kind=ui.link, content="Burst pipe").elements.pop()
    assert link.props["href"] == f"/app/work-orders/{burst.id}"

    # Closed orders leave the list.
    await work_orders.update(
        db=db, actor=actor(ada), order_id=burst.id, data=WorkOrderUpdate(version=1, status="cancelled")
    )
    await user.should_see("Nothing flagged right now.", retries=WAIT)
    assert calm.id


async def test_with_ai_off_at_boot_the_page_says_so_and_offers_nothing(user: User, make_user, log_in):
    await log_in(user, await make_user("admin"), landing=PAGE)
    await user.should_see("AI is not enabled on this desk.")
    await user.should_not_see(marker="switch-button")
    await user.should_not_see(marker="policy-save")


async def test_the_metrics_page_charts_triage_volume_acceptance_and_spend(
    user: User, make_user, make_order, log_in, db, ai_settings, provider, fake_provider
):
    ada, sam = await make_user("admin"), await make_user("user")
    taken, dropped = await make_order(sam, "Burst pipe"), await make_order(sam, "Squeaky door")
    fake_provider.script(proposal("urgent"), proposal("high"))
    await triage_task.process_due(db, ai_settings, provider=provider)
    for order, accept in ((taken, True), (dropped, False)):
        (suggestion,) = await triage.suggestions(db=db, actor=actor(sam), order_id=order.id)
        await triage.decide(db=db, actor=actor(sam), order_id=order.id, suggestion_id=suggestion.id, accept=accept)
    await budget.charge(db, user_id=None, agent="triage", usd=0.5)

    await log_in(user, ada, landing="/app/admin/metrics")
    await user.should_see(marker="triage-chart", retries=WAIT)
    (chart,) = user.find(kind=ui.echart, marker="triage-chart").elements
    (spend,) = user.find(kind=ui.echart, marker="spend-chart").elements
    # the charts are drawn first and filled by the page's read: wait for the figures, as a person would
    await until(lambda: all(s["data"] for c in (chart, spend) for s in c.options["series"]), what="the charts' data")
    today = {series["name"]: series["data"][-1] for series in chart.options["series"]}
    assert today == {"Suggested": 2, "Accepted": 1, "Dismissed": 1, "Acceptance %": 50}
    spent = {series["name"]: series["data"][-1] for series in spend.options["series"]}
    assert spent["Triage agent"] >= 0.5 and spent["Whole desk"] >= 0.5
    assert set(spent) == {"Triage agent", "Whole desk"}  # copilot turns are billed to people and the desk


async def test_outside_its_working_hours_the_page_says_until_when_triage_waits(
    user: User, make_user, log_in, db, ai_settings
):
    ada = await make_user("admin")
    berlin = ZoneInfo("Europe/Berlin")
    opening = datetime.now(berlin).date() + timedelta(days=2)  # only that weekday: not today, within a week
    await policy.current(db, ai_settings)
    weekday = f"{opening:%a}"
    await db["agent_config"].update_one(
        {"_id": "triage"}, {"$set": {"workingHours": f"{weekday} 08:00-09:00", "timeZone": "Europe/Berlin"}}
    )

    await log_in(user, ada, landing=PAGE)

    await user.should_see(marker="waiting-line", retries=WAIT)
    assert label_text(user, "waiting-line") == f"Outside working hours: waiting until {weekday} 08:00 Europe/Berlin"

    await db["agent_config"].update_one({"_id": "triage"}, {"$set": {"workingHours": "*"}})
    await user.should_not_see(marker="waiting-line", retries=WAIT)  # the page's next look finds it in hours


async def test_days_off_and_apply_when_are_saved_from_the_form_and_audited(
    user: User, make_user, log_in, db, ai_settings
):
    ada = await make_user("admin", name="Ada Lovelace")
    await log_in(user, ada, landing=PAGE)
    await user.should_see(marker="policy")

    user.find(marker="policy-daysOff").clear().type("2026-12-25, 2026-02-30")
    user.find(marker="policy-save").click()
    await user.should_see("Must be a day such as 2026-01-31.")
    assert (await config(db))["version"] == 1

    user.find(marker="policy-daysOff").clear().type("2026-12-25, 2026-12-24")
    user.find(marker="policy-workingHours").clear().type("Mon-Fri 08:00-18:00")
    user.find(marker="policy-applyWhen").click()
    user.find("Only a raise (never lower a priority)").click()
    user.find(marker="policy-save").click()

    await user.should_see("Policy saved.")
    stored = await config(db)
    assert (stored["daysOff"], stored["workingHours"], stored["applyWhen"]) == (
        ["2026-12-24", "2026-12-25"],
        "Mon-Fri 08:00-18:00",
        "raise_only",
    )
    await user.should_see("Days off: none → 2026-12-24, 2026-12-25", retries=WAIT)
    await user.should_see("Apply when: Any change of priority → Only a raise (never lower a priority)")


async def test_spend_today_is_the_day_of_the_policys_time_zone(user: User, make_user, log_in, db, ai_settings):
    await policy.current(db, ai_settings)
    await db["agent_config"].update_one({"_id": "triage"}, {"$set": {"timeZone": "Pacific/Kiritimati"}})

    await log_in(user, await make_user("admin"), landing=PAGE)

    await user.should_see(marker="spend-day", retries=WAIT)
    today = now().astimezone(ZoneInfo("Pacific/Kiritimati"))  # UTC+14: most of the day, not UTC's date
    assert label_text(user, "spend-day") == f"Spend today ({today:%d %b}, Pacific/Kiritimati)"


async def test_the_triage_agent_turned_off_by_another_admin_shows_here_live(
    user: User, make_user, log_in, db, ai_settings
):
    ada, bob = await make_user("admin"), await make_user("admin")
    await log_in(user, ada, landing=PAGE)
    await user.should_see(marker="last-pass")
    await user.should_not_see(marker="policy-off-line")

    data = AgentConfigUpdate(version=1, enabled=False)
    await policy.update_config(db=db, settings=ai_settings, actor=actor(bob), data=data)

    await user.should_see(marker="policy-off-line", retries=WAIT)
    assert label_text(user, "policy-off-line").startswith("The triage agent is turned off in its policy")
    assert label_text(user, "last-pass-value") == "off"  # held off: the figure stands still here too
    # the desk-wide switch, still on, does not say the triage agent runs
    assert label_text(user, "switch-note") == "The triage agent (as its policy says) and the assistant may run."


async def test_with_ai_off_the_page_promises_no_resumption(user: User, make_user, log_in, db, ai_settings):
    """Off desk-wide, nothing resumes when the hours open or the provider answers: the off banner alone says why."""
    elsewhere = (datetime.now(UTC).date() + timedelta(days=2)).strftime("%a")
    await policy.current(db, ai_settings)
    await db["agent_config"].update_one({"_id": "triage"}, {"$set": {"workingHours": f"{elsewhere} 08:00-09:00"}})
    breaker = Breaker(ai_settings)
    for _ in range(THRESHOLD):
        await breaker.failed(db, error="status 503")
    ada = await make_user("admin")
    await log_in(user, ada, landing=PAGE)
    await user.should_see(marker="provider-unreachable", retries=WAIT)
    await user.should_see(marker="waiting-line")

    await triage.set_ai(db=db, actor=actor(ada), on=False)

    await user.should_see(marker="agents-off-banner", retries=WAIT)
    await user.should_not_see(marker="provider-unreachable", retries=WAIT)
    await user.should_not_see(marker="waiting-line")


async def test_the_audit_says_the_switch_in_words_alone(user: User, make_user, log_in, db, ai_settings):
    dana = await make_user("admin", name="Dana Scully")
    await triage.set_ai(db=db, actor=actor(dana), on=False)

    await log_in(user, dana, landing=PAGE)

    await user.should_see("Dana Scully turned AI off for the whole desk", retries=WAIT)
    (row,) = user.find(marker="audit-row").elements
    lines = [child.text for child in row.descendants() if isinstance(child, ui.label)]
    assert lines[1:] == ["Dana Scully turned AI off for the whole desk"]  # no "on: on → off" beneath it


async def test_the_fields_only_auto_apply_reads_say_so_while_people_decide(
    user: User, make_user, log_in, db, ai_settings
):
    await log_in(user, await make_user("admin"), landing=PAGE)
    await user.should_see(marker="policy")
    (apply_when,) = user.find(marker="policy-applyWhen").elements
    (cap,) = user.find(marker="policy-dailyActionCap").elements
    assert apply_when.props["hint"] == cap.props["hint"] == "not used while people decide (suggest only)"

    user.find(marker="policy-mode").elements.pop().set_value("auto_apply")

    assert apply_when.props["hint"] == "which changes the agent makes itself"
    assert cap.props["hint"] == "automatic changes per day"


async def test_the_attention_list_comes_a_page_at_a_time(
    user: User, make_user, make_order, log_in, db, ai_settings, provider, fake_provider
):
    ada, sam = await make_user("admin"), await make_user("user")
    for number in range(27):  # a backlog triaged after an outage flags more than one page holds
        await make_order(sam, f"Flooded room {number:02d}")
    fake_provider.script(*[proposal("urgent", summary="Water coming through.", flag=True) for _ in range(27)])
    await triage_task.process_due(db, ai_settings, provider=provider)

    def titles() -> set[str]:
        return {link.text for link in user.find(kind=ui.link, marker="attention-order").elements}

    await log_in(user, ada, landing=PAGE)
    await user.should_see(marker="attention-row")
    first = titles()
    assert len(first) == 25
    user.find(marker="attention-pages").elements.pop().set_value(2)

    await until(lambda: len(titles()) == 2, what="the second page of the attention list")
    assert first | titles() == {f"Flooded room {number:02d}" for number in range(27)}  # every flagged order


async def test_a_double_click_on_the_switch_asks_once(user: User, make_user, log_in, db, ai_settings):
    await log_in(user, await make_user("admin"), landing=PAGE)
    await user.should_see(marker="switch-state", content="ON")

    button = user.find(marker="switch-button")
    button.click()
    button.click()  # the second click of a double-click, while the first one's question is open

    await user.should_see(marker="confirm-switch-off")
    assert len(user.find(marker="confirm-switch-off").elements) == 1  # one question, none left behind
    user.find(marker="confirm-switch-off").click()
    await user.should_see(marker="switch-state", content="OFF")
    await user.should_not_see("Turn AI off for the whole desk?")


async def test_a_double_click_on_save_policy_saves_once_with_no_conflict(
    user: User, make_user, log_in, db, ai_settings
):
    await log_in(user, await make_user("admin"), landing=PAGE)
    await user.should_see(marker="policy")
    user.find(marker="policy-dailyActionCap").clear().type("40")

    save = user.find(marker="policy-save")
    save.click()
    save.click()  # the second click of a double-click, before the first has saved

    await user.should_see("Policy saved.")
    await asyncio.sleep(SETTLE)  # time for a second save to meet the version the first moved on, had it been sent
    await user.should_not_see(marker="policy-conflict")
    assert ((await config(db))["dailyActionCap"], (await config(db))["version"]) == (40, 2)


async def test_a_double_click_on_retry_puts_the_event_back_once_without_a_false_error(
    user: User, make_user, make_order, log_in, db, ai_settings
):
    ada, sam = await make_user("admin"), await make_user("user")
    await make_order(sam, "Leaking tap")
    await db["outbox_events"].update_many({}, {"$set": {"status": "failed", "lastError": "provider_status 401"}})
    await log_in(user, ada, landing=PAGE)
    await user.should_see(marker="failed-event")

    retry = user.find(marker="retry")
    retry.click()
    retry.click()  # the second click of a double-click, before the first has saved

    await user.should_see("Back in the queue.", kind=UserNotify, retries=WAIT)
    await asyncio.sleep(SETTLE)  # time for a second retry to be refused, had the second click been taken
    assert user.notify.messages == ["Back in the queue."]  # no "No such failed event." for their own click


@pytest.mark.parametrize(
    ("outcome", "words"),
    [
        ("duplicate", "outcome: Another pass had already triaged it"),
        ("lease_lost", "outcome: Another worker took it over"),
        ("lost", "outcome: Another pass had it"),  # stored before the two were told apart: still read
    ],
)
async def test_a_manual_runs_audit_says_how_it_ended_in_words(
    user: User, make_user, log_in, db, ai_settings, outcome, words
):
    dana = await make_user("admin", name="Dana Scully")
    after = {"workOrderId": "6578a0000000000000000001", "outcome": outcome}
    await policy.record(db, agent=policy.AGENT, actor_id=dana["id"], action="manual_run", after=after)

    await log_in(user, dana, landing=PAGE)

    await user.should_see(words, retries=WAIT)


async def test_an_order_the_provider_kept_failing_on_says_so_counting_every_try(
    user: User, make_user, make_order, log_in, db, ai_settings
):
    await make_order(await make_user(), "Leak in the attic")
    given_up = {"status": "failed", "attempts": 1, "strikes": 2, "lastError": "provider_fails_on_order"}
    await db["outbox_events"].update_many({}, {"$set": given_up})  # as the worker leaves it (tests/triage)

    await log_in(user, await make_user("admin"), landing=PAGE)

    await user.should_see(marker="failed-event")
    with user.scope(marker="failed-event"):
        await user.should_see("3 attempts: the AI provider failed on this order every time, while answering others")
