"""Any address no screen answers (`/app/…`, `/work-orders`, a typo, an old bookmark): a 404 inside the
desk's frame, with a way back.

It is the root page given to `ui.run` (main.py), which NiceGUI's 404 handler draws for every address
no route answers; the API keeps its own JSON 404, and NiceGUI's own routes are matched first.
"""

from nicegui import ui

from components import theme
from components.runtime.page import guarded
from components.runtime.session import SessionUser, Visit


@guarded(title="Page not found")
async def unknown_address(visit: Visit, me: SessionUser) -> None:
    """The 404 page: in the frame when signed in, else the login page first (and this page after it)."""
    ui.status_code(404)
    with ui.column().classes("items-start gap-2 p-6"):
        theme.page_heading(
            ui.label("There is no page at this address.").classes("text-xl font-semibold").mark("not-found")
        )
        ui.label("The link may be old, or mistyped.").classes("text-grey-7")
        ui.link("← Back to the work orders", "/app").mark("back")
