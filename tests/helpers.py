"""Small helpers shared by tests (fixtures live in conftest.py)."""

from desk.actors import Actor, Role

PASSWORD = "correct horse battery staple"


def actor(user: dict) -> Actor:
    """The Actor a service call makes for this test user."""
    return Actor(id=user["id"], role=Role(user["role"]))
