"""Asking before something that cannot be undone."""

from nicegui import ui


async def confirm(*lines: str, action: str, marker: str) -> bool:
    """A dialog with `lines` as text (never HTML), Cancel and a red `action` button; True when confirmed."""
    with ui.dialog() as dialog, ui.card().classes("w-96"):
        for line in lines:
            ui.label(line).classes("wrap-anywhere")
        with ui.row().classes("w-full justify-end"):
            ui.button("Cancel", on_click=lambda: dialog.submit(False)).props("flat")
            ui.button(action, on_click=lambda: dialog.submit(True)).props("color=negative").mark(marker)
    confirmed = await dialog
    if dialog.is_deleted:  # the page closed meanwhile: nothing was confirmed
        return False
    dialog.delete()  # closed dialogs would keep their buttons (and markers) on the page
    return bool(confirmed)
