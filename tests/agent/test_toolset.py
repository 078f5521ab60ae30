"""The copilot's toolset: the guards wrap the tools in a fixed order, and no write runs without approval."""

import pytest
from bson import ObjectId

from desk.actors import Actor, Role
from desk.agent.copilot.toolset import REGISTRY, TOOLSET
from desk.agent.core import pipeline
from desk.agent.core.provider import ToolCallRequest
from desk.agent.core.state import RunState
from desk.agent.core.tools import ToolContext

SAM = Actor(id=str(ObjectId()), role=Role.USER)


def asked(name: str, arguments: str, *, wrote: bool = False) -> pipeline.Asked:
    context = ToolContext(db=None, actor=SAM, run_id="r")  # no guard here reads the database
    return pipeline.Asked(
        ToolCallRequest(id="c1", name=name, arguments=arguments), ObjectId(), SAM, SAM, context, wrote
    )


async def test_a_write_to_an_order_the_run_never_saw_is_blocked_before_anything_else_is_asked():
    order = str(ObjectId())
    answer = await TOOLSET.call(asked("update_work_order", f'{{"id": "{order}", "priority": "high"}}'), RunState())
    assert isinstance(answer, pipeline.ToolAnswer) and answer.outcome == "blocked"


async def test_a_second_write_in_one_step_is_held_back_before_id_pinning():
    order = str(ObjectId())
    call = asked("update_work_order", f'{{"id": "{order}", "priority": "high"}}', wrote=True)
    answer = await TOOLSET.call(call, RunState())
    assert isinstance(answer, pipeline.ToolAnswer) and answer.outcome == "error"
    assert "one change" in answer.result["error"]


async def test_a_write_past_every_guard_comes_back_deferred_for_the_person():
    order = str(ObjectId())
    state = RunState()
    state.seen_ids.add(order)
    state.versions[order] = 3
    answer = await TOOLSET.call(asked("update_work_order", f'{{"id": "{order}", "priority": "high"}}'), state)
    assert isinstance(answer, pipeline.Deferred) and answer.call.args == {"id": order, "priority": "high"}


async def test_a_toolset_without_approval_refuses_to_run_a_write_at_all():
    bare = pipeline.Toolset(REGISTRY, "copilot")
    order = str(ObjectId())
    state = RunState()
    state.seen_ids.add(order)
    with pytest.raises(RuntimeError, match="needs ApprovalRequired"):
        await bare.call(asked("update_work_order", f'{{"id": "{order}", "priority": "high"}}'), state)
