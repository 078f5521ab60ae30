"""The agents' tools: the copilot's (spec §4.2) and the triage's one; `REGISTRY` is the one list every gate uses."""

from desk.agent.tools import admin, work_orders
from desk.agent.tools.registry import Registry
from desk.agent.triage import tool as triage

REGISTRY = Registry(work_orders.TOOLS + admin.TOOLS + triage.TOOLS)
