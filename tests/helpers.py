"""Small helpers shared by tests (fixtures live in conftest.py)."""

from desk.actors import Actor, Role
from desk.config import Settings

PASSWORD = "correct horse battery staple"


def actor(user: dict) -> Actor:
    """The Actor a service call makes for this test user."""
    return Actor(id=user["id"], role=Role(user["role"]))


def tuned(base: Settings, **changes: object) -> Settings:
    """The AI settings with some values changed, built anew so every field is validated."""
    return Settings(**{**{name: getattr(base, name) for name in Settings.model_fields}, **changes})
