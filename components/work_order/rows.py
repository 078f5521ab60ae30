"""The rows of a work-order list, kept by order id so a live change redraws only what changed.

Every open list hears every change (components/runtime/live.py). Rebuilding all 25 rows on each one cost
about 60 to 90 ms of the web process per screen, which stalls the event loop once a hundred screens are
open; updating the few labels that differ costs a fraction of that, and a row never flickers under
the pointer of the person reading it.
"""

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, time
from zoneinfo import ZoneInfo

from nicegui import ui

from components.chips import PRIORITY_COLORS, STATUS_COLORS, priority_chip, status_chip, text_color
from components.formats import ago, when
from components.once import one_at_a_time
from components.runtime import session
from desk import state
from desk.db.client import get_db
from desk.errors import DeskError
from desk.labels import PRIORITY_LABELS, STATUS_LABELS
from desk.work_orders import service
from desk.work_orders.models import CLOSED, WorkOrderRead, WorkOrderUpdate
from desk.zone import day_in

Take = Callable[[WorkOrderRead], Awaitable[None]]


async def take(visit: session.Visit, order: WorkOrderRead) -> WorkOrderRead | None:
    """ "Assign to me": the person takes the order from the queue; None (and a word why) when they cannot."""
    person = await visit.actor()
    data = WorkOrderUpdate(version=order.version, ownerId=person.id)
    try:
        taken = await service.update(db=get_db(), actor=person, order_id=order.id, data=data)
    except DeskError as error:
        visit.tell(error.message, type="warning")
        return None
    visit.tell(f"“{taken.title}” is yours now.", type="positive")
    return taken


class _Row:
    def __init__(
        self, order: WorkOrderRead, owners: dict[str, str] | None, time_field: str, on_take: Take | None, zone: str
    ):
        self.order, self.zone = order, zone
        # One line on a wide screen, the title wrapping inside it; below md (a phone) the title takes a
        # line of its own above the rest, which would otherwise squeeze it to a letter per line.
        row_classes = "w-full items-center gap-x-3 gap-y-1 px-3 py-2 border-b hover:bg-grey-1 no-wrap max-md:flex-wrap"
        with ui.row().classes(row_classes).mark("order-row") as row:
            self.element = row
            self.priority = priority_chip(order.priority)
            # wrap-anywhere: a long unbroken title wraps instead of widening the page
            title_classes = "grow text-base min-w-0 max-md:basis-full max-md:order-first wrap-anywhere"
            self.title = ui.link(order.title, f"/app/work-orders/{order.id}").classes(title_classes)
            self.title.mark("order-title")
            self.status = status_chip(order.status)
            # Words, not a colour alone: a screen reader reads them, and they stay when colours are not told apart.
            self.overdue = (
                ui.label("Overdue")
                .classes("text-xs text-white font-medium rounded px-2 py-0.5 shrink-0 bg-negative")
                .mark("order-overdue")
            )
            self.due_today = (
                ui.label("Due today")
                .classes("text-xs text-white font-medium rounded px-2 py-0.5 shrink-0 bg-warning")
                .mark("order-due-today")
            )
            self.people: tuple[ui.label, ui.label] | None = None  # who works on it, and who asked
            if owners is not None:  # below the owner, who asked, when someone else did (why it is listed)
                with ui.column().classes("gap-0 w-36 max-md:w-auto shrink-0"):
                    owner = ui.label().classes("text-sm text-grey-8 wrap-anywhere").mark("order-owner")
                    asker = ui.label().classes("text-xs text-grey-7 wrap-anywhere").mark("order-requester")
                    self.people = (owner, asker)
            self.take = None
            if on_take is not None:  # shown on queued orders only, in a column every row keeps: the rows line up
                with ui.element().classes("w-28 max-md:w-auto shrink-0"):
                    self.take = ui.button("Assign to me", on_click=one_at_a_time(lambda: on_take(self.order)))
                    self.take.props("flat dense no-wrap size=sm").mark("assign-to-me")
            with ui.label().classes("text-xs text-grey-7 w-24 max-md:w-auto shrink-0") as self.updated:
                self.updated_tip = ui.tooltip()
        self.show(order, owners, time_field)

    def show(self, order: WorkOrderRead, owners: dict[str, str] | None, time_field: str = "updated_at") -> None:
        """Bring the row up to date; an unchanged text sends nothing (NiceGUI compares before sending)."""
        self.order = order
        self.title.set_text(order.title)
        _set_chip(self.priority, PRIORITY_LABELS[order.priority], PRIORITY_COLORS[order.priority])
        _set_chip(self.status, STATUS_LABELS[order.status], STATUS_COLORS[order.status], text_color(order.status))
        self.show_badge(state.current().clock.now())
        if self.people is not None and owners is not None:
            owner, asker = self.people
            owner.set_text(owners.get(order.owner_id, "—") if order.owner_id else "Unassigned")
            asked_elsewhere = order.requester_id != order.owner_id
            asker.set_text(f"asked by {owners.get(order.requester_id, 'someone')}" if asked_elsewhere else "")
            asker.set_visibility(asked_elsewhere)
        if self.take is not None:
            self.take.set_visibility(order.owner_id is None)
            label = f"Assign “{order.title}” to me"  # 25 rows of "Assign to me" read alike to a screen reader
            if self.take.props.get("aria-label") != label:
                self.take.props["aria-label"] = label
                self.take.update()
        moment = getattr(order, time_field)
        self.updated.set_text(ago(moment))
        self.updated_tip.set_text(when(moment))

    def show_badge(self, now: datetime) -> None:
        badge = due_badge(self.order, now, self.zone)
        self.overdue.set_visibility(badge == "overdue")
        self.due_today.set_visibility(badge == "today")


def due_badge(order: WorkOrderRead, now: datetime, zone: str) -> str | None:
    """ "overdue" (open, past its due moment), "today" (open, due later today in the desk's zone) or None."""
    if order.due_at is None or order.status in CLOSED:
        return None
    if order.due_at < now:
        return "overdue"
    return "today" if day_in(order.due_at, zone) == day_in(now, zone) else None


def next_badge_change(order: WorkOrderRead, now: datetime, zone: str) -> datetime | None:
    """When the order's due badge next changes on its own, time passing: at the start of its due day ("Due today")
    or at its due moment ("Overdue"); None when it will not (no due moment, closed, or overdue already)."""
    if order.due_at is None or order.status in CLOSED or order.due_at < now:
        return None
    day_starts = datetime.combine(day_in(order.due_at, zone), time(), tzinfo=ZoneInfo(zone)).astimezone(UTC)
    return day_starts if day_starts > now else order.due_at


def _set_chip(chip: ui.chip, text: str, color: str, text_color: str = "white") -> None:
    if chip.text != text:
        chip.set_text(text)
        chip.set_background_color(color)
        chip.set_text_color(text_color)
        chip.update()  # a colour change alone does not send the element


class OrderRows:
    """A column of order rows; `show` makes it match a page of orders with as few changes as it can."""

    def __init__(self, owners: dict[str, str] | None, on_take: Take | None = None) -> None:
        self.owners = owners  # None: the owner column is not shown
        self.on_take = on_take  # None: no "Assign to me" (viewers)
        self.rows: dict[str, _Row] = {}
        self.time_field = "updated_at"  # the time each row shows: the one the list is sorted by
        self.zone = "UTC"  # the desk's time zone, whose "today" the due badge means
        self.container = ui.column().classes("w-full gap-0 border rounded").mark("order-list")
        # One timer for the page, at the soonest moment a shown order's due badge changes (the rows are read as of
        # the list's last read): an order turns "Overdue" on screen when it does, not at the next redraw.
        self.timers = ui.element().classes("hidden")  # the timer's place: outside the rows' column, which they order
        self.wake: tuple[datetime, ui.timer] | None = None

    def show(self, orders: list[WorkOrderRead]) -> None:
        wanted = {order.id for order in orders}
        for order_id in [order_id for order_id in self.rows if order_id not in wanted]:
            self.container.remove(self.rows.pop(order_id).element)
        for index, order in enumerate(orders):
            row = self.rows.get(order.id)
            if row is None:
                with self.container:
                    row = self.rows[order.id] = _Row(order, self.owners, self.time_field, self.on_take, self.zone)
            else:
                row.show(order, self.owners, self.time_field)
            if self.container.default_slot.children.index(row.element) != index:
                row.element.move(target_index=index)
        self.container.set_visibility(bool(orders))
        self._wake_at_next_badge_change()

    def _wake_at_next_badge_change(self) -> None:
        clock = state.current().clock  # the Desk's, as the badges read it: a test moves it past a due moment
        now = clock.now()
        moments = [m for row in self.rows.values() if (m := next_badge_change(row.order, now, self.zone))]
        soonest = min(moments, default=None)
        if self.wake is not None and self.wake[0] == soonest:
            return
        if self.wake is not None:
            self.wake[1].delete()  # cancels it
            self.wake = None
        if soonest is not None and not self.timers.is_deleted:
            with self.timers:
                # a moment past by a millisecond: the badges are read at or after it (an early wake-up sets another)
                delay = (soonest - now).total_seconds() + 0.001
                self.wake = (soonest, ui.timer(delay, self._badges_due, once=True))

    def _badges_due(self) -> None:
        self.wake = None
        now = state.current().clock.now()
        for row in self.rows.values():
            row.show_badge(now)
        self._wake_at_next_badge_change()
