"""The list of one's notifications: newest first, each linking to its order, with "Mark read" and "Mark all read".

It redraws when the person's notifications change anywhere (a new one; some marked read in another tab).
"""

from nicegui import ui

from components import theme
from components.formats import when
from components.once import one_at_a_time
from components.paging import last_page, pager
from components.runtime import live, session
from desk.db.client import get_db
from desk.notifications import service
from desk.notifications.models import MarkRead, NotificationQuery, NotificationRead

PAGE_SIZE = 25
KIND_ICONS = {"assigned": "assignment_ind", "commented": "chat", "statusChanged": "published_with_changes"}
KIND_ICONS["flagged"] = "flag"


class Inbox:
    def __init__(self, visit: session.Visit) -> None:
        self.visit, self.page_number = visit, 1
        with ui.row().classes("w-full items-center gap-4"):
            theme.page_heading(ui.label("Notifications").classes("text-2xl font-semibold"))
            ui.space()
            self.unread_only = ui.switch("Unread only", on_change=lambda: self.show(first=True)).mark("unread-only")
            marking = one_at_a_time(self.mark_all)
            self.all_read = ui.button("Mark all read", icon="done_all", on_click=marking).props("outline")
            self.all_read.mark("mark-all-read")
        self.list = ui.column().classes("w-full gap-2").mark("notifications")
        self.numbers = pager()
        self.numbers.on_value_change(lambda e: self._to_page(e.value))
        self.redraws = live.Redraws()
        live.on_bell(visit.user_id, self.show)

    async def show(self, *, first: bool = False) -> None:
        if first:
            self.page_number = 1
        query = NotificationQuery(
            unread=bool(self.unread_only.value) or None, offset=(self.page_number - 1) * PAGE_SIZE, limit=PAGE_SIZE
        )
        newest = self.redraws.start()
        actor = await self.visit.actor(touch=False)
        found = await service.page(db=get_db(), actor=actor, query=query)
        if self.visit.gone or not newest():  # a bell's redraw and a click's overlap: an older read answering last
            return  # would show what was just marked read as unread again
        self.list.clear()
        with self.list:
            if not found.items:
                ui.label("Nothing here yet: you will hear when an order you work on or asked for changes.").classes(
                    "text-grey-7"
                ).mark("no-notifications")
            for item in found.items:
                self._row(item)
        self.all_read.set_enabled(found.unread > 0)
        self.numbers.max = last_page(found.total, PAGE_SIZE)
        self.numbers.set_visibility(found.total > PAGE_SIZE)

    def _row(self, item: NotificationRead) -> None:
        card = ui.card().classes("w-full").props("flat bordered").mark("notification")
        with card, ui.row().classes("w-full items-center gap-3 no-wrap"):
            ui.icon(KIND_ICONS[item.kind]).classes("text-primary text-xl")
            with ui.column().classes("gap-0 grow min-w-0"):
                words = ui.link(item.text, f"/app/work-orders/{item.work_order_id}").classes("wrap-anywhere")
                words.classes("text-black no-underline" if item.read else "font-semibold").mark("notification-link")
                ui.label(when(item.created_at)).classes("text-xs text-grey-8")  # AA on an unread row's blue
            if not item.read:
                mark = ui.button("Mark read", on_click=one_at_a_time(lambda i=item.id: self.mark([i])))
                mark.props("flat dense").mark("mark-read", f"read-{item.id}")
        if not item.read:
            card.classes("bg-blue-1")

    async def mark(self, ids: list[str]) -> None:
        await service.mark_read(db=get_db(), actor=await self.visit.actor(), data=MarkRead(ids=ids))
        await self.show()

    async def mark_all(self) -> None:
        await service.mark_read(db=get_db(), actor=await self.visit.actor(), data=MarkRead(all=True))
        await self.show()

    async def _to_page(self, number: int) -> None:
        self.page_number = number
        await self.show()
