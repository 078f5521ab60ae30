"""/app/admin/agents: the Quality card, the warning before auto-apply, the acceptance by week."""

import json

import pytest
from nicegui import ui
from nicegui.testing import User

from desk.agent.triage.eval import runner, runs
from desk.schema import now
from tests.fake_provider import Turn
from tests.helpers import reconfigure
from tests.triage.eval.hand_set import ORDERS, title_of, write_set
from tests.ui.conftest import WAIT

PAGE = "/app/admin/agents"


@pytest.fixture
def data_settings(ai_settings, tmp_path):
    return reconfigure(ai_settings, desk_data_dir=tmp_path / "data")


def right_every_time(request) -> Turn:
    (priority, flag) = next((p, f) for _, title, p, f in ORDERS if title == title_of(request))
    said = {"summary": "Seen.", "suggestedPriority": priority, "flagForDispatcher": flag}
    return Turn.tool_calls(("triage_propose", json.dumps(said)))


async def an_eval_that_earns_auto_apply(db, settings, fake_provider, tmp_path):
    fake_provider.respond = right_every_time  # 100 % against always-medium's 33.3 %
    plan = runner.plan_for(write_set(tmp_path / "set.jsonl"), limit=None, model=settings.ai_model, form="tool")
    out = runs.new_dir(settings, model=settings.ai_model, when=now())
    await runner.run(db=db, settings=settings, plan=plan, out=out, concurrency=2)
    return out


async def choose_auto_apply_and_save(user: User) -> None:
    user.find(marker="policy-mode").elements.pop().set_value("auto_apply")
    user.find(marker="policy-save").click()


async def test_without_an_eval_auto_apply_is_warned_about_and_a_confirmation_is_audited(
    user: User, make_user, log_in, db, data_settings
):
    ada = await make_user("admin", name="Ada Lovelace")
    await log_in(user, ada, landing=PAGE)
    await user.should_see(marker="quality-none")
    await user.should_see(marker="acceptance-chart")

    await user.should_see(marker="quality-warning", content="No eval of gpt-4o-mini with this prompt exists")
    await choose_auto_apply_and_save(user)
    await user.should_see(marker="confirm-auto-apply")
    await user.should_see("Your confirmation is recorded in the audit.")
    user.find("Cancel").click()
    await user.should_not_see(marker="confirm-auto-apply")
    stored = await db["agent_config"].find_one({"_id": "triage"})
    assert (stored["mode"], stored["version"]) == ("suggest", 1)

    user.find(marker="policy-save").click()
    await user.should_see(marker="confirm-auto-apply")
    user.find(marker="confirm-auto-apply").click()

    await user.should_see("Policy saved.")
    assert (await db["agent_config"].find_one({"_id": "triage"}))["mode"] == "auto_apply"
    (entry,) = await db["agent_config_audit"].find({"action": "auto_apply_unproven"}).to_list()
    assert entry["actorId"] == ada["id"] and entry["after"]["eval"] is None
    assert entry["after"]["warning"].startswith("No eval of gpt-4o-mini")
    await user.should_see("Ada Lovelace confirmed auto-apply without an eval that beats always-medium", retries=WAIT)


async def test_an_eval_that_beats_always_medium_shows_and_lets_auto_apply_through(
    user: User, make_user, log_in, db, data_settings, fake_provider, tmp_path
):
    out = await an_eval_that_earns_auto_apply(db, data_settings, fake_provider, tmp_path)
    await log_in(user, await make_user("admin"), landing=PAGE)

    await user.should_see(marker="quality-accuracy", content="100.0 %")
    await user.should_not_see(marker="quality-warning")
    (link,) = user.find(kind=ui.link, marker="quality-report").elements
    assert link.props["href"] == f"/api/v1/admin/agents/triage/evals/{out.name}/report"

    await choose_auto_apply_and_save(user)

    await user.should_see("Policy saved.")
    await user.should_not_see(marker="confirm-auto-apply")
    assert await db["agent_config_audit"].count_documents({"action": "auto_apply_unproven"}) == 0
