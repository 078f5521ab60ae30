"""The agents' run store: one module per collection, each the only code touching its collection.

`agent_runs`, `agent_messages`, `agent_tool_calls`, `copilot_sessions`, `agent_idempotency`; `keep` says
how long each is kept.
"""

from pymongo.asynchronous.database import AsyncDatabase

from desk.agent.core.store import agent_idempotency, agent_messages, agent_runs, agent_tool_calls, copilot_sessions


async def ensure_indexes(db: AsyncDatabase) -> None:
    for collection in (copilot_sessions, agent_runs, agent_messages, agent_tool_calls, agent_idempotency):
        await collection.ensure_indexes(db)
