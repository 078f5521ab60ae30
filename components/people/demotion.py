"""Making someone a viewer: the confirmation says how many open orders they own (a viewer works on none) and
offers to return those to the queue, where someone who can work on them takes them."""

from nicegui import ui


def orders(count: int) -> str:
    return f"{count} open work order{'' if count == 1 else 's'}"


async def ask_to_make_viewer(name: str, owned: int) -> str | None:
    """ "keep" (their orders stay theirs), "return" (to the queue), or None when cancelled. Text, never HTML."""
    with ui.dialog() as dialog, ui.card().classes("w-[30rem]").mark("make-viewer-dialog"):
        ui.label(f"Make {name} a viewer?").classes("wrap-anywhere font-semibold")
        ui.label("They can then read work orders but no longer change anything, at once.")
        if owned:
            said = f"{name} owns {orders(owned)}, which nobody would then work on."
            ui.label(said).classes("wrap-anywhere").mark("make-viewer-owned")
        with ui.row().classes("w-full justify-end"):
            ui.button("Cancel", on_click=lambda: dialog.submit(None)).props("flat")
            if owned:
                keep = ui.button("Make viewer, keep them theirs", on_click=lambda: dialog.submit("keep"))
                keep.props("flat color=negative").mark("confirm-role")
                back = ui.button("Make viewer, return them to the queue", on_click=lambda: dialog.submit("return"))
                back.props("color=negative").mark("confirm-role-return")
            else:
                ui.button("Make viewer", on_click=lambda: dialog.submit("keep")).props("color=negative").mark(
                    "confirm-role"
                )
    chosen = await dialog
    if dialog.is_deleted:  # the page closed meanwhile: nothing was chosen
        return None
    dialog.delete()  # a closed dialog would keep its buttons (and markers) on the page
    return chosen
