"""The desk-wide audit log: the services that delete orders and change people or tokens write it; admins read it."""

from typing import Any

from pymongo.asynchronous.database import AsyncDatabase

from desk.access import require_admin
from desk.actors import Actor
from desk.audit import repository as repo
from desk.audit.models import Action, AuditQuery, AuditRead
from desk.schema import OffsetPage, now


async def record(
    *, db: AsyncDatabase, actor: Actor | None, action: Action, subject_id: object, details: dict[str, Any] | None = None
) -> None:
    """Append one entry (ids as text; `details` holds names, ids and stored values, never a secret)."""
    await repo.append(
        db,
        {
            "at": now(),
            "action": action,
            "actorId": actor.id if actor else None,
            "actorKind": actor.kind if actor else "system",
            "subjectId": None if subject_id is None else str(subject_id),
            "details": details or {},
        },
    )


async def list_entries(*, db: AsyncDatabase, actor: Actor, query: AuditQuery) -> OffsetPage[AuditRead]:
    """A page of the audit log, newest first; admins only."""
    require_admin(actor, "read the audit log")
    docs, total, exact = await repo.page(db, query.filter(), offset=query.offset, limit=query.limit)
    items = [AuditRead.model_validate(doc) for doc in docs]
    return OffsetPage[AuditRead](items=items, total=total, offset=query.offset, limit=query.limit, total_exact=exact)


async def newest_id(*, db: AsyncDatabase, actor: Actor, query: AuditQuery) -> str | None:
    """The id of the newest entry `query` selects: what an open log compares to see that one came."""
    require_admin(actor, "read the audit log")
    found = await repo.newest_id(db, query.filter())
    return str(found) if found else None
