"""The bell in the header: how many of one's notifications are unread, kept current in every tab and web process.

Every change to a person's notifications (a new one, some marked read) lands in the change feed as "notified"; the
web runtime's poller hands it to this person's bells alone (topic "bell"), so a bell reads its count only when it
moved, and the cost does not grow with the tabs open.
"""

from nicegui import ui

from components.runtime import live
from components.runtime.session import SessionUser
from desk.db.client import get_db
from desk.notifications import service

PAGE = "/app/notifications"
MOST = 99  # more reads as "99+": the badge stays small


class Bell:
    def __init__(self, me: SessionUser) -> None:
        self.actor = me.actor  # only ever its own id is read: the frame's session check closes a page gone stale
        self.button = ui.button(icon="notifications", on_click=lambda: ui.navigate.to(PAGE))
        self.button.props("flat round color=white").mark("bell")
        self.button.props["aria-label"] = "Notifications"
        with self.button:
            self.badge = ui.badge("", color="negative").props("floating rounded").mark("bell-count")
        self.badge.set_visibility(False)
        ui.timer(0, self.show, once=True)
        live.on_bell(me.actor.id, self.show)

    async def show(self) -> None:
        count = await service.unread(db=get_db(), actor=self.actor)
        if self.button.is_deleted:
            return
        self.badge.set_text(str(count) if count <= MOST else f"{MOST}+")
        self.badge.set_visibility(count > 0)
        self.button.props["aria-label"] = f"Notifications, {count} unread" if count else "Notifications"
        self.button.update()
