"""Work-order rules: who may see and change what, optimistic versions, and the activity timeline."""

import logging
from typing import Any, NamedTuple

from bson import ObjectId
from pymongo.asynchronous.database import AsyncDatabase

from desk.actors import Actor, Role
from desk.errors import Conflict, DeskError, Forbidden, NotFound, NothingToChange, ValidationFailed
from desk.schema import MAX_LIMIT, OffsetPage, now, parse_object_id
from desk.users import repository as users_repo
from desk.work_orders import counters
from desk.work_orders import repository as repo
from desk.work_orders.models import (
    CLOSED,
    EDITABLE,
    PRIORITIES,
    ActivityRead,
    WorkOrderCreate,
    WorkOrderQuery,
    WorkOrderRead,
    WorkOrderUpdate,
)

TRACKED = (*EDITABLE, "ownerId")


def _require_person(actor: Actor) -> None:
    # Defence in depth (spec §4.2): the System Actor reaches only triage_patch.
    if not actor.is_human:
        raise Forbidden("This action is not available to automated agents.")


def _visible(actor: Actor, doc: dict[str, Any]) -> bool:
    return actor.is_admin or str(doc["ownerId"]) == actor.id


def list_scope(actor: Actor) -> str:
    """Actors with the same scope see the same list for the same filters: every admin alike, anyone else alone."""
    return "all" if actor.is_admin else actor.id


def can_work(person: dict[str, Any]) -> bool:
    """Whether an order can be given to this stored user: active, and not a viewer."""
    return person.get("active", True) and person["role"] != Role.VIEWER


async def owner_choices(*, db: AsyncDatabase, actor: Actor) -> tuple[dict[str, str], dict[str, str]]:
    """For an admin, names by id of everyone to filter by, and of those an order can be given to; else nothing.

    (The first MAX_LIMIT people, newest first, are plenty for one desk.)
    """
    if not actor.is_admin:
        return {}, {}
    people = await users_repo.page(db, offset=0, limit=MAX_LIMIT)
    return {str(p["_id"]): p["name"] for p in people}, {str(p["_id"]): p["name"] for p in people if can_work(p)}


async def _owner_id(db: AsyncDatabase, actor: Actor, requested: str | None) -> ObjectId:
    """The owner a write may set: yourself, or, when you are an admin, anyone who can work on orders."""
    if requested is None or requested == actor.id:
        return ObjectId(actor.id)
    if not actor.is_admin:
        raise Forbidden("Only admins can give a work order to someone else.")
    oid = parse_object_id(requested)
    owner = await users_repo.get(db, oid) if oid else None
    # A well-formed id is a valid request (400 is for those the schema refuses): what it names decides the rest.
    if owner is None:
        raise NotFound("The owner does not exist.", details={"field": "ownerId"})
    if not can_work(owner):  # say which rule it breaks
        problem = "is deactivated" if not owner.get("active", True) else "is a viewer and cannot work on orders"
        raise Conflict(f"{owner['name']} {problem}.", details={"field": "ownerId"})
    return owner["_id"]


async def create(*, db: AsyncDatabase, actor: Actor, data: WorkOrderCreate, run_id: str | None = None) -> WorkOrderRead:
    """A new pending work order owned by the actor (admins may name another owner)."""
    _require_person(actor)
    if not actor.can_write:
        raise Forbidden("Viewers cannot create work orders.")
    moment = now()
    doc = await repo.insert(
        db,
        {
            "title": data.title,
            "description": data.description,
            "priority": data.priority,
            "status": "pending",
            "ownerId": await _owner_id(db, actor, data.owner_id),
            "version": 1,
            "createdAt": moment,
            "updatedAt": moment,
            "closedAt": None,
        },
    )
    await _record(db, actor, doc["_id"], "created", before=None, after=_tracked(doc), run_id=run_id)
    return WorkOrderRead.model_validate(doc)


async def get(*, db: AsyncDatabase, actor: Actor, order_id: str) -> WorkOrderRead | None:
    """The work order if the actor may see it, else None (someone else's looks like a missing one)."""
    doc = await _get_visible(db, actor, order_id)
    return WorkOrderRead.model_validate(doc) if doc else None


async def get_or_raise(*, db: AsyncDatabase, actor: Actor, order_id: str) -> WorkOrderRead:
    """Like get, NotFound when it is missing or not the actor's to see."""
    order = await get(db=db, actor=actor, order_id=order_id)
    if order is None:
        raise NotFound("No such work order.")
    return order


async def _get_visible(db: AsyncDatabase, actor: Actor, order_id: str) -> dict[str, Any] | None:
    _require_person(actor)
    oid = parse_object_id(order_id)
    doc = await repo.get(db, oid) if oid else None
    return doc if doc and _visible(actor, doc) else None


async def list_orders(*, db: AsyncDatabase, actor: Actor, query: WorkOrderQuery) -> OffsetPage[WorkOrderRead]:
    """A page of the work orders the actor may see; admins see all, everyone else their own."""
    _require_person(actor)
    owner = await _list_owner(actor, query.owner_id)
    filter_ = repo.filters(owner_id=owner, status=query.status, priority=query.priority)
    if query.q:
        docs, total, exact = await repo.search_page(
            db, query.q, filter_, sort=query.sort, offset=query.offset, limit=query.limit
        )
    else:
        docs = await repo.page(db, filter_, sort=query.sort, offset=query.offset, limit=query.limit)
        key = counters.total_key(str(owner) if owner else None, query.status, query.priority)
        total, exact = (await counters.read(db, [key]))[key], True
    items = [WorkOrderRead.model_validate(doc) for doc in docs]
    return OffsetPage[WorkOrderRead](
        items=items, total=total, offset=query.offset, limit=query.limit, total_exact=exact
    )


async def _list_owner(actor: Actor, requested: str | None) -> ObjectId | None:
    if not actor.is_admin:
        if requested not in (None, actor.id):
            raise Forbidden("You can only list your own work orders.")
        return ObjectId(actor.id)
    if requested is None:
        return None
    oid = parse_object_id(requested)
    if oid is None:
        raise ValidationFailed("ownerId is not a valid id.", details={"field": "ownerId"})
    return oid


async def update(
    *, db: AsyncDatabase, actor: Actor, order_id: str, data: WorkOrderUpdate, run_id: str | None = None
) -> WorkOrderRead:
    """Change fields at the version the person saw; Conflict (and nothing written) when it moved on."""
    before = await _get_writable(db, actor, order_id)
    fields = data.changes()
    if not fields:
        raise NothingToChange()
    if "ownerId" in fields:  # only a new owner is checked: someone deactivated since keeps their orders
        same = data.owner_id == str(before["ownerId"])
        fields["ownerId"] = before["ownerId"] if same else await _owner_id(db, actor, data.owner_id)
    _check_version(before, data.version)
    fields = {key: value for key, value in fields.items() if before.get(key) != value}
    if not fields:
        return WorkOrderRead.model_validate(before)
    if "status" in fields:
        fields["closedAt"] = now() if fields["status"] in CLOSED else None
    after = await repo.update(db, before, fields, at=now())
    if after is None:
        raise await _lost_race(db, before["_id"])
    old, new = _tracked(before), _tracked(after)
    changed = [key for key in TRACKED if old[key] != new[key]]
    before_fields, after_fields = {k: old[k] for k in changed}, {k: new[k] for k in changed}
    await _record(db, actor, before["_id"], "updated", before=before_fields, after=after_fields, run_id=run_id)
    return WorkOrderRead.model_validate(after)


async def delete(*, db: AsyncDatabase, actor: Actor, order_id: str, version: int, run_id: str | None = None) -> None:
    """Delete at the version the person saw; Conflict (and nothing deleted) when it moved on."""
    before = await _get_writable(db, actor, order_id)
    _check_version(before, version)
    gone = await repo.delete(db, before["_id"], version)
    if gone is None:
        raise await _lost_race(db, before["_id"])
    await _record(db, actor, before["_id"], "deleted", before=_tracked(before), after=None, run_id=run_id)


async def activity(*, db: AsyncDatabase, actor: Actor, order_id: str) -> list[ActivityRead]:
    """The timeline of a work order the actor may see, newest first."""
    doc = await _get_visible(db, actor, order_id)
    if doc is None:
        raise NotFound("No such work order.")
    return [ActivityRead.model_validate(entry) for entry in await repo.activity(db, doc["_id"])]


async def _get_writable(db: AsyncDatabase, actor: Actor, order_id: str) -> dict[str, Any]:
    doc = await _get_visible(db, actor, order_id)
    if doc is None:
        raise NotFound("No such work order.")
    if not actor.can_write:
        raise Forbidden("Viewers cannot change work orders.")
    return doc


def _check_version(current: dict[str, Any], version: int) -> None:
    if current["version"] != version:
        raise _conflict(current)


def _conflict(current: dict[str, Any]) -> Conflict:
    return Conflict(
        "Someone else saved this work order first. Reload to see their change, then apply yours again.",
        details={"current": WorkOrderRead.model_validate(current).model_dump(mode="json", by_alias=True)},
    )


async def _lost_race(db: AsyncDatabase, order_id: ObjectId) -> DeskError:
    """Another write landed between our read and our conditional write: say what is there now."""
    current = await repo.get(db, order_id)
    return _conflict(current) if current else NotFound("No such work order.")


def _tracked(doc: dict[str, Any]) -> dict[str, Any]:
    return {key: str(doc[key]) if key == "ownerId" else doc[key] for key in TRACKED}


async def _record(db, actor: Actor, order_id: ObjectId, action: str, *, before, after, run_id: str | None) -> None:
    await repo.append_activity(
        db,
        {
            "workOrderId": order_id,
            "actorId": actor.id,
            "actorKind": actor.kind,
            "action": action,
            "before": before,
            "after": after,
            "runId": run_id,
            "at": now(),
        },
    )


# --- the triage agent's door (SEC-6): one read and one write, for the System Actor with `triage` only ---

TRIAGE_FIELDS = frozenset({"priority"})  # what triage_patch can ever change, whatever a policy allows
_log = logging.getLogger(__name__)


class TriageTarget(NamedTuple):
    order: WorkOrderRead
    ai_allowed: bool  # the person the order is for has AI on (SEC-8)


def _require_triage(actor: Actor) -> None:
    if actor.kind != "system" or actor.capability != "triage":
        raise Forbidden("Only the triage agent may do this.")


async def triage_read(*, db: AsyncDatabase, actor: Actor, order_id: str) -> TriageTarget | None:
    """The order as the triage agent reads it, and whether its person allows AI; None when it is gone."""
    _require_triage(actor)
    oid = parse_object_id(order_id)
    doc = await repo.get(db, oid) if oid else None
    if doc is None:
        return None
    person_id = doc.get("ownerId") or doc.get("requesterId")  # unassigned: the person who asked
    person = await users_repo.get(db, person_id) if person_id else None
    allowed = person is None or bool(person.get("aiEnabled", True))
    return TriageTarget(order=WorkOrderRead.model_validate(doc), ai_allowed=allowed)


async def by_ids(*, db: AsyncDatabase, actor: Actor, order_ids: list[ObjectId]) -> dict[ObjectId, WorkOrderRead]:
    """Those of these orders the actor may see, by id (the attention list, for admins)."""
    _require_person(actor)
    docs = await repo.page(db, {"_id": {"$in": order_ids}}, sort="createdAt", offset=0, limit=max(1, len(order_ids)))
    return {doc["_id"]: WorkOrderRead.model_validate(doc) for doc in docs if _visible(actor, doc)}


async def triage_patch(
    *, db: AsyncDatabase, actor: Actor, order_id: str, changes: dict[str, Any], allowed: frozenset[str], run_id: str
) -> WorkOrderRead | None:
    """The one write the triage agent reaches: only allowed fields, on a fresh read, at its version.

    A lost race (409) reads again and tries once more; after a second one the change is logged and
    dropped (None), as is a change to an order that is gone or closed. Never deletes; never touches
    owner, status, title or description.
    """
    _require_triage(actor)
    permitted = TRIAGE_FIELDS & allowed
    if not changes or set(changes) - permitted:
        raise Forbidden("The triage agent may change only: " + ", ".join(sorted(permitted)) + ".")
    if changes.get("priority") not in PRIORITIES:
        raise ValidationFailed("Not a priority.", details={"field": "priority"})
    oid = parse_object_id(order_id)
    for _ in range(2):
        before = await repo.get(db, oid) if oid else None
        if before is None or before["status"] in CLOSED:
            return None
        fields = {key: value for key, value in changes.items() if before.get(key) != value}
        if not fields:
            return WorkOrderRead.model_validate(before)
        after = await repo.update(db, before, fields, at=now())
        if after is not None:
            old, new = {k: before[k] for k in fields}, {k: after[k] for k in fields}
            await _record(db, actor, before["_id"], "updated", before=old, after=new, run_id=run_id)
            return WorkOrderRead.model_validate(after)
    _log.warning("triage change dropped: the work order changed under it twice (run %s)", run_id)
    return None
