"""The tool gate, cell by cell: the triage tool is the System Actor's alone, the copilot's are people's (SEC-6)."""

import pytest

from desk.actors import SYSTEM_TRIAGE, Actor, Role
from desk.agent.copilot.toolset import REGISTRY as COPILOT
from desk.agent.core.tools import Refusal
from desk.agent.triage import prompt
from desk.agent.triage.tool import REGISTRY as TRIAGE

PEOPLE = [Actor(id="p", role=role) for role in Role]
NOT_TRIAGE = Actor(id="system", role=None, kind="system", capability=None)  # a system actor without the capability
REGISTRIES = {"copilot": COPILOT, "triage": TRIAGE}  # each agent gates with its own
COPILOT_TOOLS = [name for name, tool in COPILOT.tools.items() if tool.mode == "copilot"]


def outcome(name: str, mode: str, actor: Actor) -> str:
    gated = REGISTRIES[mode].gate(name, mode=mode, actor=actor, ai_enabled=True)
    return gated.outcome if isinstance(gated, Refusal) else "admitted"


def test_the_system_actor_passes_the_gate_for_the_triage_tool_by_its_capability():
    assert outcome("triage_propose", "triage", SYSTEM_TRIAGE) == "admitted"
    assert [tool.name for tool in TRIAGE.allowed("triage", SYSTEM_TRIAGE)] == ["triage_propose"]


@pytest.mark.parametrize("name", COPILOT_TOOLS)
def test_the_system_actor_never_passes_for_a_copilot_tool(name):
    assert outcome(name, "copilot", SYSTEM_TRIAGE) == "forbidden"
    assert outcome(name, "triage", SYSTEM_TRIAGE) == "unknown_tool"  # not a triage tool: the triage never sees it
    assert COPILOT.allowed("copilot", SYSTEM_TRIAGE) == []


@pytest.mark.parametrize("person", PEOPLE, ids=lambda a: str(a.role))
def test_a_person_never_passes_for_the_triage_tool(person):
    assert outcome("triage_propose", "triage", person) == "forbidden"
    assert outcome("triage_propose", "copilot", person) == "unknown_tool"  # the copilot is never offered it
    assert TRIAGE.allowed("triage", person) == []
    assert "triage_propose" not in [tool.name for tool in COPILOT.allowed("copilot", person)]


def test_a_person_still_passes_for_the_copilot_tools_of_their_role():
    admin, viewer = Actor(id="a", role=Role.ADMIN), Actor(id="v", role=Role.VIEWER)
    admins = [name for name in COPILOT_TOOLS if "admin" in COPILOT.tools[name].roles]
    assert len(admins) == len(COPILOT_TOOLS) - 1  # all but the viewer's own read of every order
    assert {outcome(name, "copilot", admin) for name in admins} == {"admitted"}
    assert outcome("admin_metrics", "copilot", Actor(id="u", role=Role.USER)) == "forbidden"
    assert outcome("list_work_orders", "copilot", viewer) == "admitted"
    assert outcome("list_work_orders", "copilot", Actor(id="u", role=Role.USER)) == "forbidden"


def test_a_system_actor_without_the_triage_capability_passes_for_nothing():
    assert outcome("triage_propose", "triage", NOT_TRIAGE) == "forbidden"
    assert TRIAGE.allowed("triage", NOT_TRIAGE) == COPILOT.allowed("copilot", NOT_TRIAGE) == []


def test_the_triage_prompt_offers_the_registered_tool_itself():
    assert prompt.TOOL is TRIAGE.tools["triage_propose"].schema()  # one definition, the gate's and the model's
