"""The copilot's tools (spec §4.2): the one list its gate and its prompt use."""

from desk.agent.copilot import admin_tools, tools
from desk.agent.core.tools import Registry

REGISTRY = Registry(tools.TOOLS + admin_tools.TOOLS)
