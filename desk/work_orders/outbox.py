"""A new order's job in the queue (spec AGT-1): `work_order.created`, which the triage agent's task takes.

The repository enqueues it after every insert, so no creation path can forget it; the job is keyed by
the order, so a retried emission or the reconcile pass never makes a second one.
"""

from typing import Any

from pymongo.asynchronous.database import AsyncDatabase

from desk import access
from desk.jobs import queue

CREATED = "work_order.created"
Doc = dict[str, Any]


async def emit_created(db: AsyncDatabase, order: Doc, *, skip: str | None = None) -> bool:
    """The new order's job, `skipped` at once when its people do not allow AI (`access.order_allows_ai`, SEC-8) or
    the caller says why not (`skip`); False when the order has its job already."""
    if skip is None and not await access.order_allows_ai(db, order):
        skip = "ai_disabled_for_owner"
    # born with the order: a job the reconcile pass makes for an old order waits behind a new order's
    return await queue.enqueue(db, CREATED, order["_id"], skip=skip, born=order["createdAt"])
