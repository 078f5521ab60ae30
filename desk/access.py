"""Who may do what beyond a work order's own rules (those are desk/work_orders/permissions.py): one home each.

`can_use_ai` answers "may this person use AI now", `require_admin` "is this an admin". Callers ask
them with the person as stored now (the copilot reads the person again between steps) and the
desk-wide AI switch as read (desk/agent/core/switch.py), and a refusal carries the one message
people read, and the error it is raised as, so no route or page words it again.
Services import this module: it imports neither the agent nor the UI.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from pymongo.asynchronous.database import AsyncDatabase

from desk.actors import Actor
from desk.config import Settings
from desk.errors import AiTurnedOff, DeskError, Forbidden
from desk.users import repository as users_repo

AI_OFF_ON_DESK = "AI is turned off on this desk: neither the assistant nor the triage agent runs."
AI_OFF_FOR_YOU = "AI assistance is off for you. You can turn it on in your profile."
AI_TURNED_OFF = AiTurnedOff.default_message


class Switched(Protocol):
    """A person as a model reads them (UserRead, a page's SessionUser); their `active`, where it has one, counts too."""

    @property
    def ai_enabled(self) -> bool: ...


Person = Switched | Mapping[str, Any]  # or the stored document (camelCase)


class DeskSwitch(Protocol):
    """The desk-wide AI switch as read (desk.agent.core.switch.Switch): off, no agent runs for anyone."""

    @property
    def on(self) -> bool: ...


@dataclass(frozen=True, slots=True)
class Allowed:
    pass


@dataclass(frozen=True, slots=True)
class Denied:
    reason: str  # the one sentence a person reads
    error: type[DeskError] = Forbidden  # what it is raised as (AiTurnedOff: for now, not for you)

    def refusal(self) -> DeskError:
        return self.error(self.reason)


ALLOWED = Allowed()


def can_use_ai(person: Person | None, *, settings: Settings, switch: DeskSwitch) -> Allowed | Denied:
    """Whether `person` may use AI now: the desk has AI and an admin has not turned it off, they are still there
    and active, and their own switch is on."""
    if isinstance(desk := ai_on_desk(settings, switch), Denied):
        return desk
    if person is None or not _active(person) or not allows_ai(person):
        return Denied(AI_OFF_FOR_YOU)
    return ALLOWED


def require_ai(person: Person | None, *, settings: Settings, switch: DeskSwitch) -> None:
    """`can_use_ai`, raised with its reason (Forbidden, or AiTurnedOff while an admin has AI turned off)."""
    if isinstance(decision := can_use_ai(person, settings=settings, switch=switch), Denied):
        raise decision.refusal()


def ai_on_desk(settings: Settings, switch: DeskSwitch | None) -> Allowed | Denied:
    """Whether AI runs on this desk: AI_ENABLED (the hard off, a restart away), then the admins' switch.

    `switch` None: only the environment is asked (what cannot read the database: the provider's dependency).
    """
    if not settings.ai_enabled:
        return Denied(AI_OFF_ON_DESK)
    if switch is not None and not switch.on:
        return Denied(AI_TURNED_OFF, AiTurnedOff)
    return ALLOWED


def require_ai_on_desk(settings: Settings, switch: DeskSwitch | None = None) -> None:
    """`ai_on_desk`, raised (for what runs as the desk, not as a person: the triage agent)."""
    if isinstance(decision := ai_on_desk(settings, switch), Denied):
        raise decision.refusal()


def allows_ai(person: Person) -> bool:
    """The person's own switch (SEC-8): off, nothing of theirs goes to a model. A user is stored with it on."""
    return bool(person.get("aiEnabled", True) if isinstance(person, Mapping) else person.ai_enabled)


async def order_allows_ai(db: AsyncDatabase, order: Mapping[str, Any]) -> bool:
    """SEC-8 for a work order: its requester (whose words go to the model) and its owner, if any, both allow AI.

    An order stored before requesters were kept was asked for by its owner. Someone no longer stored, or
    deactivated, turns nothing off: their orders are still the team's to work on.
    """
    owner = order.get("ownerId")
    people = await users_repo.ai_switches(db, list({order.get("requesterId") or owner, owner} - {None}))  # one read
    return all(allows_ai(person) for person in people)


def require_admin(actor: Actor, to: str) -> None:
    """Forbidden unless `actor` is a person with the admin role; a system actor never is, whatever its role.

    `to` completes the refusal: "Only admins can {to}."
    """
    if not (actor.is_human and actor.is_admin):
        raise Forbidden(f"Only admins can {to}.")


def _active(person: Person) -> bool:
    return bool(person.get("active", True) if isinstance(person, Mapping) else getattr(person, "active", True))
