"""`desk eval triage --structured-output all`: one run per form, their invalid rates side by side."""

import json

import pytest

from desk import cli
from desk.agent.core import switch
from desk.agent.triage.eval import command, runner, runs
from tests.fake_provider import Turn
from tests.triage.eval.hand_set import answer, write_set


def small_model(request) -> Turn:
    """A model that answers a forced tool call with no call at all, but keeps to a response_format schema."""
    if "response_format" in request:
        return answer(request)
    return Turn.text("I think this one is medium.")


async def test_every_form_is_run_and_their_invalid_rates_are_side_by_side(
    db, ai_settings, fake_provider, tmp_path, capsys
):
    fake_provider.respond = small_model
    out = tmp_path / "forms"
    args = cli.parse(["eval", "triage", "--set", str(write_set(tmp_path / "set.jsonl")), "--out", str(out)])
    args.structured_output = command.ALL

    await command.triage(db, ai_settings, args)

    side_by_side = json.loads((out / "forms.json").read_text())
    assert {form: numbers["invalidRate"] for form, numbers in side_by_side.items()} == {
        "tool": 1.0,
        "json_schema": 0.1667,
        "json_object": 0.1667,
    }
    for form in ("tool", "json_schema", "json_object"):
        assert json.loads((out / form / runs.SUMMARY).read_text())["structuredOutput"] == form
    printed = capsys.readouterr().out
    assert "tool               100.0 %     0.0 %" in printed
    assert "json_object         16.7 %    33.3 %" in printed


async def test_it_refuses_while_the_kill_switch_has_ai_off(db, ai_settings, fake_provider, make_user, tmp_path):
    await switch.turn(db, on=False, actor_id=(await make_user("admin"))["id"])
    args = cli.parse(["eval", "triage", "--set", str(write_set(tmp_path / "set.jsonl")), "--out", str(tmp_path / "r")])

    with pytest.raises(runner.EvalStopped, match="AI is turned off for the desk"):
        await command.triage(db, ai_settings, args)

    assert fake_provider.requests == []


async def test_a_form_the_provider_refuses_stops_alone_and_the_others_run(
    db, ai_settings, fake_provider, tmp_path, capsys
):
    # llama-cpp-python's server takes response_format "json_object" but refuses "json_schema" (its 500)
    def server(request):
        if request.get("response_format", {}).get("type") == "json_schema":
            return Turn.error(500)
        return answer(request)

    fake_provider.respond = server
    out = tmp_path / "forms"
    set_path = str(write_set(tmp_path / "set.jsonl"))
    args = cli.parse(["eval", "triage", "--set", set_path, "--out", str(out), "--concurrency", "1"])  # a fails first
    args.structured_output = command.ALL

    with pytest.raises(runner.EvalStopped, match=r"not every form finished \(json_schema\)"):
        await command.triage(db, ai_settings, args)

    side_by_side = json.loads((out / "forms.json").read_text())
    assert side_by_side["tool"]["invalidRate"] == side_by_side["json_object"]["invalidRate"] == 0.1667
    assert "the provider failed on order a (status 500)" in side_by_side["json_schema"]["stopped"]
    assert "json_schema   stopped: the provider failed on order a (status 500)" in capsys.readouterr().out
