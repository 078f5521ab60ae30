"""`@desk_page`: the one guard every screen of the desk passes before it draws anything.

A visit without a session goes to the login page, which brings the person back to the same address
afterwards; a signed-in one gets the frame (header, navigation, the session check) and, on an admin
screen, a refusal inside it when the person is not an admin. Only then does the page's own body run,
given the page's `Visit` and the person as `SessionUser`.

The page is served at the first await after the frame opens (its drafts script waits for the socket), so
what must be in the first paint can be read before the frame (`read`): a work order's form is.
"""

import inspect
from collections.abc import Awaitable, Callable
from functools import wraps

from fastapi import Request
from nicegui import APIRouter

from components import theme
from components.forbidden import forbidden
from components.frame import frame
from components.runtime import session
from desk.agent.core import switch
from desk.config import get_settings
from desk.db.client import get_db

Body = Callable[..., Awaitable[None]]  # (visit, me, [found], **the route's parameters and `request`, as it names them)
Read = Callable[..., Awaitable[object]]  # (me, **the route's parameters): what the body gets as `found`
GIVEN = ("visit", "me", "found")  # what the guard gives the body; the rest of its parameters are the route's


def desk_page(
    router: APIRouter,
    path: str,
    *,
    title: str,
    admin: bool = False,
    read: Read | None = None,
    heading: bool = False,
) -> Callable[[Body], Body]:
    """Register the page body below as `path` on `router`, behind the guard (`guarded`); `heading`: the page
    shows no title of its own, and `title` is its level-one heading for a screen reader."""

    def register(body: Body) -> Body:
        return router.page(path)(guarded(title=title, admin=admin, read=read, heading=heading)(body))

    return register


def guarded(
    *, title: str, admin: bool = False, read: Read | None = None, heading: bool = False
) -> Callable[[Body], Callable[..., Awaitable[object]]]:
    """The body behind the guard, as a NiceGUI page function (for a router, or as `ui.run`'s root page).

    `title` is the tab's until the body names a better one (`frame.retitle`); `admin` refuses anyone else;
    `read(me, **route)`, awaited before the frame opens, is given to the body as `found`.
    """

    def wrap(body: Body) -> Callable[..., Awaitable[object]]:
        route_params = [p for name, p in inspect.signature(body).parameters.items() if name not in GIVEN]
        wants_request = any(p.name == "request" for p in route_params)

        @wraps(body)
        async def page(request: Request, **route: object) -> object:
            me = await session.current_user()
            if me is None:
                return session.to_login(request)
            given = {"request": request} if wants_request else {}
            if read is not None and (not admin or me.is_admin):
                given["found"] = await read(me, **route)
            if get_settings().ai_enabled:  # the frame's assistant goes by the AI switch as kept: at most a second old
                await switch.current(get_db())
            with frame(title, me, path=request.url.path) as visit:
                if admin and not me.is_admin:
                    forbidden()
                    return None
                if heading:
                    theme.unseen_heading(title)
                await body(visit, me, **route, **given)
            return None

        # NiceGUI and FastAPI read the route's parameters from the signature: the body's, less what the guard gives
        request = inspect.Parameter("request", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=Request)
        page.__signature__ = inspect.Signature([request, *(p for p in route_params if p.name != "request")])
        return page

    return wrap
