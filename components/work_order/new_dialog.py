"""The "New work order" dialog: fields, messages beside them, and the create call."""

from collections.abc import Awaitable, Callable
from typing import NamedTuple

from nicegui import ui
from pydantic import ValidationError

from components.fields import clear_problems, show_problems
from components.once import one_at_a_time
from components.runtime import session
from components.work_order.due_field import NOT_A_DAY, due_input, due_moment
from desk.db.client import get_db
from desk.errors import DeskError
from desk.labels import PRIORITY_LABELS
from desk.work_orders import service
from desk.work_orders.counters import QUEUE
from desk.work_orders.models import WorkOrderCreate, WorkOrderRead
from desk.zone import desk_zone


def new_work_order_opener(
    visit: session.Visit, owners: dict[str, str], on_created: Callable[[WorkOrderRead], Awaitable[None]]
) -> Callable[[], None]:
    """What opens a "New work order" dialog, made afresh each time (here, on the page) in place of the last.

    One dialog kept for every opening showed the last order's text again: the browser's input writes
    what it last showed back into its element as the closing dialog unmounts it, over the emptied value.
    """
    home = ui.element()
    shown: list[NewOrder] = []

    def open_one() -> None:
        if shown and shown[0].dialog.value:  # open already ("n" again): what is typed in it stays
            return
        if shown and shown[0].unsaved():  # closed by Esc or a click beside it: what was typed comes back
            shown[0].dialog.open()
            return
        home.clear()  # the last one, done with (not at its closing: its create() still runs in it then)
        with home:
            shown[:] = [new_work_order_dialog(visit, owners, on_created)]
        shown[0].dialog.open()

    return open_one


class NewOrder(NamedTuple):
    dialog: ui.dialog
    unsaved: Callable[[], bool]  # something typed that was neither created nor cancelled


def new_work_order_dialog(
    visit: session.Visit, owners: dict[str, str], on_created: Callable[[WorkOrderRead], Awaitable[None]]
) -> NewOrder:
    """A dialog that creates a work order, for the person, for nobody yet (the queue) or, for an admin, for
    anyone in `owners` (those the person may give an order to). Cancel drops what was typed; Esc or a click
    beside the dialog only closes it, and the next "New work order" brings the text back."""
    done = False
    with ui.dialog() as dialog, ui.card().classes("w-[36rem] gap-2").mark("new-dialog"):
        ui.label("New work order").classes("text-lg font-semibold")
        title = ui.input("Title").props("counter maxlength=200 autofocus").classes("w-full").mark("new-title")
        description = ui.textarea("Description").props("counter maxlength=5000 autogrow").classes("w-full")
        description.mark("new-description")
        priority = ui.select(PRIORITY_LABELS, value="medium", label="Priority").classes("w-48").mark("new-priority")
        choices = {**owners, QUEUE: "Unassigned (queue)"}
        owner = ui.select(choices, value=visit.user_id if visit.user_id in owners else QUEUE, label="Who works on it")
        owner.classes("w-64").mark("new-owner")
        due = due_input(None, "UTC").mark("new-due")  # a day: only its text is read, in the desk's zone
        problem = ui.label().classes("text-negative text-sm")
        inputs = {"title": title, "description": description, "priority": priority, "owner_id": owner, "due_at": due}

        @one_at_a_time
        async def create() -> None:
            clear_problems({k: v for k, v in inputs.items() if v is not None}, problem)
            values = {"title": title.value or "", "description": description.value or "", "priority": priority.value}
            values["owner_id"] = None if owner.value == QUEUE else owner.value  # null: the queue
            try:
                values["due_at"] = due_moment(due.value, await desk_zone(get_db()))
            except ValueError:
                due.error = NOT_A_DAY
                return
            try:
                data = WorkOrderCreate.model_validate(values)
                order = await service.create(db=get_db(), actor=await visit.actor(), data=data)
            except ValidationError as error:
                show_problems(error, inputs, problem)
                return
            except DeskError as error:
                problem.set_text(error.message)
                return
            nonlocal done
            done = True
            dialog.close()
            ui.notify(f"Created “{order.title}”", type="positive")
            await on_created(order)

        def cancel() -> None:
            nonlocal done
            done = True
            dialog.close()

        title.on("keydown.enter", create)  # Enter in the one-line field creates, as in any form
        with ui.row().classes("w-full justify-end"):
            ui.button("Cancel", on_click=cancel).props("flat").mark("cancel-new")
            ui.button("Create", on_click=create).mark("create")

    def unsaved() -> bool:
        return not done and bool((title.value or "").strip() or (description.value or "").strip())

    return NewOrder(dialog, unsaved)
