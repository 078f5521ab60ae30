"""/app/admin/agents/runs: every agent's runs, filtered and paged; a run's transcript, its view audited."""

from datetime import timedelta

from bson import ObjectId
from nicegui import ui
from nicegui.testing import User

from components.forbidden import MESSAGE as NO_ACCESS
from desk.agent.triage import policy
from desk.agent.triage import service as triage_service
from desk.agent.triage import task as triage_task
from desk.schema import now
from pages import admin_runs
from tests.fake_provider import Turn
from tests.helpers import actor
from tests.triage.conftest import proposal
from tests.ui.conftest import WAIT

PAGE = "/app/admin/agents/runs"
AI = "/api/v1/ai"


async def copilot_run(client_for, person: dict, answer: str) -> None:
    """One real copilot run, asked over the API (the fake provider answers `answer`)."""
    client = await client_for(person)
    session_id = (await client.post(f"{AI}/sessions")).json()["id"]
    async with client.stream("POST", f"{AI}/sessions/{session_id}/messages", json={"content": "Hello"}) as response:
        await response.aread()
    assert response.status_code == 200


def rows(user: User) -> int:
    return len(user.find(marker="run-row").elements)


async def test_only_admins(user: User, make_user, log_in):
    await log_in(user, await make_user("user"), landing=PAGE)
    await user.should_see(NO_ACCESS)
    await user.should_not_see(marker="runs")


async def test_a_desk_with_no_runs_says_so_not_that_filters_found_nothing(user: User, make_user, log_in):
    await log_in(user, await make_user("admin"))
    await user.open("/app/admin/agents/runs")
    await user.should_see("No runs yet.", retries=WAIT)
    await user.should_not_see("No runs match these filters.")


async def test_days_in_the_wrong_order_or_at_the_calendars_end_are_said_so_not_a_failure(user: User, make_user, log_in):
    # found by a UI QA pass: days the wrong way round only said "No runs match"; the last day there is failed
    await log_in(user, await make_user("admin"))

    await user.open(f"{PAGE}?since=2026-12-02&until=2026-12-01")
    await user.should_see("No runs match: pick a start day on or before the end day.", retries=WAIT)

    await user.open(f"{PAGE}?until=9999-12-31")
    await user.should_see("No runs match these filters.", retries=WAIT)


async def test_every_run_listed_and_filtered_by_agent_status_person_and_date(
    user: User, make_user, make_order, log_in, db, ai_settings, provider, fake_provider, client_for
):
    ada, sam = await make_user("admin"), await make_user("user", name="Sam Rivera")
    fake_provider.script(Turn.text("Hi Sam."), Turn.text("Hi Ada."))
    await copilot_run(client_for, sam, "Hi Sam.")
    await copilot_run(client_for, ada, "Hi Ada.")
    await make_order(sam, "Leaking tap")
    fake_provider.script(proposal("high"))
    await triage_task.process_due(db, ai_settings, provider=provider)

    await log_in(user, ada, landing=PAGE)
    await user.should_see(marker="run-row")
    assert rows(user) == 3
    await user.should_see("1–3 of 3 runs")
    await user.should_see("Triage agent")
    await user.should_see("Leaking tap")  # the order a triage run was about, by its title
    (about,) = user.find(marker="run-order").elements
    assert about.text == "Leaking tap" and about.props["href"].startswith("/app/work-orders/")

    user.find(marker="runs-agent").click()
    user.find("Copilot").click()
    await user.should_see("1–2 of 2 runs", retries=WAIT)

    user.find(marker="runs-person").click()
    user.find("Sam Rivera").click()
    await user.should_see("1–1 of 1 runs", retries=WAIT)

    user.find(marker="runs-status").click()
    user.find("Failed").click()
    await user.should_see("No runs match these filters.", retries=WAIT)

    user.find(marker="runs-status").clear()
    user.find(marker="runs-person").clear()
    user.find(marker="runs-agent").clear()
    await user.should_see("1–3 of 3 runs", retries=WAIT)
    tomorrow = (now() + timedelta(days=1)).date().isoformat()
    user.find(marker="runs-since").type(tomorrow)
    await user.should_see("No runs match these filters.", retries=WAIT)


async def test_the_address_keeps_the_filters_and_the_page(
    user: User, make_user, log_in, ai_settings, provider, fake_provider, client_for, monkeypatch
):
    ada, sam = await make_user("admin"), await make_user("user", name="Sam Rivera")
    fake_provider.script(Turn.text("Hi Sam."), Turn.text("Hi Ada."))
    await copilot_run(client_for, sam, "Hi Sam.")
    await copilot_run(client_for, ada, "Hi Ada.")
    today = now().date().isoformat()
    await log_in(user, ada)

    await user.open(f"{PAGE}?agent=copilot&person={sam['id']}&since={today}")  # a link another admin sent

    await user.should_see("1–1 of 1 runs")
    assert user.find(marker="runs-agent").elements.pop().value == "copilot"
    assert user.find(marker="runs-person").elements.pop().value == sam["id"]
    assert user.find(marker="runs-since").elements.pop().value == today
    await user.open(f"{PAGE}?agent=robot&since=someday&page=x")  # what is not understood is left out
    await user.should_see("1–2 of 2 runs")
    monkeypatch.setattr(admin_runs, "PAGE_SIZE", 1)
    await user.open(f"{PAGE}?status=complete&page=7")  # past the end: the last page there is
    await user.should_see("2–2 of 2 runs", retries=WAIT)


async def test_a_runs_detail_shows_its_transcript_literally_and_the_view_is_audited(
    user: User, make_user, make_order, log_in, db, ai_settings, provider, fake_provider
):
    ada, sam = await make_user("admin"), await make_user("user")
    await make_order(sam, "<b>Leak</b>", description='<script>alert("x")</script>')
    payload = '<img src=x onerror="alert(1)"> urgent'
    fake_provider.script(proposal("urgent", summary=payload))
    await triage_task.process_due(db, ai_settings, provider=provider)
    run = await db["agent_runs"].find_one({"agentName": "triage"})

    await log_in(user, ada, landing=PAGE)
    await user.should_see(marker="run-open")
    user.find(marker="run-open").click()

    await user.should_see("Triage agent run")
    await user.should_see("100 tokens in · 10 out", retries=WAIT)
    await user.should_see("triage_propose")
    await user.should_see(marker="tool-outcome", content="OK")
    messages = [label.text for label in user.find(kind=ui.label, marker="message").elements]
    assert any("<<<WORK_ORDER_DATA" in text and "\\u003cb\\u003eLeak" in text for text in messages)
    codes = [label.text for label in user.find(kind=ui.label, marker="tool-json").elements]
    assert any("<img src=x onerror=" in code for code in codes)  # the model's arguments, as code text
    await user.should_not_see(kind=ui.html)
    await user.should_not_see(kind=ui.markdown)

    (entry,) = await db["agent_config_audit"].find({"action": "run_viewed"}).to_list()
    assert (entry["actorId"], entry["after"]) == (ada["id"], {"runId": str(run["_id"])})


async def test_a_copilot_change_shows_its_diff(user: User, make_user, make_order, log_in, db, ai_settings, provider):
    ada = await make_user("admin")
    run_id, call_id = ObjectId(), ObjectId()
    await db["agent_runs"].insert_one(
        {
            "_id": run_id,
            "mode": "interactive",
            "userId": None,
            "agentName": "copilot",
            "status": "complete",
            "model": "m",
            "inputTokens": 5,
            "outputTokens": 2,
            "costUsd": 0.0012,
            "startedAt": now(),
        }
    )
    await db["agent_tool_calls"].insert_one(
        {
            "_id": call_id,
            "runId": run_id,
            "tool": "update_work_order",
            "args": {"id": "x" * 24, "priority": "urgent"},
            "preImage": {"priority": "low", "title": "Tap"},
            "outcome": "ok",
            "createdAt": now(),
        }
    )
    await log_in(user, ada, landing=f"{PAGE}/{run_id}")
    await user.should_see("priority: Low → Urgent", retries=WAIT)
    await user.should_see("5 tokens in · 2 out · $0.0012")


async def test_an_unknown_run_says_so(user: User, make_user, log_in):
    await log_in(user, await make_user("admin"), landing=f"{PAGE}/{'a' * 24}")
    await user.should_see(marker="missing")


async def test_the_switch_off_puts_a_banner_on_the_runs_page(user: User, make_user, log_in, db, ai_settings):
    ada = await make_user("admin")
    await policy.current(db, ai_settings)
    await db["agent_config"].update_one({"_id": "triage"}, {"$set": {"enabled": False}})
    await log_in(user, ada, landing=PAGE)
    await user.should_see(marker="agents-off-banner")
    await user.should_see("The triage agent is turned off. New work orders wait untriaged.")


async def test_the_desk_wide_switch_off_puts_its_own_banner_on_the_runs_page(
    user: User, make_user, log_in, db, ai_settings
):
    ada = await make_user("admin")
    await triage_service.set_ai(db=db, actor=actor(ada), on=False)
    await log_in(user, ada, landing=PAGE)
    await user.should_see(marker="agents-off-banner")
    await user.should_see("AI is turned off on this desk: the triage agent and the assistant do not run.")


async def test_with_ai_off_at_boot_the_runs_page_says_so(user: User, make_user, log_in):
    await log_in(user, await make_user("admin"), landing=PAGE)
    await user.should_see("AI is not enabled on this desk.")


async def test_a_failed_run_says_why_in_words_with_its_code_beneath(
    user: User, make_user, make_order, log_in, db, ai_settings, provider, fake_provider
):
    ada = await make_user("admin")
    await make_order(await make_user(), "Leaking tap")
    fake_provider.script(Turn.error(401))
    await triage_task.process_due(db, ai_settings, provider=provider)

    await log_in(user, ada, landing=PAGE)

    await user.should_see(marker="run-error", retries=WAIT)
    (words,) = user.find(marker="run-error").elements
    (code,) = user.find(marker="run-error-code").elements
    assert (words.text, code.text) == ("the AI provider failed (status 401)", "provider_status 401")
    user.find(marker="run-open").click()
    await user.should_see("Why: the AI provider failed (status 401)", retries=WAIT)
    await user.should_see(marker="run-error-code")


async def test_each_run_shows_what_it_cost_as_the_ledger_counted_it(
    user: User, make_user, log_in, db, ai_settings, provider, fake_provider, client_for
):
    # found when trying it: a run of 110 tokens read $0.0000 while the day's total was right
    ada = await make_user("admin")
    fake_provider.script(Turn.text("Hi Ada."))
    await copilot_run(client_for, ada, "Hi Ada.")
    (spend,) = await db["agent_spend"].find({"_id": {"$regex": "^global:"}}).to_list()
    assert round(spend["spentUsd"], 8) == 0.000021  # 100 tokens in, 10 out at $0.15 and $0.60 a million

    await log_in(user, ada, landing=PAGE)

    await user.should_see("$0.000021", retries=WAIT)
    await user.should_not_see("$0.0000 ")
    user.find(marker="run-open").click()
    await user.should_see("100 tokens in · 10 out · $0.000021", retries=WAIT)
