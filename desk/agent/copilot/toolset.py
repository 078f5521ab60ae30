"""The copilot's tools (spec §4.2): the one list its gate and its prompt use, and the toolset its loop calls."""

from desk.agent.copilot import admin_tools, tools
from desk.agent.core.pipeline import guarded_toolset
from desk.agent.core.tools import Registry

REGISTRY = Registry(tools.TOOLS + admin_tools.TOOLS)
TOOLSET = guarded_toolset(REGISTRY, "copilot")  # every write guarded, then put before the person
