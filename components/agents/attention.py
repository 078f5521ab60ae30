"""The triage agent's "Needs attention" list: flagged suggestions on open work orders, newest first, a page at a
time (a backlog triaged after an outage can flag more than a screen holds)."""

from nicegui import ui

from components.chips import priority_chip
from components.formats import ago, when
from components.paging import last_page, pager
from desk.actors import Actor
from desk.agent.triage import service as triage
from desk.db.client import get_db

PAGE = 25  # flagged orders a page


class AttentionList:
    def __init__(self, actor: Actor) -> None:
        self.actor = actor  # the re-reads' (the frame's own check closes the page of someone no longer admin)
        ui.label("Needs attention").classes("text-lg font-semibold mt-2")
        ui.label("Flagged suggestions on open work orders, newest first.").classes("text-sm text-grey-7")
        self.area = ui.column().classes("w-full gap-0 border rounded").mark("attention")
        self.numbers = ui.column().classes("w-full")
        self.page = 1  # kept across the live redraws

    async def show(self) -> None:
        found = await triage.attention(db=get_db(), actor=self.actor, offset=(self.page - 1) * PAGE, limit=PAGE)
        if not found.items and self.page > 1:  # decided or closed meanwhile: the pages behind are gone
            self.page = last_page(found.total, PAGE)
            found = await triage.attention(db=get_db(), actor=self.actor, offset=(self.page - 1) * PAGE, limit=PAGE)
        self.area.clear()
        with self.area:
            if not found.items:
                ui.label("Nothing flagged right now.").classes("text-grey-7 p-3").mark("attention-empty")
            for item in found.items:
                # a phone: the badges, then the order and its summary on the full width
                row = ui.row().classes("w-full items-center gap-x-3 gap-y-1 px-3 py-2 border-b")
                row.classes("no-wrap max-md:flex-wrap")
                with row.mark("attention-row"):
                    ui.badge("Flagged", color="red-7")
                    priority_chip(item.suggestion.suggested_priority)
                    with ui.column().classes("gap-0 grow min-w-0 max-md:order-last max-md:w-full"):
                        link = ui.link(item.order.title, f"/app/work-orders/{item.order.id}")
                        link.classes("wrap-anywhere").mark("attention-order")
                        ui.label(item.suggestion.summary).classes("text-sm text-grey-8 wrap-anywhere")
                    ui.label(ago(item.suggestion.created_at)).classes("text-xs text-grey-7 w-24").tooltip(
                        when(item.suggestion.created_at)
                    )
        self.numbers.clear()
        pages = last_page(found.total, PAGE)
        if pages > 1:
            with self.numbers:
                pager(pages, self.page).mark("attention-pages").on_value_change(lambda e: self._go(e.value))

    async def _go(self, page: int) -> None:
        self.page = page
        await self.show()
