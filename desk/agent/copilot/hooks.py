"""The copilot's listeners on the services' events, subscribed where the app is assembled (desk/app.py `wire`)."""

from desk.agent.copilot import sessions
from desk.bus import Bus
from desk.users.access import AccessLost


async def stop_runs(lost: AccessLost) -> None:
    """A person who lost access (any reason) has their copilot runs stopped and their pending approvals expired."""
    await sessions.abort_runs(db=lost.db, user_id=lost.user_id)


def install(bus: Bus) -> None:
    """Subscribe the copilot's listeners on `bus` (once: subscribing again changes nothing)."""
    bus.subscribe("access", None, stop_runs)
