"""The process's one provider client, beside the database's (`desk/db/client.py`): set once, used everywhere."""

from desk.agent.core.provider import Provider
from desk.config import get_settings
from desk.errors import Forbidden

_provider: Provider | None = None
AI_OFF = "AI is turned off on this desk: neither the assistant nor the triage agent runs."


def get_provider() -> Provider:
    """The process's one provider client (built on first use from AI_BASE_URL / AI_API_KEY)."""
    global _provider  # noqa: PLW0603 - one connection pool per process
    if _provider is None:
        settings = get_settings()
        if not settings.ai_enabled:  # a dependency runs before the route: AI off must read 403 here too, not 503
            raise Forbidden(AI_OFF)
        _provider = Provider.from_settings(settings)
    return _provider


async def provider_dependency() -> Provider:
    return get_provider()  # async: a plain function dependency would run in a worker thread


def use_provider(provider: Provider | None) -> None:
    """Replace the provider (tests point it at the scripted fake)."""
    global _provider  # noqa: PLW0603
    _provider = provider
