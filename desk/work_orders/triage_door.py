"""The triage agent's door to work orders (SEC-6): for the System Actor with `triage` only.

One read (`triage_read`, and the reconcile pass's walk, `triage_backlog`) and one write,
`triage_patch`, which can change nothing but the fields a policy allows. Every other service entry
refuses a System Actor (`permissions.require_person`, called by every entry of desk/work_orders/service.py).
"""

import logging
from datetime import datetime
from functools import partial
from typing import Any, NamedTuple

from bson import ObjectId
from pymongo.asynchronous.database import AsyncDatabase

from desk import access
from desk.actors import Actor
from desk.errors import Forbidden, ValidationFailed
from desk.schema import by_id, now, parse_object_id
from desk.work_orders import repository as repo
from desk.work_orders import service
from desk.work_orders.models import CLOSED, PRIORITIES, WorkOrderRead

# What triage_patch can ever change, whatever a policy allows. Never `dueAt`: a due day is a person's promise
# (issue 44); the triage may say an order is urgent, in its summary and its priority, and no more.
TRIAGE_FIELDS = frozenset({"priority"})
_log = logging.getLogger(__name__)


class Overtaken(NamedTuple):
    """A person changed a field the triage read before it could write: the person's value stays (people first)."""

    order: WorkOrderRead


class TriageTarget(NamedTuple):
    order: WorkOrderRead
    ai_allowed: bool  # access.order_allows_ai: its requester and its owner (if any) have AI on (SEC-8)


def _require_triage(actor: Actor) -> None:
    if actor.kind != "system" or actor.capability != "triage":
        raise Forbidden("Only the triage agent may do this.")


async def triage_read(*, db: AsyncDatabase, actor: Actor, order_id: str) -> TriageTarget | None:
    """The order as the triage agent reads it, and whether its person allows AI; None when it is gone."""
    _require_triage(actor)
    doc = await by_id(order_id, partial(repo.get, db))
    if doc is None:
        return None
    allowed = await access.order_allows_ai(db, doc)  # its requester and owner, in one read
    return TriageTarget(order=WorkOrderRead.model_validate(doc), ai_allowed=allowed)


async def triage_backlog(
    *, db: AsyncDatabase, actor: Actor, created_by: datetime, after: tuple[datetime, ObjectId] | None, limit: int
) -> list[dict[str, Any]]:
    """Orders created by `created_by`, oldest first, after the mark `after` (the reconcile pass's walk)."""
    _require_triage(actor)
    query: dict[str, Any] = {"createdAt": {"$lte": created_by}}
    if after is not None:
        at, order_id = after
        later = {"$or": [{"createdAt": {"$gt": at}}, {"createdAt": at, "_id": {"$gt": order_id}}]}
        query = {"$and": [query, later]}
    return await repo.page(db, query, sort="createdAt", offset=0, limit=limit)


async def triage_patch(
    *,
    db: AsyncDatabase,
    actor: Actor,
    order_id: str,
    changes: dict[str, Any],
    allowed: frozenset[str],
    run_id: str,
    read: dict[str, Any] | None = None,
) -> WorkOrderRead | Overtaken | None:
    """The one write the triage agent reaches: only allowed fields, on a fresh read, at its version.

    `read`: the values the triage saw (its model was shown them); while the order no longer holds
    them, a person changed them since, and nothing is written (Overtaken). The write is at the
    version of the read that checked them, so an edit landing between that read and the write wins too.
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
        if not fields:  # already so (an earlier pass's write, or a person's same choice): nothing to overtake
            return WorkOrderRead.model_validate(before)
        if read and any(before.get(key) != value for key, value in read.items()):
            return Overtaken(WorkOrderRead.model_validate(before))
        old = {key: before[key] for key in fields}
        updated = service.timeline_entry(actor, "updated", before=old, after=dict(fields), run_id=run_id)
        after = await repo.update(db, before, fields, at=now(), activity=updated)
        if after is not None:
            return WorkOrderRead.model_validate(after)
    _log.warning("triage change dropped: the work order changed under it twice (run %s)", run_id)
    return None
