"""/api/v1/notifications (your bell), /api/v1/auth/me/notifications (your switches), the desk's defaults, and the
one-click unsubscribe link every email carries."""

from typing import Annotated

from fastapi import APIRouter, Query, Response
from fastapi.responses import HTMLResponse

from desk.errors import ErrorCode
from desk.http import AUTHED, CurrentActor, Db, errors
from desk.notifications import service
from desk.notifications.models import (
    MarkRead,
    NotificationPage,
    NotificationQuery,
    Preferences,
    PreferencesUpdate,
    Unread,
    Unsubscribed,
)

router = APIRouter(tags=["notifications"])


@router.get("/api/v1/notifications", response_model=NotificationPage, responses=errors(*AUTHED))
async def list_notifications(
    db: Db, actor: CurrentActor, query: Annotated[NotificationQuery, Query()]
) -> NotificationPage:
    """Your notifications, newest first (`unread=true`: only those not read yet), with the unread count."""
    return await service.page(db=db, actor=actor, query=query)


@router.post("/api/v1/notifications/read", response_model=Unread, responses=errors(*AUTHED))
async def mark_read(body: MarkRead, db: Db, actor: CurrentActor) -> Unread:
    """Mark some of your notifications read (`ids`), or all of them (`all: true`); returns how many are unread."""
    return Unread(unread=await service.mark_read(db=db, actor=actor, data=body))


@router.get("/api/v1/auth/me/notifications", response_model=Preferences, responses=errors(*AUTHED))
async def my_preferences(db: Db, actor: CurrentActor) -> Preferences:
    """Which kinds of notification reach you, by email and in the desk."""
    return await service.get_preferences(db=db, actor=actor)


@router.patch("/api/v1/auth/me/notifications", response_model=Preferences, responses=errors(*AUTHED))
async def change_my_preferences(body: PreferencesUpdate, db: Db, actor: CurrentActor) -> Preferences:
    """Change some of your switches; those left out stay as they are."""
    return await service.update_preferences(db=db, actor=actor, data=body)


@router.get("/api/v1/admin/notifications/defaults", response_model=Preferences, responses=errors(*AUTHED))
async def desk_defaults(db: Db, actor: CurrentActor) -> Preferences:
    """The switches of everyone who has not set their own (admins)."""
    return await service.get_desk_defaults(db=db, actor=actor)


@router.patch("/api/v1/admin/notifications/defaults", response_model=Preferences, responses=errors(*AUTHED))
async def change_desk_defaults(body: PreferencesUpdate, db: Db, actor: CurrentActor) -> Preferences:
    """Change some of the desk's default switches (admins)."""
    return await service.update_desk_defaults(db=db, actor=actor, data=body)


UNSUBSCRIBE = "/api/v1/notifications/unsubscribe/{token}"


@router.post(UNSUBSCRIBE, response_model=Unsubscribed, responses=errors(ErrorCode.NOT_FOUND))
async def unsubscribe(token: str, db: Db) -> Unsubscribed:
    """RFC 8058 one-click unsubscribe, with no login: the signed token names the person and the kinds of email."""
    return Unsubscribed(kinds=await service.unsubscribe_by_token(db=db, token=token))


# A person who clicks the link in the email's text lands here: a GET must change nothing (mail scanners fetch
# links), so it offers the button that POSTs.
CONFIRM = """<!doctype html><html><head><meta charset="utf-8"><title>Stop these emails · Work Order Desk</title></head>
<body style="font-family: sans-serif; max-width: 32rem; margin: 3rem auto">
<h1>Stop these emails?</h1><p>You will no longer get this kind of email from the Work Order Desk. You can turn it
back on from your profile.</p><form method="post"><button type="submit">Stop these emails</button></form>
</body></html>"""


PAGE = {200: {"description": "The page with the button", "content": {"text/html": {"schema": {"type": "string"}}}}}


# response_class Response (no media type of its own): the errors stay documented as JSON, the page as HTML
@router.get(UNSUBSCRIBE, response_class=Response, responses=PAGE | errors())
async def unsubscribe_page(token: str) -> Response:
    """The page the link in an email's text opens: a button that POSTs here (a GET changes nothing)."""
    return HTMLResponse(CONFIRM)
