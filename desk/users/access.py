"""One rule for "this person lost some access": the users and auth services fire it, listeners act on it.

The services fire `access_lost` after a logout, a deactivation, a password reset, AI turned off or a
role that can do less; whatever must stop with that access (the copilot's runs, open pages) listens
here, so no route or page can forget it. Services never import the agent: the agent registers its
listener at app assembly (desk/agent/copilot/hooks.py).
"""

from collections.abc import Awaitable
from typing import Literal, Protocol

from pymongo.asynchronous.database import AsyncDatabase

Reason = Literal["logged_out", "deactivated", "password_reset", "ai_off", "role_reduced"]


class Listener(Protocol):
    def __call__(self, *, db: AsyncDatabase, user_id: str, reason: Reason) -> Awaitable[None]: ...


_listeners: list[Listener] = []


def on_access_lost(listener: Listener) -> None:
    """Call `listener` each time a person loses access (registering the same listener twice is a no-op)."""
    if listener not in _listeners:
        _listeners.append(listener)


async def access_lost(*, db: AsyncDatabase, user_id: str, reason: Reason) -> None:
    """Tell every listener that `user_id` lost access, in the order they registered."""
    for listener in list(_listeners):
        await listener(db=db, user_id=user_id, reason=reason)


RANK = {"viewer": 0, "user": 1, "admin": 2}


def reduces_access(before: str, after: str) -> bool:
    """Whether going from role `before` to `after` takes some power away."""
    return RANK[after] < RANK[before]
