"""The triage's quality for admins over HTTP: the last eval of the configured model and prompt, and its report."""

import pytest

from desk.agent.triage.eval import runner, runs
from desk.schema import now
from tests.helpers import reconfigure
from tests.triage.eval.hand_set import answer, write_set


@pytest.fixture
def data_settings(ai_settings, tmp_path):
    """AI on, with a data directory of the test's own (where evals are kept)."""
    return reconfigure(ai_settings, desk_data_dir=tmp_path / "data")


async def an_eval(db, settings, fake_provider, tmp_path, *, model=None, form="tool"):
    """A real eval of the hand set into the data directory, as `desk eval triage` leaves it."""
    fake_provider.respond = answer
    model = model or settings.ai_model
    plan = runner.plan_for(write_set(tmp_path / "set.jsonl"), limit=None, model=model, form=form)
    out = runs.new_dir(settings, model=model, when=now())
    await runner.run(db=db, settings=settings, plan=plan, out=out, concurrency=2)
    return out


async def test_with_no_eval_the_admin_is_told_to_run_one(make_user, client_for, data_settings):
    admin = await client_for(await make_user("admin"))

    found = (await admin.get("/api/v1/admin/agents/triage/quality")).json()

    assert found["model"] == "gpt-4o-mini" and found["promptHash"] == runs.prompt_hash("tool")
    assert found["evalName"] is None and found["reportUrl"] is None
    assert found["autoApplyWarning"].startswith("No eval of gpt-4o-mini with this prompt exists")


async def test_the_last_eval_of_the_configured_model_and_prompt_is_the_one_shown(
    db, make_user, client_for, data_settings, fake_provider, tmp_path
):
    await an_eval(db, data_settings, fake_provider, tmp_path, model="another-model")
    await an_eval(db, data_settings, fake_provider, tmp_path, form="json_object")  # another prompt hash
    ours = await an_eval(db, data_settings, fake_provider, tmp_path)
    admin = await client_for(await make_user("admin"))

    found = (await admin.get("/api/v1/admin/agents/triage/quality")).json()

    assert found["evalName"] == ours.name
    assert found["summary"]["accuracy"] == 0.3333 and found["summary"]["model"] == "gpt-4o-mini"
    # 33.3 % against always-medium's 33.3 %: no lead at all
    assert "right on 33.3 % of orders; always answering medium was right on 33.3 %" in found["autoApplyWarning"]
    page = await admin.get(found["reportUrl"])
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "Triage eval: gpt-4o-mini" in page.text
    assert page.headers["content-security-policy"].startswith("default-src 'none'")


async def test_reports_are_served_to_admins_only(db, make_user, client_for, data_settings, fake_provider, tmp_path):
    out = await an_eval(db, data_settings, fake_provider, tmp_path)
    person, viewer = await client_for(await make_user()), await client_for(await make_user("viewer"))
    admin = await client_for(await make_user("admin"))
    url = f"/api/v1/admin/agents/triage/evals/{out.name}/report"

    refused = [await person.get(url), await viewer.get(url), await person.get("/api/v1/admin/agents/triage/quality")]

    assert [answer.status_code for answer in refused] == [403, 403, 403]
    assert all(answer.json()["error"]["code"] == "FORBIDDEN" for answer in refused)
    assert "Triage eval" not in refused[0].text
    assert (await admin.get(url)).status_code == 200


@pytest.mark.parametrize("name", ["nope", "..%2F..%2Fsecret", "../data", "a/b/c", "."])
async def test_a_name_that_is_no_eval_is_not_found(make_user, client_for, data_settings, tmp_path, name):
    (tmp_path / "data").mkdir(exist_ok=True)
    (tmp_path / "data" / "report.html").write_text("<p>not an eval</p>")
    admin = await client_for(await make_user("admin"))

    found = await admin.get(f"/api/v1/admin/agents/triage/evals/{name}/report")

    assert found.status_code == 404
