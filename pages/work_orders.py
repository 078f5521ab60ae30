"""/app: the work-order list with search, filters, sort, pages and a live view of changes.

The view lives in the address (`/app?q=kit&status=open&sort=title&page=2`): the page reads it when
built and replaces it on every change, so Back from an order, a reload or a bookmark shows the same view.
"""

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import date
from typing import NamedTuple

from fastapi import Request
from nicegui import APIRouter, background_tasks, ui

from components.frame import remember_list_view
from components.paging import address, day_from, last_page, left_out_note, page_from, pager
from components.runtime import live, session
from components.runtime.page import desk_page
from components.work_order import rows
from components.work_order.new_dialog import new_work_order_opener
from components.work_order.rows import OrderRows
from desk.actors import Actor
from desk.db.client import get_db
from desk.labels import PRIORITY_LABELS, STATUS_LABELS
from desk.schema import OffsetPage
from desk.work_orders import permissions, service
from desk.work_orders.models import PRIORITIES, STATUSES, WorkOrderQuery, WorkOrderRead
from desk.zone import desk_zone

router = APIRouter()
PAGE_SIZE = 25
SORTS = {
    "-createdAt": "Newest first",
    "createdAt": "Oldest first",
    "-updatedAt": "Recently updated",
    "-priority": "Most urgent first",
    "title": "Title A–Z",
    "dueAt": "Due soonest first",
}
# Open orders by when they are due, days in the desk's time zone (desk/work_orders/repository.py, due_filter)
DUE_CHOICES = {"overdue": "Overdue", "today": "Due today", "week": "Due in the next 7 days"}


OPEN = "open"  # pending and in progress: what is still to do
STATUS_CHOICES = {OPEN: "Open (pending + in progress)", **STATUS_LABELS}
FILTER_LABELS = {
    "status": "Status",
    "priority": "Priority",
    "owner": "Owner",
    "requester": "Requested by",
    "opened": "Opened on",
    "due": "Due",
    "sort": "Sort",
}
# The time column shows what the list is sorted by: when created for the created and priority sorts.
TIME_COLUMNS = {"-createdAt": "created", "createdAt": "created", "-priority": "created"}


class PeopleChoices(NamedTuple):
    """Names by id: whom the owner and requester filters take from an address, and whom the Owner filter offers."""

    owners: dict[str, str]
    requesters: dict[str, str]
    offered_owners: dict[str, str]  # the queue and those who can own orders: no viewers, nobody deactivated


@dataclass
class Filters:
    q: str = ""
    status: list[str] = field(default_factory=list)  # may hold OPEN
    priority: str | None = None
    owner: str | None = None
    requester: str | None = None  # who asked for the orders
    sort: str = "-createdAt"
    page: int = 1
    opened: str | None = None  # a UTC day, YYYY-MM-DD: the metrics' per-day chart links here
    due: str | None = None  # one of DUE_CHOICES
    left_out: list[str] = field(default_factory=list)  # what the address named that could not be taken

    @classmethod
    def from_params(cls, params, people: PeopleChoices) -> "Filters":
        """The view an address names; what is not understood is left out rather than refused."""
        statuses = [s for s in params.getlist("status") if s in STATUS_CHOICES]
        return cls(
            q=params.get("q", "").strip()[:200],
            status=list(dict.fromkeys(statuses)),
            priority=params.get("priority") if params.get("priority") in PRIORITIES else None,
            owner=params.get("owner") if params.get("owner") in people.owners else None,
            requester=params.get("requester") if params.get("requester") in people.requesters else None,
            sort=params.get("sort") if params.get("sort") in SORTS else "-createdAt",
            page=page_from(params.get("page"), PAGE_SIZE),
            opened=(day.isoformat() if (day := day_from(params.get("opened"))) else None),
            due=params.get("due") if params.get("due") in DUE_CHOICES else None,
        )._leave_out(params)

    def _leave_out(self, params) -> "Filters":
        """Note the filters the address named that this view could not take, by their labels (a colleague's
        link may name a person one cannot filter by: the list must not pass for theirs without a word)."""
        named = {key: [v for v in params.getlist(key) if v.strip()] for key in FILTER_LABELS}
        taken = {"status": self.status, "priority": [self.priority], "owner": [self.owner]}
        taken |= {"requester": [self.requester], "opened": [self.opened], "due": [self.due], "sort": [self.sort]}
        self.left_out = [label for key, label in FILTER_LABELS.items() if any(v not in taken[key] for v in named[key])]
        return self

    def chosen(self) -> tuple:
        """What the filters and sort are (not the page)."""
        return self.q, tuple(self.status), self.priority, self.owner, self.requester, self.sort, self.opened, self.due

    def url(self) -> str:
        """The address of this view; the default view is plain /app."""
        params = [("q", self.q)] if self.q else []
        params += [("status", s) for s in self.status]
        pairs = (
            ("priority", self.priority),
            ("owner", self.owner),
            ("requester", self.requester),
            ("opened", self.opened),
            ("due", self.due),
        )
        params += [(key, value) for key, value in pairs if value]
        params += [("sort", self.sort)] if self.sort != "-createdAt" else []
        return address("/app", params, self.page)

    def statuses(self) -> list[str] | None:
        found = [s for choice in self.status for s in (("pending", "in_progress") if choice == OPEN else (choice,))]
        return [s for s in STATUSES if s in found] or None

    def query(self) -> WorkOrderQuery:
        return WorkOrderQuery.model_validate(
            {
                "q": self.q or None,
                "status": self.statuses(),
                "priority": self.priority,
                "ownerId": self.owner,
                "requesterId": self.requester,
                "opened": self.opened,
                "due": self.due,
                "sort": self.sort,
                "offset": (self.page - 1) * PAGE_SIZE,
                "limit": PAGE_SIZE,
            }
        )


async def _owner_choices(me: session.SessionUser) -> service.OwnerChoices:
    return await service.owner_choices(db=get_db(), actor=me.actor)


@desk_page(router, "/app", title="Work orders", read=_owner_choices, heading=True)  # the filters in the first paint
async def work_orders_page(
    visit: session.Visit, me: session.SessionUser, found: service.OwnerChoices, request: Request
) -> None:
    actor = me.actor
    owners, assignable, _ = found
    people = _people_choices(actor, found)
    filters = Filters.from_params(request.query_params, people)

    with ui.row().classes("w-full items-end gap-3"):
        search = _filter_controls(filters, people, lambda **changes: _set(filters, **changes))
        ui.space()
        if actor.can_write:
            new_order = new_work_order_opener(visit, assignable, lambda _: load())
            ui.button("New work order", icon="add", on_click=new_order).mark("new-order")

    redraws, client = live.Redraws(), ui.context.client
    view = _ListView(actor, owners, filters, on_page=lambda number: _set(filters, page=number))
    ui.timer(0, lambda: remember_list_view(filters.url()), once=True)  # the tab is known once connected

    async def load(change_seq: int | None = None) -> None:
        """Read and show the list: as the person is now after their own action, as loaded for a live redraw
        (a page whose person lost access is closed by the frame's check)."""
        newest = redraws.start()
        reader = actor if change_seq is not None else await visit.actor()
        page = await _list(reader, filters.query(), change_seq)
        if newest() and not client.is_deleted and (last := view.show(page)):  # else a newer load draws
            _set(filters, page=last)  # it was past its last page (an old link, deletions): the last one

    def _set(current: Filters, **changes) -> None:
        if all(getattr(current, key) == value for key, value in changes.items()):
            return  # the view as the address built it: nothing to load again
        for key, value in changes.items():
            setattr(current, key, value)
        visit.moved_to(current.url())  # Back, reload, bookmarks and a new login come back to this view
        remember_list_view(current.url())  # and an order's "All work orders" link
        reload()

    def reload() -> None:
        background_tasks.create(load(), name="work-orders-list")

    async def take(order: WorkOrderRead) -> None:
        if await rows.take(visit, order):
            await load()

    if actor.can_write:
        view.rows.on_take = take

    # The first await of the page, after everything its controls call is defined: a filter changed while the page
    # still builds (a slow database) would find `_set` not there yet.
    view.rows.zone = await desk_zone(get_db())  # whose "today" the due badges mean
    await load()

    def keys(event) -> None:
        if not event.action.keydown or event.modifiers.ctrl or event.modifiers.meta or event.modifiers.alt:
            return
        if event.key == "/":
            search.run_method("focus")
        elif event.key == "n" and actor.can_write:
            new_order()

    ui.keyboard(on_key=keys)

    async def on_changes(batch: list[dict]) -> None:
        if any(
            change["kind"] not in ("commented", "files") and permissions.concerns(actor, change) for change in batch
        ):
            await load(batch[-1]["seq"])

    live.on_change(on_changes)


async def _list(actor: Actor, query: WorkOrderQuery, change_seq: int | None) -> OffsetPage[WorkOrderRead]:
    """Read a page; screens redrawing for the same change, in the same scope and filters, share one read."""

    def read() -> Awaitable[OffsetPage[WorkOrderRead]]:
        return service.list_orders(db=get_db(), actor=actor, query=query)

    if change_seq is None:
        return await read()
    return await live.shared_read(change_seq, (permissions.list_scope(actor), query.model_dump_json()), read)


class _ListView:
    """What stays on screen between loads: the empty note, the count, the rows and the pager."""

    def __init__(self, actor: Actor, owners: dict[str, str], filters: Filters, on_page: Callable[[int], None]) -> None:
        self.actor, self.filters = actor, filters
        self.left_out = left_out_note(filters.left_out)
        self.link = filters.chosen()  # the note is about the link's filters: gone once the person picks their own
        with ui.row().classes("items-baseline gap-3 p-6") as self.nothing:
            self.empty = ui.label().classes("text-grey-7").mark("empty")
            self.clear = ui.link("Clear filters", "/app").mark("clear-filters")  # its address: `show`
        with ui.row().classes("w-full items-center"):
            self.count = ui.label().classes("text-sm text-grey-7").mark("count")
            self.count.props('aria-live="polite"')  # a new order (or one gone) is heard as the count changing
            ui.space()
            self.time_column = ui.label().classes("text-xs text-grey-7 pr-3").mark("time-column")
        self.rows = OrderRows(owners)
        self.pager = pager().mark("pages")
        # set_value in show() also fires this; only a click on another page number loads
        self.pager.on_value_change(lambda e: e.value != filters.page and on_page(e.value))

    def show(self, page: OffsetPage[WorkOrderRead]) -> int | None:
        """Draw `page`; one past the last page of a list that has orders draws nothing and answers that last page."""
        filters = self.filters
        if not page.items and filters.page > (last := last_page(page.total, PAGE_SIZE)):
            return last
        if filters.chosen() != self.link:
            self.left_out.set_visibility(False)
        self.rows.time_field = "created_at" if TIME_COLUMNS.get(filters.sort) == "created" else "updated_at"
        self.time_column.set_text(f"Times: when {TIME_COLUMNS.get(filters.sort, 'last updated')}")
        self.rows.show(page.items)
        self.nothing.set_visibility(not page.items)
        self.count.set_visibility(bool(page.items))
        self.time_column.set_visibility(bool(page.items))  # times of nothing: nothing to say
        if not page.items:
            chosen = (filters.q, filters.status, filters.priority, filters.owner, filters.requester, filters.opened)
            chosen += (filters.due,)
            searching = any(chosen)
            # a fresh page with the same sort: the filter controls are drawn from the address again
            self.clear.props["href"] = Filters(sort=filters.sort).url()
            self.clear.set_visibility(searching)
            self.clear.update()
            text = "Nothing matches these filters." if searching else "No work orders yet."
            if not searching and self.actor.can_write:
                text += " Create the first one with “New work order” (or press n)."
            self.empty.set_text(text)
        first = (filters.page - 1) * PAGE_SIZE + 1
        total = f"{page.total:,}" if page.total_exact else f"{page.total:,}+"
        self.count.set_text(f"{first}–{first + len(page.items) - 1} of {total}")
        last = last_page(page.total, PAGE_SIZE)
        if self.pager.max != last:
            self.pager.max = last
            self.pager.update()
        self.pager.set_value(filters.page)
        self.pager.set_visibility(last > 1)
        return None


def _people_choices(actor: Actor, found: service.OwnerChoices) -> PeopleChoices:
    """Who an order is for, and who asked for it: anyone (admins, viewers) or oneself; as owner, also the queue.
    The Owner filter offers only those who can own orders; a link naming someone else still filters by them."""
    queue = {"none": "Unassigned (queue)"}
    if not permissions.sees_all(actor):
        return PeopleChoices(queue | {actor.id: "Me"}, {actor.id: "Me"}, queue | {actor.id: "Me"})
    return PeopleChoices(queue | found.everyone, found.everyone, queue | found.workers)


def _filter_controls(filters: Filters, people: PeopleChoices, change: Callable[..., None]) -> ui.input:
    """Search, filters and sort, showing the view the address named; returns the search box (for "/")."""
    search = ui.input("Search", value=filters.q, placeholder="Words in title or description")
    search.classes("w-72").mark("search")
    search.props("clearable dense debounce=300")  # the browser sends the words once typing pauses
    search.on_value_change(lambda e: change(page=1, q=(e.value or "").strip()))
    status = ui.select(STATUS_CHOICES, label="Status", multiple=True, clearable=True, value=list(filters.status))
    status.props("dense use-chips").classes("min-w-64").mark("status-filter")
    status.on_value_change(lambda e: change(page=1, status=list(e.value or [])))

    def pick(key: str) -> Callable[[str | None], None]:
        return lambda value: change(page=1, **{key: value})

    # built with their values: setting them afterwards would fire the handler while the page is still being built
    _filter_select(PRIORITY_LABELS, "Priority", "priority-filter", pick("priority"), value=filters.priority)
    offered = people.offered_owners
    if filters.owner and filters.owner not in offered:  # a link naming a viewer or someone deactivated
        offered = offered | {filters.owner: people.owners[filters.owner]}
    _filter_select(offered, "Owner", "owner-filter", pick("owner"), value=filters.owner)
    _filter_select(people.requesters, "Requested by", "requester-filter", pick("requester"), value=filters.requester)
    _filter_select(DUE_CHOICES, "Due", "due-filter", pick("due"), value=filters.due)
    sort = ui.select(SORTS, value=filters.sort, label="Sort").props("dense").classes("w-48").mark("sort")
    sort.on_value_change(lambda e: change(sort=e.value))
    if filters.opened:  # from a metrics chart: say so, and let it go
        day = date.fromisoformat(filters.opened).strftime("%d %b %Y")
        chip = ui.chip(f"Opened on {day} (UTC)", removable=True).props("outline").mark("opened-filter")
        chip.on("remove", lambda: change(page=1, opened=None))
    return search


def _filter_select(options: dict, label: str, marker: str, on_value, value: str | None = None) -> ui.select:
    select = ui.select(options, label=label, clearable=True, value=value).props("dense").classes("min-w-40")
    select.mark(marker)
    select.on_value_change(lambda e: on_value(e.value))
    return select
