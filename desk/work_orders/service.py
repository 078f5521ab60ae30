"""Work orders: create, read, list, change, take and delete them, with optimistic versions and the activity timeline.

Who may do which of these is decided in `permissions`; every function here asks it before touching a document.
"""

from functools import partial
from typing import Any, Literal, NamedTuple

from bson import ObjectId
from pymongo.asynchronous.database import AsyncDatabase

from desk import state
from desk.actors import Actor
from desk.attachments import repository as attachments_repo
from desk.audit import service as audit
from desk.auth import write_limit
from desk.errors import Conflict, DeskError, Forbidden, NotFound, NothingToChange
from desk.notifications import events as notify
from desk.notifications import outbox as told
from desk.schema import OffsetPage, after, by_id, during, midnight, now, parse_object_id
from desk.users import repository as users_repo
from desk.users import service as users_service
from desk.work_orders import counters, permissions
from desk.work_orders import repository as repo
from desk.work_orders.models import (
    CLOSED,
    EDITABLE,
    TIMELINE_PAGE,
    ActivityRead,
    CommentCreate,
    CommentRead,
    WorkOrderCreate,
    WorkOrderQuery,
    WorkOrderRead,
    WorkOrderUpdate,
)
from desk.zone import desk_zone

TRACKED = (*EDITABLE, "ownerId", "dueAt")


class OwnerChoices(NamedTuple):
    """Names by id: of `everyone` (to show), of those the actor may give an order to (`assignable`), and of
    those who can own orders at all (`workers`: active users and admins, what the Owner filter offers)."""

    everyone: dict[str, str]
    assignable: dict[str, str]
    workers: dict[str, str]


async def owner_choices(*, db: AsyncDatabase, actor: Actor) -> OwnerChoices:
    """The people the owner pickers and filters offer.

    Admins give to anyone who can work, people only to themselves, viewers to nobody; all in
    alphabetical order. Someone deactivated keeps their orders, and is named so ("Lee Chen (deactivated)").
    Everyone is read: a desk's people number in the hundreds, not the millions.
    """
    permissions.require_person(actor)
    people = await users_service.everyone(db=db)  # in the people list's order: any case, any accents
    names = {str(p["_id"]): p["name"] + ("" if p.get("active", True) else " (deactivated)") for p in people}
    workers = {str(p["_id"]): p["name"] for p in people if permissions.can_work(p)}
    if actor.is_admin:
        return OwnerChoices(names, workers, workers)
    return OwnerChoices(names, {actor.id: names.get(actor.id, "Me")} if actor.can_write else {}, workers)


async def _owner_id(db: AsyncDatabase, actor: Actor, requested: str | None, *, refused: str) -> ObjectId:
    """The owner a write may set: yourself, or, when you are an admin, anyone who can work on orders."""
    if requested is None or requested == actor.id:
        return ObjectId(actor.id)
    if not actor.is_admin:
        raise Forbidden(refused)
    owner = await by_id(requested, partial(users_repo.get, db))
    # A well-formed id is a valid request (400 is for those the schema refuses): what it names decides the rest.
    if owner is None:
        raise NotFound("The owner does not exist.", details={"field": "ownerId"})
    if not permissions.can_work(owner):  # say which rule it breaks
        problem = "is deactivated" if not owner.get("active", True) else "is a viewer and cannot work on orders"
        raise Conflict(f"{owner['name']} {problem}.", details={"field": "ownerId"})
    return owner["_id"]


async def create(*, db: AsyncDatabase, actor: Actor, data: WorkOrderCreate, run_id: str | None = None) -> WorkOrderRead:
    """A new pending work order asked for by the actor, worked on by them (owner left out), by nobody yet
    (owner null: the queue) or, when an admin names them, by anyone who can work."""
    permissions.require_person(actor)
    if not actor.can_write:
        raise Forbidden("Viewers cannot create work orders.")
    queued = data.owner_given() and data.owner_id is None
    refused = "Only admins can give a work order to someone else."
    owner = None if queued else await _owner_id(db, actor, data.owner_id, refused=refused)
    await write_limit.admit(db=db, actor=actor)
    moment = now()
    new = {
        "_id": ObjectId(),  # named before it is stored: its fan-out job is, before it
        "title": data.title,
        "description": data.description,
        "priority": data.priority,
        "status": "pending",
        "requesterId": ObjectId(actor.id),
        "ownerId": owner,
        "version": 1,
        "createdAt": moment,
        "updatedAt": moment,
        "closedAt": None,
        "dueAt": data.due_at,
    }
    created = timeline_entry(actor, "created", before=None, after=_tracked(new), run_id=run_id)
    held = await told.announce(db, notify.order_created(actor=actor, order=new, entry=created["_id"], run_id=run_id))
    doc = await repo.insert(db, new, activity=created)
    await told.deliver(db, held)
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
    permissions.require_person(actor)
    doc = await by_id(order_id, partial(repo.get, db))
    return doc if doc and permissions.visible(actor, doc) else None


async def list_orders(
    *, db: AsyncDatabase, actor: Actor, query: WorkOrderQuery, mine: bool = False
) -> OffsetPage[WorkOrderRead]:
    """A page of the work orders the actor may see: admins and viewers all, people what they asked for or
    work on plus the queue; `mine`: only what the actor asked for or works on (the copilot's "own").
    A requester filter (`permissions.list_requester`) names only orders the actor may see, so it takes the
    scope's place."""
    permissions.require_person(actor)
    owner = permissions.list_owner(actor, query.owner_id, mine=mine)
    requester = permissions.list_requester(actor, query.requester_id, mine=mine)
    filter_ = repo.filters(owner_id=owner, requester_id=requester, status=query.status, priority=query.priority)
    parts, total_keys = permissions.list_parts(actor, owner, mine=mine) if requester is None else ([], [])
    if query.opened:  # one UTC day: counted by the server up to the cap, as a search is
        filter_["createdAt"] = during(midnight(query.opened), after(query.opened))
    if query.due:  # moves with the clock, so no counter keeps it: counted by the server up to the cap
        moment, zone = state.current().clock.now(), await desk_zone(db)
        filter_ |= repo.due_filter(query.due, now=moment, zone=zone)
    if query.q:
        # a requester's orders are searched as the parts whose index ranges hold them, not the word's every posting
        searched = repo.requested_by(requester) if requester is not None else parts
        docs, total, exact = await repo.search_page(
            db, query.q, filter_, searched, sort=query.sort, offset=query.offset, limit=query.limit
        )
    elif (
        query.opened or query.due or requester is not None
    ):  # no counter keeps these: counted by the server up to the cap
        filter_ = repo.within(filter_, parts)
        docs = await repo.page(db, filter_, sort=query.sort, offset=query.offset, limit=query.limit)
        total, exact = await repo.count(db, filter_)
    else:
        filter_ = repo.within(filter_, parts)
        docs = await repo.page(db, filter_, sort=query.sort, offset=query.offset, limit=query.limit)
        # Disjoint counters, summed: the total costs one read whatever the desk's size.
        keys = [key(status, query.priority) for key in total_keys for status in query.status or [None]]
        total, exact = sum((await counters.read(db, keys)).values()), True
    items = [WorkOrderRead.model_validate(doc) for doc in docs]
    return OffsetPage[WorkOrderRead](
        items=items, total=total, offset=query.offset, limit=query.limit, total_exact=exact
    )


async def update(
    *, db: AsyncDatabase, actor: Actor, order_id: str, data: WorkOrderUpdate, run_id: str | None = None
) -> WorkOrderRead:
    """Change fields at the version the person saw; Conflict (and nothing written) when it moved on."""
    before = await _get_for_update(db, actor, order_id, data)
    taking = data.owner_id == actor.id and before.get("ownerId") is None  # "assign to me" from the queue
    permissions.check_writable(actor, before, taking=taking)
    fields = data.changes()
    if not fields:
        raise NothingToChange()
    if "ownerId" in fields:  # only a new owner is checked: someone deactivated since keeps their orders
        owner = str(before["ownerId"]) if before.get("ownerId") else None
        if data.owner_id == owner:
            fields["ownerId"] = before["ownerId"]
        elif taking:
            fields["ownerId"] = ObjectId(actor.id)
        elif data.owner_id is None:  # back to the queue
            if not (actor.is_admin or owner == actor.id):
                raise Forbidden("Only its owner or an admin can put a work order back in the queue.")
        elif actor.is_admin:
            fields["ownerId"] = await _owner_id(db, actor, data.owner_id, refused="")
        else:  # taking it from a colleague is reassigning
            raise Forbidden("Only admins can reassign a work order; you can take one from the queue.")
    _check_version(before, data.version)
    fields = {key: value for key, value in fields.items() if before.get(key) != value}
    if taking:
        permissions.check_take(actor, before, fields)
    if not fields:
        return WorkOrderRead.model_validate(before)
    await write_limit.admit(db=db, actor=actor)
    if "status" in fields:
        fields["closedAt"] = now() if fields["status"] in CLOSED else None
    old, new = _tracked(before), _tracked({**before, **fields})
    changed = [key for key in TRACKED if old[key] != new[key]]
    before_fields, after_fields = {k: old[k] for k in changed}, {k: new[k] for k in changed}
    updated = timeline_entry(actor, "updated", before=before_fields, after=after_fields, run_id=run_id)
    news = notify.order_changed(
        actor=actor, before=before, after={**before, **fields}, entry=updated["_id"], run_id=run_id
    )
    held = await told.announce(db, news)
    after = await repo.update(db, before, fields, at=now(), activity=updated)
    if after is None:
        await told.drop(db, held)
        raise await _lost_race(db, actor, before["_id"], data.version, taking=taking)
    await told.deliver(db, held)
    return WorkOrderRead.model_validate(after)


async def delete(*, db: AsyncDatabase, actor: Actor, order_id: str, version: int, run_id: str | None = None) -> None:
    """Delete at the version the person saw; Conflict (and nothing deleted) when it moved on."""
    before = await _get_writable(db, actor, order_id)
    _check_version(before, version)
    await write_limit.admit(db=db, actor=actor)
    deleted = timeline_entry(actor, "deleted", before=_tracked(before), after=None, run_id=run_id)
    gone = await repo.delete(db, before["_id"], version, activity=deleted)
    if gone is None:
        raise await _lost_race(db, actor, before["_id"], version)
    files = await attachments_repo.delete_of_order(db, before["_id"])  # its files go with it
    # The order as it was, for the desk-wide audit log (its own timeline goes with it from every screen).
    kept = {"order": WorkOrderRead.model_validate(gone).model_dump(mode="json", by_alias=True), "runId": run_id}
    if files:
        kept["attachments"] = [{"name": doc["name"], "size": doc["size"]} for doc in files]
    await audit.record(db=db, actor=actor, action="work_order_deleted", subject_id=before["_id"], details=kept)


async def activity(
    *, db: AsyncDatabase, actor: Actor, order_id: str, offset: int = 0, limit: int = TIMELINE_PAGE
) -> list[ActivityRead]:
    """`limit` entries of the timeline of a work order the actor may see from `offset`, newest first."""
    doc = await _get_visible(db, actor, order_id)
    if doc is None:
        raise NotFound("No such work order.")
    entries = await repo.activity(db, doc["_id"], offset=offset, limit=limit)
    return [ActivityRead.model_validate(entry) for entry in entries]


async def comments(
    *, db: AsyncDatabase, actor: Actor, order_id: str, offset: int = 0, limit: int = TIMELINE_PAGE
) -> list[CommentRead]:
    """`limit` of the comments on a work order the actor may see from `offset`, newest first."""
    doc = await _get_visible(db, actor, order_id)
    if doc is None:
        raise NotFound("No such work order.")
    entries = await repo.activity(db, doc["_id"], offset=offset, limit=limit, action="commented")
    return [CommentRead.model_validate(entry) for entry in entries]


async def add_comment(*, db: AsyncDatabase, actor: Actor, order_id: str, data: CommentCreate) -> CommentRead:
    """A comment on the timeline, by anyone who can see the order (viewers too: a comment changes no field)."""
    doc = await _get_visible(db, actor, order_id)
    if doc is None:
        raise NotFound("No such work order.")
    await write_limit.admit(db=db, actor=actor)  # comments too: each is pushed to every screen showing the order
    entry = {
        "_id": ObjectId(),  # named before it is stored: the comment's fan-out job is, before it
        "workOrderId": doc["_id"],
        "actorId": actor.id,
        "actorKind": actor.kind,
        "action": "commented",
        "text": data.text,
        "runId": None,
        "at": now(),
    }
    held = await told.announce(db, notify.commented(actor=actor, order=doc, entry=entry["_id"], text=data.text))
    stored = await repo.comment(db, doc, entry)
    await told.deliver(db, held)
    return CommentRead.model_validate(stored)


async def note_file(
    *, db: AsyncDatabase, actor: Actor, order_id: str, action: Literal["attached", "detached"], file: dict[str, Any]
) -> None:
    """Put a file added to or removed from an order on its timeline (by name), and tell every open screen of it.
    The attachments service calls this once it has decided the actor may."""
    doc = await _get_visible(db, actor, order_id)
    if doc is None:  # deleted meanwhile: its timeline went with it
        return
    named = {"attachmentId": str(file["_id"]), "name": file["name"], "size": file["size"]}
    entry = timeline_entry(actor, action, before=None, after=named, run_id=None) | {"workOrderId": doc["_id"]}
    await repo.comment(db, doc, entry, kind="files")


async def _get_writable(db: AsyncDatabase, actor: Actor, order_id: str) -> dict[str, Any]:
    doc = await _get_visible(db, actor, order_id)
    if doc is None:
        raise NotFound("No such work order.")
    permissions.check_writable(actor, doc, taking=False)
    return doc


async def _get_for_update(db: AsyncDatabase, actor: Actor, order_id: str, data: WorkOrderUpdate) -> dict[str, Any]:
    doc = await _get_visible(db, actor, order_id)
    if doc is not None:
        return doc
    # Two people took the same order from the queue: the one who lost is told it left the queue, not that it
    # never existed, and nothing of it is shown (it is no longer theirs to see). An order that was never in the
    # queue reads as missing whatever is sent: an id alone must not tell that someone's order exists.
    oid = parse_object_id(order_id)
    taken = await repo.get(db, oid) if oid is not None and data.owner_id == actor.id and actor.can_write else None
    if taken is not None and taken["version"] > data.version and await repo.left_the_queue_last(db, oid):
        raise TakenFirst()
    raise NotFound("No such work order.")


class TakenFirst(Conflict):
    default_message = "Someone else took this work order first; it is no longer in the queue."


def _check_version(current: dict[str, Any], version: int) -> None:
    if current["version"] != version:
        raise _conflict(current, version)


def _conflict(current: dict[str, Any], version: int, *, taking: bool = False) -> Conflict:
    """The order as it is now, and what happened since `version`, in words true whoever saved (`taking`: a take)."""
    if version > current["version"]:
        message = f"This work order is at version {current['version']}; there is no version {version} of it yet."
    elif taking and current.get("ownerId") is not None:
        message = TakenFirst.default_message
    else:
        message = (
            f"This work order was saved since the version you have ({version}; it is at {current['version']} now). "
            "Reload to see what changed, then apply yours again."
        )
    return Conflict(
        message, details={"current": WorkOrderRead.model_validate(current).model_dump(mode="json", by_alias=True)}
    )


async def _lost_race(
    db: AsyncDatabase, actor: Actor, order_id: ObjectId, version: int, *, taking: bool = False
) -> DeskError:
    """Another write landed between our read and our conditional write: say what is there now, if theirs to see."""
    current = await repo.get(db, order_id)
    if current is not None and permissions.visible(actor, current):
        return _conflict(current, version, taking=taking)
    return TakenFirst() if current is not None and taking else NotFound("No such work order.")


def _tracked(doc: dict[str, Any]) -> dict[str, Any]:
    """The fields a timeline entry shows; an order stored before due dates is due by no day."""
    return {key: str(doc[key]) if key == "ownerId" and doc[key] else doc.get(key) for key in TRACKED}


def timeline_entry(actor: Actor, action: str, *, before, after, run_id: str | None) -> dict[str, Any]:
    """What a write puts on its order's timeline; the repository stores it with the write (and its order's id)."""
    return {
        "_id": ObjectId(),  # named before it is stored: a write's fan-out job is keyed by it (notifications/outbox.py)
        "actorId": actor.id,
        "actorKind": actor.kind,
        "action": action,
        "before": before,
        "after": after,
        "runId": run_id,
        "at": now(),
    }


async def by_ids(*, db: AsyncDatabase, actor: Actor, order_ids: list[ObjectId]) -> dict[ObjectId, WorkOrderRead]:
    """Those of these orders the actor may see, by id (the attention list, for admins)."""
    permissions.require_person(actor)
    docs = await repo.page(db, {"_id": {"$in": order_ids}}, sort="createdAt", offset=0, limit=max(1, len(order_ids)))
    return {doc["_id"]: WorkOrderRead.model_validate(doc) for doc in docs if permissions.visible(actor, doc)}
