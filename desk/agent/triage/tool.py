"""The triage agent's one tool, `triage_propose`, in its own registry (mode "triage", the System Actor's only).

The tool changes nothing by itself: its validated arguments are the proposal, which the pass stores
as a suggestion and applies, if the policy says so, only through `work_orders.triage_door.triage_patch`.
"""

from desk.agent.core.tools import Registry, Tool, ToolContext, ToolOutput
from desk.agent.triage.models import TriageProposal

NAME = "triage_propose"
NO_ROLE = frozenset[str]()  # no person may call it: the gate admits the System Actor by its capability


async def propose(_: ToolContext, args: TriageProposal) -> ToolOutput:
    """The proposal, as it will be stored."""
    return ToolOutput(args.model_dump())


TRIAGE_PROPOSE = Tool(
    NAME,
    "Propose a summary, a priority and whether a dispatcher should look at this work order.",
    TriageProposal,
    "read",  # no write of its own: the pass's suggestion and triage_patch are the writes, under the policy
    NO_ROLE,
    "triage",
    propose,
    lambda _: "Proposed a triage",
)
TOOLS = [TRIAGE_PROPOSE]
REGISTRY = Registry(TOOLS)  # the triage's gate: no copilot tool is known to it
