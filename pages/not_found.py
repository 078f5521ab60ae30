"""Any address no screen answers (`/app/…`, `/work-orders`, a typo, an old bookmark): a 404 inside the
desk's frame, with a way back.

It is the root page given to `ui.run` (main.py), which NiceGUI's 404 handler draws for every address
no route answers; the API keeps its own JSON 404, and NiceGUI's own routes are matched first.
"""

from fastapi import Request
from nicegui import ui

from components.frame import frame
from components.runtime import session


async def unknown_address(request: Request):
    """The 404 page: in the frame when signed in, else the login page first (and this page after it)."""
    user = await session.current_user()
    if user is None:
        return session.to_login(request)
    ui.status_code(404)
    with frame("Page not found", user, path=request.url.path), ui.column().classes("items-start gap-2 p-6"):
        ui.label("There is no page at this address.").classes("text-xl font-semibold").mark("not-found")
        ui.label("The link may be old, or mistyped.").classes("text-grey-7")
        ui.link("← Back to the work orders", "/app").mark("back")
