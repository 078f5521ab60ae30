"""The copilot's tools (spec §4.2); `REGISTRY` is the one list the runtime and the gate use."""

from desk.agent.tools import admin, work_orders
from desk.agent.tools.registry import Registry

REGISTRY = Registry(work_orders.TOOLS + admin.TOOLS)
