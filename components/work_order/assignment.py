"""Who asked for a work order and who works on it: "Assign to me" on a queued order, "Back to the queue" for its
owner, and an admin's owner field (which offers the queue too)."""

from collections.abc import Awaitable, Callable

from nicegui import ui

from components.confirm import confirm
from components.once import one_at_a_time
from components.runtime import session
from components.work_order.rows import take
from desk.actors import Actor
from desk.db.client import get_db
from desk.errors import DeskError
from desk.users import service as users_service
from desk.work_orders import permissions, service
from desk.work_orders.counters import QUEUE
from desk.work_orders.models import WorkOrderRead, WorkOrderUpdate

Changed = Callable[[WorkOrderRead], Awaitable[None]]


async def assignment(
    visit: session.Visit, actor: Actor, order: WorkOrderRead, *, on_changed: Changed, unsaved: Callable[[], bool]
) -> None:
    """The requester, the owner (a field for admins, offering only people who can work), and "Assign to me".

    `unsaved`: whether the page holds an edit not saved yet (giving the order back, which would leave the
    person unable to save it, asks first).
    """
    people = {order.requester_id, order.owner_id} - {None}
    names = await users_service.display_names(db=get_db(), user_ids=people)
    ui.label(f"Requested by {names.get(order.requester_id, 'someone')}").classes("text-sm text-grey-8").mark(
        "requester"
    )
    if actor.is_admin:
        everyone, assignable, _ = await service.owner_choices(db=get_db(), actor=actor)
        if order.owner_id and order.owner_id not in assignable:  # someone deactivated since keeps their orders
            # in name order, named so ("Lee Chen (deactivated)")
            assignable = {key: name for key, name in everyone.items() if key in assignable or key == order.owner_id}
        choices = {**assignable, QUEUE: "Unassigned (queue)"}  # as the new-order dialog offers it
        owner = ui.select(choices, value=order.owner_id or QUEUE, label="Owner").props("dense").classes("w-56")
        owner.mark("owner-select")

        async def reassign(event) -> None:
            if event.value and event.value != (order.owner_id or QUEUE):
                await _reassign(visit, order, None if event.value == QUEUE else event.value, on_changed)

        owner.on_value_change(reassign)
    else:
        shown = names.get(order.owner_id, "someone") if order.owner_id else "Unassigned"
        ui.label(f"Owner: {shown}").classes("text-sm text-grey-8").mark("owner")
        if permissions.can_release(actor, order):

            @one_at_a_time
            async def release() -> None:
                queued = order.model_copy(update={"owner_id": None})
                if (
                    unsaved()
                    and not permissions.can_change(actor, queued)
                    and not await confirm(
                        "Put it back in the queue?",
                        "Your unsaved edit cannot be saved once it is in the queue (only its requester changes it).",
                        action="Put it back, drop my edit",
                        marker="confirm-release",
                    )
                ):
                    return
                await _reassign(visit, order, None, on_changed)

            ui.button("Back to the queue", icon="undo", on_click=release).props("dense outline").mark("release")
    if permissions.can_take(actor, order):

        @one_at_a_time
        async def assign_to_me() -> None:
            if taken := await take(visit, order):
                await on_changed(taken)

        ui.button("Assign to me", icon="pan_tool", on_click=assign_to_me).props("dense outline").mark("assign-to-me")


async def _reassign(visit: session.Visit, order: WorkOrderRead, owner_id: str | None, on_changed: Changed) -> None:
    """Give the order to `owner_id`, or put it back in the queue (None)."""
    person = await visit.actor()
    data = WorkOrderUpdate(version=order.version, ownerId=owner_id)
    try:
        moved = await service.update(db=get_db(), actor=person, order_id=order.id, data=data)
    except DeskError as error:
        visit.tell(error.message, type="warning")
        await on_changed(order)  # draw the owner as it is
        return
    visit.tell("Reassigned." if owner_id else "Back in the queue.", type="positive")
    await on_changed(moved)
