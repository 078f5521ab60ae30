"""`desk eval triage` against the scripted fake: its results, its summary, its bill, its refusals, its resume."""

import json

import httpx
import pytest

from desk.agent.core import budget
from desk.agent.triage.eval import labels, runner, runs
from tests.fake_provider import Turn
from tests.helpers import reconfigure
from tests.triage.eval.hand_set import ORDERS, answer, title_of, write_set

RESULT_FIELDS = {"id", "expected", "predicted", "valid", "latencyMs", "inputTokens", "outputTokens", "costUsd"}
PER_CALL = 0.000021  # (100 input, 10 output) tokens at 0.15 and 0.60 USD per million


async def evaluate(db, settings, tmp_path, *, form="tool", out=None, concurrency=2, plan=None, limit=None):
    plan = plan or runner.plan_for(write_set(tmp_path / "set.jsonl"), limit=limit, model="m-1", form=form)
    return await runner.run(db=db, settings=settings, plan=plan, out=out or tmp_path / "run", concurrency=concurrency)


def read_results(out) -> list[dict]:
    return [json.loads(line) for line in (out / runs.RESULTS).read_text().splitlines()]


async def test_a_run_writes_each_result_and_a_summary_with_the_hand_worked_numbers(
    db, ai_settings, fake_provider, tmp_path
):
    fake_provider.respond = answer

    summary = await evaluate(db, ai_settings, tmp_path)

    results = {result["id"]: result for result in read_results(tmp_path / "run")}
    assert set(results) == {"a", "b", "c", "d", "e", "f"}
    assert all(set(result) == RESULT_FIELDS for result in results.values())
    assert results["d"]["predicted"] is None and results["d"]["valid"] is False
    assert results["e"] == results["e"] | {
        "expected": {"priority": "high", "flag": True},
        "predicted": {"priority": "urgent", "flag": True},
        "valid": True,
        "inputTokens": 100,
        "outputTokens": 10,
        "costUsd": PER_CALL,
    }
    assert {key: summary[key] for key in ("items", "valid", "accuracy", "macroF1", "withinOne", "invalidRate")} == {
        "items": 6,
        "valid": 5,
        "accuracy": 0.3333,
        "macroF1": 0.2917,
        "withinOne": 0.8333,
        "invalidRate": 0.1667,
    }
    assert (summary["flagPrecision"], summary["flagRecall"], summary["flagF1"]) == (0.6667, 1.0, 0.8)
    assert summary["costUsd"] == pytest.approx(6 * PER_CALL)
    assert summary["model"] == "m-1" and summary["promptHash"] == runs.prompt_hash("tool")
    assert summary["baselines"]["alwaysMedium"]["accuracy"] == 0.3333
    assert summary["baselines"]["keywordRule"]["accuracy"] == 0.8333
    assert {"latencyP50Ms", "latencyP95Ms"} <= set(summary)
    assert json.loads((tmp_path / "run" / runs.SUMMARY).read_text()) == summary
    assert {request["model"] for request in fake_provider.requests} == {"m-1"}  # --model, not AI_MODEL


async def test_it_is_billed_to_its_own_scope_under_the_global_cap(db, ai_settings, fake_provider, tmp_path):
    fake_provider.respond = answer

    await evaluate(db, ai_settings, tmp_path)

    eval_key, global_key = budget.keys(user_id=None, agent="eval")
    assert await budget.spent(db, eval_key) == pytest.approx(6 * PER_CALL)
    assert await budget.spent(db, global_key) == pytest.approx(6 * PER_CALL)
    assert await budget.spent(db, budget.keys(user_id=None, agent="triage")[0]) == 0.0


async def test_it_refuses_to_start_when_the_run_could_pass_the_global_cap(db, ai_settings, fake_provider, tmp_path):
    settings = reconfigure(ai_settings, ai_global_daily_spend_usd=0.05)
    await budget.charge(db, user_id="someone", agent="copilot", usd=0.049)  # the desk's day so far

    with pytest.raises(runner.EvalStopped, match=r"passes AI_GLOBAL_DAILY_SPEND_USD \(\$0\.05\)"):
        await evaluate(db, settings, tmp_path)

    assert fake_provider.requests == []
    assert await budget.spent(db, budget.keys(user_id=None, agent="eval")[0]) == 0.0


async def test_a_bad_set_stops_it_before_any_call(db, ai_settings, fake_provider, tmp_path):
    bad = tmp_path / "bad.jsonl"
    lines = write_set(tmp_path / "set.jsonl").read_text().splitlines()
    lines[3] = lines[3].replace('"low"', '"lowest"')
    bad.write_text("\n".join(lines) + "\n")

    with pytest.raises(labels.BadSet, match=r"line 4: priority"):
        await evaluate(db, ai_settings, tmp_path, plan=runner.plan_for(bad, limit=None, model="m", form="tool"))

    assert fake_provider.requests == []


async def test_a_stopped_run_resumes_where_it_was_asking_only_what_is_left(db, ai_settings, fake_provider, tmp_path):
    asked_first: list[str] = []

    def fails_on_the_fourth(request):
        asked_first.append(title_of(request))
        return Turn.error(503) if len(asked_first) == 4 else answer(request)

    fake_provider.respond = fails_on_the_fourth
    out = tmp_path / "run"
    with pytest.raises(runner.EvalStopped, match=rf"provider failed on order d .*--resume {out}"):
        await evaluate(db, ai_settings, tmp_path, concurrency=1)
    assert [result["id"] for result in read_results(out)] == ["a", "b", "c"]
    with (out / runs.RESULTS).open("a") as results:
        results.write('{"id": "d", "expec')  # a line a kill cut short
    assert not (out / runs.SUMMARY).exists()

    fake_provider.reset()
    fake_provider.respond = answer
    summary = await evaluate(db, ai_settings, tmp_path, plan=runner.resumed(out))

    assert sorted(title_of(request) for request in fake_provider.requests) == sorted(
        title for _, title, *_ in ORDERS[3:]
    )
    assert sorted(result["id"] for result in read_results(out)) == ["a", "b", "c", "d", "e", "f"]
    assert (summary["items"], summary["accuracy"]) == (6, 0.3333)


@pytest.mark.parametrize("form", ["json_schema", "json_object"])
async def test_each_structured_output_form_is_scored_the_same_way(db, ai_settings, fake_provider, tmp_path, form):
    fake_provider.respond = answer

    summary = await evaluate(db, ai_settings, tmp_path, form=form)

    assert all("response_format" in request and "tools" not in request for request in fake_provider.requests)
    assert (summary["accuracy"], summary["invalidRate"], summary["structuredOutput"]) == (0.3333, 0.1667, form)
    assert summary["promptHash"] == runs.prompt_hash(form) != runs.prompt_hash("tool")


async def test_metrics_show_the_evals_spend_beside_the_triages(app, db, ai_settings, fake_provider, tmp_path):
    fake_provider.respond = answer
    await evaluate(db, ai_settings, tmp_path)

    async with httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://desk.test") as client:
        text = (await client.get("/metrics")).text

    (spent,) = [line for line in text.splitlines() if line.startswith('desk_ai_spend_usd{scope="agent:eval"}')]
    assert float(spent.split()[-1]) == pytest.approx(6 * PER_CALL)
    assert 'desk_ai_spend_cap_usd{scope="agent:eval"} 1.0' in text
