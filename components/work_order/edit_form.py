"""The edit form of one work order: title, description, priority, status, due day, then Save and Delete.

Its values are set from the order when it is drawn and by `fill`, never after an await: the page is
served at the build's first await (the frame's drafts script waits for the socket), so a person may
already be typing, and values set later would overwrite that.
"""

from collections.abc import Awaitable, Callable

from nicegui import ui
from nicegui.elements.mixins.disableable_element import DisableableElement

from components.work_order.due_field import due_day, due_input, due_moment, kept_day
from desk.labels import CHOICE_LABELS, PRIORITY_LABELS, STATUS_LABELS
from desk.work_orders.models import EDITABLE, WorkOrderRead


class EditForm:
    def __init__(
        self,
        order: WorkOrderRead,
        *,
        save: Callable[[], Awaitable[None]],
        delete: Callable[[], Awaitable[None]],
        changed: Callable[[], None],
        zone: str = "UTC",
    ) -> None:
        """Draw the form for `order`; `changed` hears every edit (the draft keeps it, and leaving asks); `zone`: the
        desk's time zone, whose days the due field shows."""
        self.inputs: dict[str, ui.element] = {}
        self.zone = zone
        with ui.card().classes("w-full gap-2"):
            self.inputs["title"] = ui.input("Title", value=order.title).props("counter maxlength=200").classes("w-full")
            self.inputs["description"] = ui.textarea("Description", value=order.description).classes("w-full")
            self.inputs["description"].props("counter maxlength=5000 autogrow")
            with ui.row().classes("gap-3"):
                self.inputs["priority"] = ui.select(PRIORITY_LABELS, label="Priority", value=order.priority).classes(
                    "w-40"
                )
                self.inputs["status"] = ui.select(STATUS_LABELS, label="Status", value=order.status).classes("w-40")
                self.inputs["due_at"] = due_input(order.due_at, zone)
            for field, element in self.inputs.items():
                element.mark(f"edit-{field}")
                element.on_value_change(changed)
            with ui.row().classes("w-full items-center") as self.actions:  # Save first: before Delete on Tab too
                ui.button("Save", on_click=save).mark("save").tooltip("Ctrl+S")
                ui.space()
                ui.button("Delete", icon="delete", on_click=delete).props("flat color=negative").mark("delete")

    def fill(self, order: WorkOrderRead, keep: dict[str, object]) -> None:
        """Show `order`'s values, with the person's edits in `keep` on top."""
        for field in EDITABLE:
            self.inputs[field].value = keep.get(field, getattr(order, field))
            self.inputs[field].error = None
        due = keep.get("due_at", order.due_at)
        self.inputs["due_at"].value = due if isinstance(due, str) else due_day(due, self.zone)  # str: not a day
        self.inputs["due_at"].error = None

    def put_back(self, kept: dict[str, object]) -> None:
        """An edit this browser kept: each field's text, a priority or status only if it is still a choice, and the
        due day."""
        for field in EDITABLE:
            value = kept.get(field)
            if isinstance(value, str) and (field not in CHOICE_LABELS or value in CHOICE_LABELS[field]):
                self.inputs[field].value = value
        day = kept_day(kept, self.zone)
        if day is not None:
            self.inputs["due_at"].value = day

    def edits(self, loaded: WorkOrderRead) -> dict[str, object]:
        """The fields the person changed compared with `loaded`."""
        values = {f: self.inputs[f].value if self.inputs[f].value is not None else "" for f in EDITABLE}
        found: dict[str, object] = {f: value for f, value in values.items() if value != getattr(loaded, f)}
        day = self.inputs["due_at"].value or ""
        if day != due_day(loaded.due_at, self.zone):  # the same day stays the moment it was, which may be 09:00
            try:
                found["due_at"] = due_moment(day, self.zone)
            except ValueError:
                found["due_at"] = day  # refused by the update's validation, beside the field
        return found

    def allow_saving(self, allowed: bool) -> None:
        """Save and Delete on or off (off while what the person typed could only be refused)."""
        for element in self.actions.descendants():
            if isinstance(element, DisableableElement):
                element.set_enabled(allowed)

    def close(self) -> None:
        """Nothing left to save or delete: the fields keep the typed text, to be copied."""
        for element in [*self.inputs.values(), *self.actions.descendants()]:
            if isinstance(element, DisableableElement):
                element.disable()
