"""Any address no screen answers: a 404 inside the desk's frame, with a way back.

`/app/…` has a route of its own, included last (pages/__init__.py), so every real screen's route is
matched first. Any other address (`/work-orders`, a typo, an old bookmark) reaches NiceGUI's 404
handler, which draws the root page given to `ui.run` (main.py): the same page, not NiceGUI's bare error.
"""

from fastapi import Request
from nicegui import APIRouter, ui

from components import session
from components.frame import frame

router = APIRouter()


@router.page("/app/{rest:path}")
async def not_found_page(request: Request, rest: str):
    return await unknown_address(request)


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
    return None
