"""One rule for "this person lost some access": the users and auth services fire it, listeners act on it.

The services fire `access_lost` after a logout, a deactivation, a password reset, AI turned off or a
role that can do less; whatever must stop with that access (the copilot's runs, open pages) listens
here, so no route or page can forget it. It goes out on the process Desk's bus (topic "access");
services never import the agent: the copilot's listener is wired where the app is assembled
(desk/app.py `wire`, desk/agent/copilot/hooks.py).
"""

from dataclasses import dataclass
from typing import Literal

from pymongo.asynchronous.database import AsyncDatabase

from desk import state

Reason = Literal["logged_out", "deactivated", "password_reset", "ai_off", "role_reduced"]


@dataclass(frozen=True)
class AccessLost:
    """What the bus carries on "access": who lost access, why, and the database the change was made in."""

    db: AsyncDatabase
    user_id: str
    reason: Reason


async def access_lost(*, db: AsyncDatabase, user_id: str, reason: Reason) -> None:
    """Tell the listeners that `user_id` lost access, and wait until each has acted (in the order they subscribed)."""
    await state.current().bus.publish("access", user_id, AccessLost(db, user_id, reason))


RANK = {"viewer": 0, "user": 1, "admin": 2}


def reduces_access(before: str, after: str) -> bool:
    """Whether going from role `before` to `after` takes some power away."""
    return RANK[after] < RANK[before]
