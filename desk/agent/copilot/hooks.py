"""The agent's listeners on the services' events, installed once where the app is assembled."""

from pymongo.asynchronous.database import AsyncDatabase

from desk.agent.copilot import sessions
from desk.users import access


async def stop_runs(*, db: AsyncDatabase, user_id: str, reason: access.Reason) -> None:
    """A person who lost access (any reason) has their copilot runs stopped and their pending approvals expired."""
    await sessions.abort_runs(db=db, user_id=user_id)


def install() -> None:
    """Register the agent's listeners (idempotent): call it where the app is assembled."""
    access.on_access_lost(stop_runs)
