"""Who may do what beyond a work order's own rules (those are desk/work_orders/permissions.py): one home each.

`can_use_ai` answers "may this person use AI now", `require_admin` "is this an admin". Callers ask
them with the person as stored now (the copilot reads the person again between steps), and a
refusal carries the one message people read, so no route or page words it again.
Services import this module: it imports neither the agent nor the UI.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from pymongo.asynchronous.database import AsyncDatabase

from desk.actors import Actor
from desk.config import Settings
from desk.errors import Forbidden
from desk.users import repository as users_repo

AI_OFF_ON_DESK = "AI is turned off on this desk: neither the assistant nor the triage agent runs."
AI_OFF_FOR_YOU = "AI assistance is off for you. You can turn it on in your profile."


class Switched(Protocol):
    """A person as a model reads them (UserRead, a page's SessionUser); their `active`, where it has one, counts too."""

    @property
    def ai_enabled(self) -> bool: ...


Person = Switched | Mapping[str, Any]  # or the stored document (camelCase)


@dataclass(frozen=True, slots=True)
class Allowed:
    pass


@dataclass(frozen=True, slots=True)
class Denied:
    reason: str  # the one sentence a person reads


ALLOWED = Allowed()


def can_use_ai(person: Person | None, *, settings: Settings) -> Allowed | Denied:
    """Whether `person` may use AI now: the desk has AI, they are still there and active, and their switch is on."""
    if not settings.ai_enabled:
        return Denied(AI_OFF_ON_DESK)
    if person is None or not _active(person) or not allows_ai(person):
        return Denied(AI_OFF_FOR_YOU)
    return ALLOWED


def require_ai(person: Person | None, *, settings: Settings) -> None:
    """`can_use_ai`, raised as Forbidden with its reason."""
    if isinstance(decision := can_use_ai(person, settings=settings), Denied):
        raise Forbidden(decision.reason)


def require_ai_on_desk(settings: Settings) -> None:
    """Forbidden when the desk has no AI at all (for what runs as the desk, not as a person: the triage agent)."""
    if not settings.ai_enabled:
        raise Forbidden(AI_OFF_ON_DESK)


def allows_ai(person: Person) -> bool:
    """The person's own switch (SEC-8): off, nothing of theirs goes to a model. A user is stored with it on."""
    return bool(person.get("aiEnabled", True) if isinstance(person, Mapping) else person.ai_enabled)


async def order_allows_ai(db: AsyncDatabase, order: Mapping[str, Any]) -> bool:
    """SEC-8 for a work order: its requester (whose words go to the model) and its owner, if any, both allow AI.

    An order stored before requesters were kept was asked for by its owner. Someone no longer stored, or
    deactivated, turns nothing off: their orders are still the team's to work on.
    """
    owner = order.get("ownerId")
    for person_id in {order.get("requesterId") or owner, owner} - {None}:
        person = await users_repo.get(db, person_id)
        if person is not None and not allows_ai(person):
            return False
    return True


def require_admin(actor: Actor, to: str) -> None:
    """Forbidden unless `actor` is a person with the admin role; a system actor never is, whatever its role.

    `to` completes the refusal: "Only admins can {to}."
    """
    if not (actor.is_human and actor.is_admin):
        raise Forbidden(f"Only admins can {to}.")


def _active(person: Person) -> bool:
    return bool(person.get("active", True) if isinstance(person, Mapping) else getattr(person, "active", True))
