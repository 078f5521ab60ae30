"""The process's one provider client, held by its `Desk` (desk/state.py) beside the database."""

from desk import access, state
from desk.agent.core.provider import Provider


def get_provider() -> Provider:
    """The process's one provider client (built on first use from AI_BASE_URL / AI_API_KEY)."""
    desk = state.current()
    if desk.provider is None:
        access.require_ai_on_desk(desk.settings)  # a dependency runs before the route: AI off reads 403, not 503
        desk.provider = Provider.from_settings(desk.settings)  # one connection pool per process
    return desk.provider


async def provider_dependency() -> Provider:
    return get_provider()  # async: a plain function dependency would run in a worker thread


def use_provider(provider: Provider | None) -> None:
    """Replace the provider (tests point it at the scripted fake)."""
    state.current().provider = provider
