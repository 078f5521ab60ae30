"""A new order's job in the queue (spec AGT-1): `work_order.created`, which the triage agent's task takes.

The repository enqueues it after every insert, so no creation path can forget it; the job is keyed by
the order, so a retried emission or the reconcile pass never makes a second one.
"""

from typing import Any

from pymongo.asynchronous.database import AsyncDatabase

from desk.jobs import queue
from desk.users import repository as users_repo

CREATED = "work_order.created"
Doc = dict[str, Any]


async def emit_created(db: AsyncDatabase, order: Doc) -> bool:
    """The new order's job, `skipped` at once when its requester (whose words would go to the model) or
    its owner, if it has one, has AI turned off (SEC-8); False when the order has its job already."""
    people = {order.get("requesterId"), order.get("ownerId")} - {None}
    opted_out = False
    for person_id in people:
        person = await users_repo.get(db, person_id)
        opted_out = opted_out or (person is not None and not person.get("aiEnabled", True))
    return await queue.enqueue(db, CREATED, order["_id"], skip="ai_disabled_for_owner" if opted_out else None)
