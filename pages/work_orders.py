"""/app: the work-order list with search, filters, sort, pages and a live view of changes."""

from collections.abc import Callable
from dataclasses import dataclass

from fastapi import Request
from nicegui import APIRouter, ui

from components import live, session
from components.chips import PRIORITY_LABELS, STATUS_LABELS, priority_chip, status_chip
from components.formats import ago, when
from components.frame import frame
from components.work_order_dialog import new_work_order_dialog
from desk.actors import Actor
from desk.db.client import get_db
from desk.schema import MAX_LIMIT, MAX_OFFSET, OffsetPage, PageQuery
from desk.users import service as users_service
from desk.work_orders import service
from desk.work_orders.models import WorkOrderQuery, WorkOrderRead

router = APIRouter()
PAGE_SIZE = 25
SORTS = {
    "-createdAt": "Newest first",
    "createdAt": "Oldest first",
    "-updatedAt": "Recently updated",
    "-priority": "Most urgent first",
    "title": "Title A–Z",
}


@dataclass
class Filters:
    q: str = ""
    status: str | None = None
    priority: str | None = None
    owner: str | None = None
    sort: str = "-createdAt"
    page: int = 1

    def query(self) -> WorkOrderQuery:
        return WorkOrderQuery.model_validate(
            {
                "q": self.q or None,
                "status": self.status,
                "priority": self.priority,
                "ownerId": self.owner,
                "sort": self.sort,
                "offset": (self.page - 1) * PAGE_SIZE,
                "limit": PAGE_SIZE,
            }
        )


@router.page("/app")
async def work_orders_page(request: Request):
    user = await session.current_user()
    if user is None:
        return session.to_login(request)
    actor = session.actor_of(user)
    owners = await _owner_names(actor)
    filters = Filters()

    with frame("Work orders", user, path="/app"):
        with ui.row().classes("w-full items-end gap-3"):
            search = ui.input("Search", placeholder="Words in title or description").classes("w-72").mark("search")
            search.props("clearable dense debounce=300")  # the browser sends the words once typing pauses
            search.on_value_change(lambda e: _set(filters, page=1, q=(e.value or "").strip()))
            _filter_select(STATUS_LABELS, "Status", "status-filter", lambda v: _set(filters, page=1, status=v))
            _filter_select(PRIORITY_LABELS, "Priority", "priority-filter", lambda v: _set(filters, page=1, priority=v))
            if actor.is_admin:
                _filter_select(owners, "Owner", "owner-filter", lambda v: _set(filters, page=1, owner=v))
            sort = ui.select(SORTS, value=filters.sort, label="Sort").props("dense").classes("w-48").mark("sort")
            sort.on_value_change(lambda e: _set(filters, sort=e.value))
            ui.space()
            if actor.can_write:
                dialog = new_work_order_dialog(actor, owners, lambda _: orders.refresh())
                ui.button("New work order", icon="add", on_click=dialog.open).mark("new-order")

        latest, client = 0, ui.context.client

        @ui.refreshable
        async def orders() -> None:
            nonlocal latest
            latest += 1
            mine = latest
            page = await service.list_orders(db=get_db(), actor=actor, query=filters.query())
            if mine == latest and not client.is_deleted:  # a newer refresh started meanwhile: let it draw
                _orders_view(page, actor, filters, owners, lambda number: _set(filters, page=number))

        def _set(current: Filters, **changes) -> None:
            for key, value in changes.items():
                setattr(current, key, value)
            orders.refresh()

        await orders()

    def keys(event) -> None:
        if not event.action.keydown or event.modifiers.ctrl or event.modifiers.meta or event.modifiers.alt:
            return
        if event.key == "/":
            search.run_method("focus")
        elif event.key == "n" and actor.can_write:
            dialog.open()

    ui.keyboard(on_key=keys)

    def on_changes(batch: list[dict]) -> None:
        if actor.is_admin or any(actor.id in change["owners"] for change in batch):
            orders.refresh()

    live.on_change(on_changes)


def _filter_select(options: dict, label: str, marker: str, on_value) -> ui.select:
    select = ui.select(options, label=label, clearable=True).props("dense").classes("w-40").mark(marker)
    select.on_value_change(lambda e: on_value(e.value))
    return select


def _orders_view(
    page: OffsetPage[WorkOrderRead],
    actor: Actor,
    filters: Filters,
    owners: dict[str, str],
    on_page: Callable[[int], None],
) -> None:
    if not page.items:
        searching = filters.q or filters.status or filters.priority or filters.owner
        text = "Nothing matches these filters." if searching else "No work orders yet."
        if not searching and actor.can_write:
            text += " Create the first one with “New work order” (or press n)."
        ui.label(text).classes("text-grey-7 p-6").mark("empty")
        return
    first = (filters.page - 1) * PAGE_SIZE + 1
    total = f"{page.total:,}" if page.total_exact else f"{page.total:,}+"
    ui.label(f"{first}–{first + len(page.items) - 1} of {total}").classes("text-sm text-grey-7").mark("count")
    with ui.column().classes("w-full gap-0 border rounded"):
        for order in page.items:
            with ui.row().classes("w-full items-center gap-3 px-3 py-2 border-b hover:bg-grey-1").mark("order-row"):
                priority_chip(order.priority)
                ui.link(order.title, f"/app/work-orders/{order.id}").classes("grow text-base").mark("order-title")
                status_chip(order.status)
                if actor.is_admin:
                    ui.label(owners.get(order.owner_id, "—")).classes("text-sm text-grey-8 w-36")
                ui.label(ago(order.updated_at)).classes("text-xs text-grey-7 w-24").tooltip(when(order.updated_at))
    pages = max(1, -(-page.total // PAGE_SIZE))
    if pages > 1:
        last = min(pages, MAX_OFFSET // PAGE_SIZE + 1)  # deeper pages: narrow the filters instead
        pager = ui.pagination(1, last, direction_links=True, value=filters.page).mark("pages")
        pager.on_value_change(lambda e: on_page(e.value))


async def _owner_names(actor: Actor) -> dict[str, str]:
    """People an admin can filter by or give orders to (the first 100 is plenty for one desk)."""
    if not actor.is_admin:
        return {}
    users = await users_service.list_users(db=get_db(), actor=actor, page=PageQuery(limit=MAX_LIMIT))
    return {u.id: u.name for u in users.items}
