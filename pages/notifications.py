"""/app/notifications: what happened to the orders one works on or asked for, newest first."""

from nicegui import APIRouter

from components.notifications.inbox import Inbox
from components.runtime import session
from components.runtime.page import desk_page

router = APIRouter()


@desk_page(router, "/app/notifications", title="Notifications")
async def notifications_page(visit: session.Visit, me: session.SessionUser) -> None:
    await Inbox(visit).show()
