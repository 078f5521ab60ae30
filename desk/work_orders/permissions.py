"""Who may see and change which work orders: the team model's rules, in one place.

Admins and viewers see every order (viewers only read); people see what they asked for, what they
work on and the queue, and change (edit, delete) what they asked for or work on; anyone who can write
may take a queued order (its owner, nothing else). The service applies these to every read and write;
pages ask them what to offer.
"""

from functools import partial
from typing import Any

from bson import ObjectId

from desk.actors import Actor, Role
from desk.errors import Forbidden, ValidationFailed
from desk.schema import parse_object_id
from desk.work_orders import counters
from desk.work_orders import repository as repo
from desk.work_orders.models import CLOSED, WorkOrderRead


def require_person(actor: Actor) -> None:
    # Defence in depth (spec §4.2): the System Actor reaches only triage_patch.
    if not actor.is_human:
        raise Forbidden("This action is not available to automated agents.")


def sees_all(actor: Actor) -> bool:
    """Admins and viewers see every order (viewers only read)."""
    return actor.is_admin or (actor.is_human and actor.role == Role.VIEWER)


def _mine(actor: Actor, *, requester: str | None, owner: str | None) -> bool:
    return actor.id in (requester, owner)


def visible(actor: Actor, doc: dict[str, Any]) -> bool:
    owner = str(doc["ownerId"]) if doc.get("ownerId") else None
    return sees_all(actor) or owner is None or _mine(actor, requester=_requester(doc), owner=owner)


def person_sees(person: dict[str, Any], doc: dict[str, Any]) -> bool:
    """Whether a stored user may see this order (whom a notification about it may reach)."""
    return visible(Actor(id=str(person["_id"]), role=Role(person["role"])), doc)


def _requester(doc: dict[str, Any]) -> str:
    return str(doc.get("requesterId") or doc["ownerId"])  # an order stored before requesters: its owner asked


def can_change(actor: Actor, order: WorkOrderRead) -> bool:
    """Whether the actor may edit or delete this order: admins all, people what they asked for or work on."""
    return actor.can_write and (actor.is_admin or _mine(actor, requester=order.requester_id, owner=order.owner_id))


def can_take(actor: Actor, order: WorkOrderRead) -> bool:
    """Whether the actor may "assign to me" this order: it is in the queue, and they can work."""
    return actor.can_write and order.owner_id is None


def concerns(actor: Actor, change: dict[str, Any]) -> bool:
    """Whether a change-feed entry may change what this actor's lists show (the queue concerns everyone)."""
    return sees_all(actor) or actor.id in change["owners"] or counters.QUEUE in change["owners"]


def can_release(actor: Actor, order: WorkOrderRead) -> bool:
    """Whether the actor may put this order back in the queue: its owner, or an admin, while it is open."""
    mine = actor.is_admin or order.owner_id == actor.id
    return actor.can_write and order.owner_id is not None and order.status not in CLOSED and mine


def list_scope(actor: Actor) -> str:
    """Actors with the same scope see the same list for the same filters: admins and viewers alike, others alone."""
    return "all" if sees_all(actor) else actor.id


def can_work(person: dict[str, Any]) -> bool:
    """Whether an order can be given to this stored user: active, and not a viewer."""
    return person.get("active", True) and person["role"] != Role.VIEWER


def list_owner(actor: Actor, requested: str | None, *, mine: bool) -> ObjectId | str | None:
    """The owner filter: an id, "none" (the queue) or None (no filter); people list only their own and the queue."""
    if requested is None or requested == counters.QUEUE:
        return None if mine else requested
    if not sees_all(actor) and requested != actor.id:
        raise Forbidden("You can list only your own work orders and the queue.")
    oid = parse_object_id(requested)
    if oid is None:
        raise ValidationFailed("ownerId is not a valid id.", details={"field": "ownerId"})
    return oid


def list_requester(actor: Actor, requested: str | None, *, mine: bool) -> ObjectId | None:
    """The requester filter: admins and viewers name anyone, people (and any `mine` list) themselves."""
    if requested is None:
        return None
    if (mine or not sees_all(actor)) and requested != actor.id:
        raise Forbidden("You can filter only by what you asked for yourself.")
    return ObjectId(requested)


def list_parts(actor: Actor, owner: ObjectId | str | None, *, mine: bool) -> tuple[list[dict[str, Any]], list]:
    """The disjoint parts of the desk a list may show the actor (none: no limit), and the counters whose sum is
    its total."""
    me = actor.id
    if mine and owner is None:
        keys = [partial(counters.total_key, me), partial(counters.handed_key, me), partial(counters.queued_key, me)]
        return repo.requested_or_owned(ObjectId(me)), keys
    if owner is not None or sees_all(actor):  # an owner filter is within a person's scope (checked above)
        return [], [partial(counters.total_key, str(owner) if owner else None)]
    keys = [partial(counters.total_key, me), partial(counters.total_key, counters.QUEUE)]
    keys.append(partial(counters.handed_key, me))
    return repo.seen_by(ObjectId(me)), keys


def check_take(actor: Actor, doc: dict[str, Any], changes: dict[str, Any]) -> None:
    """A take from the queue changes the owner alone, unless the one taking asked for the order or is an admin:
    the rest is theirs to change once the order is theirs, in a request of its own (checked as any edit is)."""
    if not (actor.is_admin or _requester(doc) == actor.id) and set(changes) - {"ownerId"}:
        raise Forbidden("Taking a work order from the queue changes only its owner; change the rest once it is yours.")


def check_writable(actor: Actor, doc: dict[str, Any], *, taking: bool) -> None:
    if not actor.can_write:
        raise Forbidden("Viewers cannot change work orders.")
    owner = str(doc["ownerId"]) if doc.get("ownerId") else None
    if not (actor.is_admin or taking or _mine(actor, requester=_requester(doc), owner=owner)):
        raise Forbidden("Only its requester, its owner or an admin can change this work order (or take it, if queued).")
