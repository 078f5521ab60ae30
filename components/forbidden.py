"""The page a person sees when they open a screen their role does not allow (drawn inside the frame)."""

from nicegui import ui

from components import theme

MESSAGE = "You don't have access to this page"


def forbidden() -> None:
    """A plain refusal with a way back; it says nothing about what the page would have shown."""
    with ui.column().classes("items-start gap-2 p-6").mark("forbidden"):
        theme.page_heading(ui.label(MESSAGE).classes("text-xl font-semibold"))
        ui.label("Ask an admin if you think you need it.").classes("text-grey-7")
        ui.link("← Back to the work orders", "/app").mark("back")
