"""The head of an order's page (its title, chips, who works on it, version) and its timeline, each redrawn in
place from the order as it is now."""

from collections.abc import Awaitable, Callable

from nicegui import ui

from components import theme
from components.chips import priority_chip, status_chip
from components.formats import when
from components.frame import retitle
from components.runtime import live, session
from components.work_order.assignment import assignment
from components.work_order.changes import owner_values
from components.work_order.rows import due_badge
from components.work_order.timeline import timeline
from desk import state
from desk.actors import Actor
from desk.attachments import service as attachments
from desk.db.client import get_db
from desk.errors import NotFound
from desk.users import service as users_service
from desk.work_orders import service
from desk.work_orders.models import TIMELINE_PAGE, ActivityRead, WorkOrderRead


async def show_summary(
    into: ui.element,
    visit: session.Visit,
    actor: Actor,
    order: WorkOrderRead,
    *,
    assigned: Callable[[WorkOrderRead], Awaitable[None]],
    unsaved: Callable[[], bool],
) -> None:
    into.clear()
    with into:
        theme.page_heading(ui.label(order.title).classes("text-2xl font-semibold wrap-anywhere").mark("detail-title"))
        retitle(order.title)  # a live rename renames the tab too
        with ui.row().classes("items-center gap-2"):
            priority_chip(order.priority)
            status_chip(order.status)
            await assignment(visit, actor, order, on_changed=assigned, unsaved=unsaved)
            ui.label(f"Created {when(order.created_at)} · version {order.version}").classes("text-sm text-grey-7")
            if order.due_at is not None:  # for everyone who reads the order, viewers too (the form is not theirs)
                late = due_badge(order, state.current().clock.now(), "UTC") == "overdue"  # "overdue" needs no zone
                due = ui.label(f"Due by {when(order.due_at)}" + (" · Overdue" if late else ""))
                due.classes("text-sm text-negative font-medium" if late else "text-sm text-grey-7").mark("detail-due")


class History:
    """The order's timeline, newest first, a page at a time ("Show older entries" adds one)."""

    def __init__(self, order_id: str) -> None:
        self.order_id, self.pages = order_id, 1
        self.redraws = live.Redraws()
        self.area = ui.column().classes("w-full")

    async def show(self, actor: Actor) -> None:
        self.actor = actor  # for "Show older entries"
        newest = self.redraws.start()
        entries, older = await self._read(actor)
        names = await users_service.display_names(
            db=get_db(), user_ids={e.actor_id for e in entries} | {str(v) for e in entries for v in owner_values(e)}
        )
        pictures = await self._pictures(actor) if any(e.action == "attached" for e in entries) else set()
        if not newest():  # two comments in quick succession: the redraw for the first may answer last
            return  # and would hide the second; the newer redraw, which read after both, draws
        self.area.clear()  # only now, after the reads: a live change drawing meanwhile must not draw it twice
        with self.area:
            timeline(entries, names, pictures=pictures)
            if older:
                ui.button("Show older entries", on_click=self._older).props("flat").mark("timeline-older")

    async def _read(self, actor: Actor) -> tuple[list[ActivityRead], bool]:
        """The entries on screen, newest first, and whether older ones are left (one more is read to know)."""
        shown = self.pages * TIMELINE_PAGE
        try:
            read = await service.activity(db=get_db(), actor=actor, order_id=self.order_id, limit=shown + 1)
        except NotFound:
            return [], False
        return read[:shown], len(read) > shown

    async def _pictures(self, actor: Actor) -> set[str]:
        """The ids of the order's files that have a thumbnail: their timeline entries show it."""
        try:
            files = await attachments.of_order(db=get_db(), actor=actor, order_id=self.order_id)
        except NotFound:
            return set()
        return {file.id for file in files if file.has_thumbnail}

    async def _older(self) -> None:
        self.pages += 1
        await self.show(self.actor)
