"""AI_STRUCTURED_OUTPUT: the triage asks for a strict tool or by response_format, and reads either answer."""

import json

import pytest
from bson import ObjectId

from tests.fake_provider import Turn
from tests.helpers import reconfigure
from tests.triage.conftest import proposal

ANSWER = {"summary": "Gas smell in the boiler room.", "suggestedPriority": "urgent", "flagForDispatcher": True}


async def suggestions_of(db, order) -> list[dict]:
    return await db["triage_suggestions"].find({"workOrderId": ObjectId(order.id)}).to_list()


async def test_the_default_forces_the_tool_and_marks_its_function_strict(
    db, make_user, make_order, fake_provider, burst
):
    order = await make_order(await make_user(), "Gas smell", description="Smells of gas near the boiler.")
    fake_provider.script(proposal("urgent", summary=ANSWER["summary"], flag=True))

    await burst()

    (request,) = fake_provider.requests
    (tool,) = request["tools"]
    assert tool["function"]["strict"] is True and tool["function"]["name"] == "triage_propose"
    assert request["tool_choice"] == {"type": "function", "function": {"name": "triage_propose"}}
    assert "response_format" not in request
    assert (await suggestions_of(db, order))[0]["suggestedPriority"] == "urgent"


@pytest.mark.parametrize("form", ["json_schema", "json_object"])
async def test_a_response_format_answer_in_the_text_becomes_the_suggestion(
    db, make_user, make_order, fake_provider, burst, triage_settings, form
):
    settings = reconfigure(triage_settings, ai_structured_output=form)
    order = await make_order(await make_user(), "Gas smell", description="Smells of gas near the boiler.")
    fake_provider.script(Turn.text(json.dumps(ANSWER)))

    await burst(settings)

    (request,) = fake_provider.requests
    assert "tools" not in request and "tool_choice" not in request
    schema = request["response_format"].get("schema") or request["response_format"]["json_schema"]["schema"]
    assert schema["required"] == ["summary", "suggestedPriority", "flagForDispatcher"]
    if form == "json_schema":
        assert request["response_format"]["json_schema"]["strict"] is True
        assert request["response_format"]["json_schema"]["name"] == "triage_propose"
    else:
        assert request["response_format"]["type"] == "json_object"
    (suggestion,) = await suggestions_of(db, order)
    assert (suggestion["suggestedPriority"], suggestion["flagForDispatcher"]) == ("urgent", True)
    assert suggestion["summary"] == ANSWER["summary"]


async def test_text_that_breaks_the_schema_is_invalid_output_as_a_bad_tool_call_is(
    db, make_user, make_order, fake_provider, burst, triage_settings
):
    settings = reconfigure(triage_settings, ai_structured_output="json_object", agent_max_attempts=1)
    order = await make_order(await make_user(), "Gas smell")
    fake_provider.script(Turn.text(json.dumps({**ANSWER, "suggestedPriority": "critical"})))

    await burst(settings)

    assert await suggestions_of(db, order) == []
    run = await db["agent_runs"].find_one({"workOrderId": ObjectId(order.id)})
    assert run["status"] == "error" and run["errorCode"] == "invalid_output"
