"""A person made a viewer keeps the open orders they own, and no longer works on any: how many that is, for the
admin's confirmation, and returning them to the queue, audited. Each order goes back through the work-order
service, so its timeline and its requester say so as for any other return to the queue."""

from pymongo.asynchronous.database import AsyncDatabase

from desk.access import require_admin
from desk.actors import Actor
from desk.audit import service as audit
from desk.errors import Conflict, NotFound
from desk.schema import MAX_LIMIT, MAX_OFFSET
from desk.users import service as users_service
from desk.work_orders import service as work_orders
from desk.work_orders.models import WorkOrderQuery, WorkOrderRead, WorkOrderUpdate

OPEN = ["pending", "in_progress"]


async def open_orders_owned(*, db: AsyncDatabase, actor: Actor, user_id: str) -> int:
    """How many open work orders the person owns."""
    require_admin(actor, "manage users")
    return (await work_orders.list_orders(db=db, actor=actor, query=_owned_by(user_id, 0, 1))).total


async def return_to_queue(*, db: AsyncDatabase, actor: Actor, user_id: str) -> int:
    """Put every open order the person owns back in the queue; returns how many went. One changed meanwhile
    (its version moved on, or it was deleted) is left as it now is."""
    require_admin(actor, "manage users")
    person = await users_service.get_user_or_raise(db=db, actor=actor, user_id=user_id)
    owned: list[WorkOrderRead] = []
    while len(owned) <= MAX_OFFSET:  # read all first: each return moves an order out of the pages read
        page = await work_orders.list_orders(db=db, actor=actor, query=_owned_by(user_id, len(owned), MAX_LIMIT))
        owned += page.items
        if len(page.items) < MAX_LIMIT:
            break
    returned = 0
    for order in owned:
        data = WorkOrderUpdate(version=order.version, owner_id=None)
        try:
            await work_orders.update(db=db, actor=actor, order_id=order.id, data=data)
        except (Conflict, NotFound):
            continue
        returned += 1
    if returned:
        details = {"name": person.name, "count": returned}
        await audit.record(db=db, actor=actor, action="orders_returned_to_queue", subject_id=user_id, details=details)
    return returned


def _owned_by(user_id: str, offset: int, limit: int) -> WorkOrderQuery:
    return WorkOrderQuery.model_validate({"ownerId": user_id, "status": OPEN, "offset": offset, "limit": limit})
