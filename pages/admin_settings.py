"""/app/admin/settings: what the desk does for everyone who has not chosen for themselves (admins)."""

from nicegui import APIRouter, ui

from components import theme
from components.notifications.switches import switches_card
from components.runtime import session
from components.runtime.page import desk_page
from desk.config import get_settings
from desk.db.client import get_db
from desk.notifications import service
from desk.notifications.models import Preferences, PreferencesUpdate

router = APIRouter()


@desk_page(router, "/app/admin/settings", title="Settings", admin=True)
async def settings_page(visit: session.Visit, me: session.SessionUser) -> None:
    async def save(change: PreferencesUpdate) -> Preferences:
        return await service.update_desk_defaults(db=get_db(), actor=await visit.actor(), data=change)

    theme.page_heading(ui.label("Desk settings").classes("text-2xl font-semibold"))
    current = await service.get_desk_defaults(db=get_db(), actor=me.actor)
    blurb = "What people hear about until they choose on their profile; their own choices stay theirs."
    mail = get_settings().mail_enabled
    switches_card("Notification defaults", blurb, current, save, admin=True, mail_enabled=mail, marker="desk-notify")
