"""Who is using a page: the desk session, in its own httpOnly cookie, and the person as they are now.

The session rides on the same cookie as the API's (`desk.http.session_cookie_name`), set by an HTTP
response after a login, never through the websocket: a login always gets a new cookie (no fixation),
the cookie is `Secure` behind https and lasts no longer than the session, and no session secret sits
in NiceGUI's per-browser storage. A page is built for the person its request's cookie names; from
then on its `Visit` answers for them: every handler asks it for the actor as the person is now, and
a session that ended, or a role that changed, closes the page on the server (see `Visit.close`).
"""

import asyncio
import hashlib
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import quote
from uuid import uuid4

from fastapi import Request
from fastapi.responses import RedirectResponse
from nicegui import Client, background_tasks, ui

from desk.actors import Actor, Role
from desk.auth import service as auth_service
from desk.db.client import get_db
from desk.errors import Unauthorized
from desk.http import session_cookie_name, set_session_cookie

if TYPE_CHECKING:  # a type only: drafts is a component of the order page, the session knows no pages
    from components.work_order.drafts import Draft

# One "/" then only the characters RFC 3986 allows in a path and query: no whitespace or control
# character (browsers strip them, so "/\t/evil.example" would go to //evil.example), no backslash.
SAME_SITE_PATH = re.compile(r"/(?!/)(?:[A-Za-z0-9\-._~!$&'()*+,;=:@/?]|%[0-9A-Fa-f]{2})*")
CLOSE_GRACE_SECONDS = 0.5  # the redirect goes out before the page stops answering


class PageClosed(asyncio.CancelledError):
    """The page's person may no longer act: its handler stops here. A CancelledError, so NiceGUI ends the
    handler quietly, like a cancelled task, and no `except Exception` in a handler can swallow it."""


@dataclass(frozen=True, slots=True)
class SessionUser:
    """The person behind a page's session, as the UI shows and acts for them: what a screen needs, and never the
    stored document's password hash, lockout counters or tokens."""

    id: str
    email: str
    name: str
    role: Role
    ai_enabled: bool  # their own switch (the profile's); whether the desk has AI at all is the settings'
    actor: Actor  # the person as services take them

    @property
    def is_admin(self) -> bool:
        return self.actor.is_admin

    @classmethod
    def of(cls, stored: dict) -> "SessionUser":
        """From the user as `auth_service.user_for_session` found them (a person is stored with AI on)."""
        return cls(
            id=str(stored["_id"]),
            email=stored["email"],
            name=stored["name"],
            role=Role(stored["role"]),
            ai_enabled=bool(stored.get("aiEnabled", True)),
            actor=auth_service.actor_for(stored),
        )


async def current_user() -> SessionUser | None:
    """The logged-in person behind this page request's session cookie, or None (page builders only)."""
    secret = _request_secret()
    if not secret:
        return None
    try:
        return SessionUser.of(await auth_service.user_for_session(db=get_db(), secret=secret))
    except Unauthorized:
        return None


@dataclass(eq=False)
class Visit:
    """One open page of one person, in one session: handlers get the actor from here, as the person is now."""

    client: Client
    secret: str
    user_id: str
    role: Role
    address: str  # the page's address now, its query included: where a new login brings the person back
    closing: bool = field(default=False, init=False)
    draft: "Draft | None" = field(default=None, init=False)  # the page's edit form, if it has one (logout asks)

    @property
    def drafts_owner(self) -> str:
        """The session's name in the browser, which tags the drafts typed in it (components/work_order/drafts.py):
        derived one way from the secret, so it neither opens the session nor is the key its stored hash is found by."""
        return hashlib.sha256(f"desk-drafts:{self.secret}".encode()).hexdigest()[:32]

    def moved_to(self, address: str) -> None:
        """The page now shows `address` (a view's filters, say): the browser's, for Back and reload, and ours."""
        ui.navigate.history.replace(address)
        self.address = address

    async def actor(self, *, touch: bool = True) -> Actor:
        """The person as stored now; when they may no longer act on this page, it closes and PageClosed is raised.

        `touch` (a person's own action) keeps the session alive; a background refresh passes False.
        """
        return (await self.user(touch=touch)).actor

    async def user(self, *, touch: bool = True) -> SessionUser:
        """Like `actor`, the person."""
        user, target = await self._now(touch=touch)
        if user is None:
            self.close(target)
            raise PageClosed()
        return user

    async def check(self) -> None:
        """Close the page if its session ended or its person changed (never extends the session: not an action)."""
        user, target = await self._now(touch=False)
        if user is None:
            self.close(target)

    @property
    def gone(self) -> bool:
        """The page is closing or closed; or NiceGUI no longer knows its client (a test's reset clears them all)."""
        return self.closing or self.client.is_deleted or self.client.id not in Client.instances

    async def _now(self, *, touch: bool) -> tuple[SessionUser | None, str]:
        """The person while this page may still act for them, else None and where to send the browser."""
        if self.gone:
            return None, self.address
        try:
            stored = await auth_service.user_for_session(db=get_db(), secret=self.secret, touch=touch)
        except Unauthorized:  # logged out (here or in another tab), deactivated, reset, idle or too old
            return None, f"/login?redirect_to={quote(self.address, safe='')}&reason={ENDED}"
        person = SessionUser.of(stored)
        if person.id != self.user_id or person.role != self.role:
            return None, self.address  # the same page again, built for the role they have now
        return person, self.address

    def tell(self, message: str, **kwargs: Any) -> None:
        """A notification on this page, even when the element whose handler says it is gone: a live redraw
        may replace it (the order's summary, a suggestion card) while the handler's write was being saved."""
        if not self.gone:
            with self.client:
                ui.notify(message, **kwargs)

    def close(self, target: str) -> None:
        """Send the browser to `target`, and stop serving this page whatever the browser does with that."""
        if self.gone:
            return
        self.closing = True
        with self.client:
            ui.run_javascript("window.deskDirty = {}")  # left on the desk's word: no prompt
            ui.navigate.to(target)
        background_tasks.create(self._delete_soon(), name="close a page")

    async def _delete_soon(self) -> None:
        # A browser that obeyed has left: NiceGUI deletes the page itself after its reconnect timeout
        # (deleting it here too would delete it twice). One still connected, or reconnecting, is cut off.
        while not self.client.is_deleted and self.client.id in Client.instances:
            await asyncio.sleep(CLOSE_GRACE_SECONDS)
            if self.client.id in Client.instances and not self.client.is_deleted and self.client.has_socket_connection:
                self.client.delete()  # its elements, timers and live listeners go; its socket's events are dropped


def visit(person: SessionUser, path: str) -> Visit:
    """The Visit of the page being built, for `person` (just read from this request's session)."""
    request = ui.context.client.request
    return Visit(
        client=ui.context.client,
        secret=_request_secret() or "",
        user_id=person.id,
        role=person.role,
        address=_address(request) if request is not None else path,
    )


def _request_secret() -> str | None:
    request = ui.context.client.request
    return request.cookies.get(session_cookie_name()) if request is not None else None


ENDED = "ended"  # the login page's reason: a session this browser had is over


def to_login(request: Request) -> RedirectResponse:
    """Send the person to log in, and back here afterwards."""
    target = _address(request)
    reason = f"&reason={ENDED}" if request.cookies.get(session_cookie_name()) else ""  # it had one: it ended
    return RedirectResponse(f"/login?redirect_to={quote(target, safe='')}{reason}", status_code=303)


def _address(request: Request) -> str:
    """Where `request` went: its path and query, what brings a person back to the same view."""
    return request.url.path + (f"?{request.url.query}" if request.url.query else "")


def safe_target(redirect_to: str | None) -> str:
    """`redirect_to` when it is a plain path on this desk, else /app: never another site (`//evil.example`)."""
    if redirect_to and SAME_SITE_PATH.fullmatch(redirect_to):
        return redirect_to
    return "/app"


async def sign_in(*, email: str, password: str, ip: str, browser: str, redirect_to: str) -> str:
    """Check the password (same rules as the API: lockout, rate limit); returns where to send the browser.

    The session itself is opened by `finish_sign_in`, over HTTP, so that its cookie is new and httpOnly.
    """
    ticket = await auth_service.login_ticket(db=get_db(), email=email, password=password, ip=ip, browser=browser)
    return f"{SIGNED_IN_PATH}?ticket={quote(ticket, safe='')}&redirect_to={quote(safe_target(redirect_to), safe='')}"


SIGNED_IN_PATH = "/login/done"


async def finish_sign_in(request: Request, ticket: str, redirect_to: str | None) -> RedirectResponse:
    """Turn a fresh login ticket of this browser into a session cookie, and go on; a stale one back to login."""
    secret = await auth_service.redeem_login_ticket(db=get_db(), ticket=ticket, browser=browser_of(request))
    target = safe_target(redirect_to)
    if secret is None:
        return RedirectResponse(f"/login?redirect_to={quote(target, safe='')}", status_code=303)
    if "session" in request.scope:  # a new NiceGUI browser id too: nothing planted before the login carries over
        request.session["id"] = str(uuid4())
    response = RedirectResponse(target, status_code=303)
    set_session_cookie(response, secret)
    return response


def browser_of(request: Request) -> str:
    """NiceGUI's id for the browser of this request: a login ticket is good only in the browser that asked for it."""
    return request.scope.get("session", {}).get("id", "")


async def sign_out(visit: Visit) -> None:
    """End this page's session on the server (every tab of it closes within the frame's check)."""
    await auth_service.logout(db=get_db(), secret=visit.secret)  # the service stops their copilot runs too
