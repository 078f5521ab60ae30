"""Who is using this browser: the desk session, kept server-side in NiceGUI's per-browser storage.

Every tab of a browser shares that storage, so logging out in one tab ends the session for all
of them; `frame` notices within a few seconds and sends the other tabs to the login page.
"""

import re
from urllib.parse import quote

from fastapi import Request
from fastapi.responses import RedirectResponse
from nicegui import app

from desk.actors import Actor
from desk.auth import service as auth_service
from desk.db.client import get_db
from desk.errors import Unauthorized

SESSION_KEY = "desk_session"
# One "/" then only the characters RFC 3986 allows in a path and query: no whitespace or control
# character (browsers strip them, so "/\t/evil.example" would go to //evil.example), no backslash.
SAME_SITE_PATH = re.compile(r"/(?!/)(?:[A-Za-z0-9\-._~!$&'()*+,;=:@/?]|%[0-9A-Fa-f]{2})*")


async def current_user() -> dict | None:
    """The logged-in user of this browser, or None (the stored session is dropped once it ended)."""
    secret = app.storage.user.get(SESSION_KEY)
    if not secret:
        return None
    try:
        return await auth_service.user_for_session(db=get_db(), secret=secret)
    except Unauthorized:
        app.storage.user.pop(SESSION_KEY, None)
        return None


def actor_of(user: dict) -> Actor:
    return auth_service.actor_for(user)


def to_login(request: Request) -> RedirectResponse:
    """Send the person to log in, and back here afterwards."""
    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return RedirectResponse(f"/login?redirect_to={quote(target, safe='')}", status_code=303)


def safe_target(redirect_to: str | None) -> str:
    """`redirect_to` when it is a plain path on this desk, else /app: never another site (`//evil.example`)."""
    if redirect_to and SAME_SITE_PATH.fullmatch(redirect_to):
        return redirect_to
    return "/app"


async def sign_in(*, email: str, password: str, ip: str) -> dict:
    """Log in (same rules as the API: lockout, rate limit) and remember the session for this browser."""
    done = await auth_service.login(db=get_db(), email=email, password=password, ip=ip)
    app.storage.user[SESSION_KEY] = done.session_secret
    return done.user


async def sign_out() -> None:
    """End the session on the server and forget it in this browser (every tab)."""
    secret = app.storage.user.pop(SESSION_KEY, None)
    if not secret:
        return
    await auth_service.logout(db=get_db(), secret=secret)  # the service stops their copilot runs too


def session_secret() -> str | None:
    return app.storage.user.get(SESSION_KEY)
