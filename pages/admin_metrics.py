"""/app/admin/metrics: the desk at a glance, drawn as charts that follow every change to the work orders.

Filtered by owner and a range of days, kept in the address (`?owner=&since=&until=`, as the list keeps its
own): Back, reload and a bookmark come back to them. A click on a bar or on a day's point opens the list of
those orders (pages/work_orders.py).
"""

from collections.abc import Mapping
from datetime import date
from urllib.parse import urlencode

from fastapi import Request
from nicegui import APIRouter, ui

from components.agents import charts
from components.agents.charts import GRID_TOP, LEGEND, TITLE
from components.paging import address, day_from, left_out_note
from components.runtime import live, session
from components.runtime.page import desk_page
from desk.actors import Actor
from desk.agent.triage import service as triage_service
from desk.config import get_settings
from desk.db.client import get_db
from desk.errors import DeskError
from desk.labels import PRIORITY_LABELS, STATUS_LABELS
from desk.metrics.models import Metrics, MetricsQuery
from desk.metrics.service import DAYS, desk_metrics
from desk.work_orders import service as orders_service
from desk.work_orders.models import PRIORITIES, STATUSES

router = APIRouter()
PATH = "/app/admin/metrics"
# The chips' colours (components/chips.py) as the hex values ECharts needs.
STATUS_HEX = {"pending": "#ff8f00", "in_progress": "#3949ab", "done": "#388e3c", "cancelled": "#616161"}
PRIORITY_HEX = {"low": "#9e9e9e", "medium": "#1e88e5", "high": "#ef6c00", "urgent": "#d32f2f"}
# Two charts side by side from Tailwind's md up; on a phone, one under the other (side by side, each was
# 150 px wide: bars without their names)
PAIR, HALF = "w-full gap-4 max-md:flex-col md:flex-nowrap", "w-full md:w-1/2"


@desk_page(router, PATH, title="Metrics", admin=True, heading=True)
async def admin_metrics_page(visit: session.Visit, me: session.SessionUser, request: Request) -> None:
    owners, _, _ = await orders_service.owner_choices(db=get_db(), actor=me.actor)
    query, left_out = from_address(request.query_params, owners)
    board = MetricsBoard(visit, query)
    board.filters(owners, left_out)
    board.build(await desk_metrics(db=get_db(), actor=me.actor, query=board.query))
    await board.show_agents(me.actor)
    live.on_change(board.on_changes)


FILTER_LABELS = {"owner": "Owner", "since": "From", "until": "To"}


def from_address(params: Mapping[str, str], owners: dict[str, str]) -> tuple[MetricsQuery, list[str]]:
    """The filters an address names, and the labels of those left out as not understood (an owner not on
    the desk, a day that is not one), as the list does."""
    taken = {
        "owner": params.get("owner") if params.get("owner") in owners else None,
        "since": day_from(params.get("since")),
        "until": day_from(params.get("until")),
    }
    left_out = [label for key, label in FILTER_LABELS.items() if params.get(key, "").strip() and taken[key] is None]
    query = MetricsQuery.model_validate({"ownerId": taken["owner"], "since": taken["since"], "until": taken["until"]})
    return query, left_out


BACKWARDS = "Pick a start day on or before the end day."


def _backwards(query: MetricsQuery) -> bool:
    return bool(query.since and query.until and query.until < query.since)


def view_address(query: MetricsQuery) -> str:
    params = [("owner", query.owner_id), ("since", query.since), ("until", query.until)]
    return address(PATH, [(key, str(value)) for key, value in params if value], page=1)


class MetricsBoard:
    """The charts are drawn once; a change to the work orders re-reads the figures and updates them in place."""

    def __init__(self, visit: session.Visit, query: MetricsQuery) -> None:
        self.visit = visit
        self.reading = self.stale = False
        self.query = query

    def filters(self, owners: dict[str, str], left_out: list[str]) -> None:
        """Owner and range of days; any change reads the figures again. `left_out`: what the address named
        that could not be taken, said until the person picks their own filters."""
        note = left_out_note(left_out)
        self.names = owners
        with ui.row().classes("w-full items-end gap-3"):
            shown = self.query
            owner = ui.select(owners, label="Owner", value=shown.owner_id, clearable=True).props("dense")
            owner.classes("w-56").mark("owner")
            since = ui.input("From (UTC day)", value=shown.since.isoformat() if shown.since else "")
            since.props("type=date dense stack-label").classes("w-44").mark("since")
            until = ui.input("To (UTC day)", value=shown.until.isoformat() if shown.until else "")
            until.props("type=date dense stack-label").classes("w-44").mark("until")
            self.problem = ui.label().classes("text-negative text-sm").mark("range-problem")
            if _backwards(shown):  # a link or a bookmark with the days the wrong way round: said as when picked here
                self.problem.set_text(BACKWARDS)
        # The counts are the orders as they are now; only the per-day chart has days to narrow: say so, or a
        # range that leaves the totals alone reads as a filter that did not work.
        ui.label(
            "From and To choose the days of the per-day chart; the counts and the other charts are the orders "
            "as they are now."
        ).classes("text-xs text-grey-7").mark("range-note")

        async def changed() -> None:
            self.problem.set_text("")
            note.set_visibility(False)
            try:
                query = MetricsQuery.model_validate(
                    {"ownerId": owner.value, "since": since.value or None, "until": until.value or None}
                )
            except ValueError:
                query = None
            # the API answers a backwards range with no days; a person picking days is told why instead
            if query is None or _backwards(query):
                self.problem.set_text(BACKWARDS)
                return
            self.query = query
            self.visit.moved_to(view_address(query))  # Back, reload, bookmarks and a new login come back to this view
            await self.on_changes([])

        for element in (owner, since, until):
            element.on_value_change(changed)

    def build(self, figures: Metrics) -> None:
        with ui.row().classes("w-full gap-4 items-stretch"):
            with ui.card().classes("min-w-56 gap-1").mark("total-card"):
                ui.label("Work orders").classes("text-sm text-grey-7")
                self.total = ui.label().classes("text-4xl font-semibold").mark("total")
            with ui.card().classes("min-w-72 gap-1").mark("mean-card"):
                ui.label("Mean time to done").classes("text-sm text-grey-7")
                self.mean = ui.label().classes("text-4xl font-semibold").mark("mean-to-done")
                ui.label("from opening to done, over the orders that are done").classes("text-xs text-grey-7")
            with ui.card().classes("min-w-72 gap-1").mark("overdue-card"):
                ui.label("Overdue, by owner").classes("text-sm text-grey-7")
                self.overdue = ui.column().classes("gap-0").mark("overdue-by-owner")
        with ui.row().classes(PAIR):
            with ui.card().classes(HALF):
                self.by_status = ui.echart(_bars("By status", STATUS_LABELS)).classes("w-full h-64")
                self.by_status.mark("status-chart").on_point_click(
                    lambda e: self.open_list(status=STATUSES[e.data_index])
                )
            with ui.card().classes(HALF):
                self.by_priority = ui.echart(_bars("By priority", PRIORITY_LABELS)).classes("w-full h-64")
                self.by_priority.mark("priority-chart")
                self.by_priority.on_point_click(lambda e: self.open_list(priority=PRIORITIES[e.data_index]))
        with ui.card().classes("w-full"):
            self.per_day = ui.echart(_per_day_chart()).classes("w-full h-72").mark("per-day-chart")
            self.per_day.on_point_click(self._open_day)
            ui.label(
                f"The last {DAYS} days unless From and To are picked. Click a bar, or a day's point on the Opened "
                "line, to see those work orders."
            ).classes("text-xs text-grey-7")
        self.agents = ui.row().classes(PAIR)  # the triage agent's charts, when AI is on
        self.show(figures)

    def open_list(self, **filters: str) -> None:
        """The list of the orders behind a bar or a point, in this board's owner."""
        params = {**filters, **({"owner": self.query.owner_id} if self.query.owner_id else {})}
        ui.navigate.to(f"/app?{urlencode(params)}")

    def _open_day(self, event) -> None:
        if event.series_name != "Opened":  # the list filters by the day an order was opened
            ui.notify("The list shows orders by the day they were opened: click the Opened line.")
            return
        self.open_list(opened=self.days[event.data_index].isoformat())

    def show(self, figures: Metrics) -> None:
        self.days: list[date] = [day.day for day in figures.per_day]
        self.total.set_text(f"{figures.total:,}")
        self.mean.set_text(duration(figures.mean_hours_to_done))
        _set_bars(self.by_status, figures.by_status, STATUS_HEX)
        self._show_overdue(figures.overdue_by_owner)
        _set_bars(self.by_priority, figures.by_priority, PRIORITY_HEX)
        options = self.per_day.options
        options["xAxis"]["data"] = [day.day.strftime("%d %b") for day in figures.per_day]
        options["series"][0]["data"] = [day.opened for day in figures.per_day]
        options["series"][1]["data"] = [day.closed for day in figures.per_day]
        self.per_day.update()

    def _show_overdue(self, counts: dict[str, int]) -> None:
        """Each owner's overdue orders, most first, each a link to that list; names are data, never markup."""
        self.overdue.clear()
        with self.overdue:
            if not counts:
                ui.label("Nothing is overdue.").classes("text-sm").mark("overdue-none")
            for owner, count in sorted(counts.items(), key=lambda item: (-item[1], self._name(item[0]))):
                link = ui.link(
                    f"{self._name(owner)}: {count:,}", f"/app?{urlencode({'due': 'overdue', 'owner': owner})}"
                )
                link.classes("text-sm").mark("overdue-owner")

    def _name(self, owner: str) -> str:
        return "Unassigned (queue)" if owner == "none" else self.names.get(owner, "someone")

    async def show_agents(self, actor: Actor) -> None:
        """Triage volume and acceptance per day, and AI spend per day per scope (desk/agent/triage/service.py)."""
        self.admin = actor
        if not get_settings().ai_enabled:
            return
        if not self.agents.default_slot.children:
            with self.agents:
                with ui.card().classes(HALF):
                    self.triage_chart = ui.echart(charts.triage_chart(DAYS)).classes("w-full h-72")
                    self.triage_chart.mark("triage-chart")
                with ui.card().classes(HALF):
                    self.spend_chart = ui.echart(charts.spend_chart(DAYS)).classes("w-full h-72")
                    self.spend_chart.mark("spend-chart")
        days = await triage_service.per_day(db=get_db(), actor=actor, days=DAYS)
        charts.fill(self.triage_chart, self.spend_chart, days)

    async def on_changes(self, _batch: list[dict]) -> None:
        # Batches arrive every half second while orders change; read once at a time, and once more if needed.
        if self.reading:
            self.stale = True
            return
        self.reading = True
        try:
            while True:
                self.stale = False
                try:  # as the person is now: a demoted admin's page closes instead (not an action: no touch)
                    actor = await self.visit.actor(touch=False)
                    figures = await desk_metrics(db=get_db(), actor=actor, query=self.query)
                except DeskError:
                    return  # no longer an admin: the figures stay as they were, the next page load says why
                self.show(figures)
                await self.show_agents(self.admin)
                if not self.stale:
                    return
        finally:
            self.reading = False


def duration(hours: float | None) -> str:
    """Mean time to done in words a person reads at a glance."""
    if hours is None:
        return "No work order is done yet"
    if hours < 1:
        minutes = round(hours * 60)
        return "under a minute" if minutes < 1 else f"{minutes} minute{'s' if minutes != 1 else ''}"
    if hours < 48:
        return f"{hours:.1f} hours"
    return f"{hours / 24:.1f} days"


def _bars(title: str, labels: dict[str, str]) -> dict:
    return {
        "title": {"text": title, **TITLE},
        "tooltip": {"trigger": "axis"},
        "grid": {"left": 40, "right": 16, "bottom": 44, "top": 48},
        # every bar named, also on a phone (left to itself the chart names every other one when narrow); a name
        # wider than its bar's room breaks onto a second line instead of running into its neighbour's
        "xAxis": {
            "type": "category",
            "data": list(labels.values()),
            "axisLabel": {"interval": 0, "width": 60, "overflow": "break"},
        },
        "yAxis": {"type": "value", "minInterval": 1},
        "series": [{"type": "bar", "name": "Work orders", "data": [], "label": {"show": True, "position": "top"}}],
    }


def _set_bars(chart: ui.echart, counts: dict[str, int], colours: dict[str, str]) -> None:
    # `colours` is in the order of the chart's categories
    data = [{"value": counts.get(key, 0), "itemStyle": {"color": colour}} for key, colour in colours.items()]
    chart.options["series"][0]["data"] = data
    chart.update()


def _per_day_chart() -> dict:
    return {
        "title": {
            "text": "Opened and closed per day (UTC)",  # short: a chart's title does not wrap on a phone
            **TITLE,
        },
        "tooltip": {"trigger": "axis"},
        "legend": {"data": ["Opened", "Closed"], **LEGEND},
        "grid": {"left": 40, "right": 16, "bottom": 32, "top": GRID_TOP},
        "xAxis": {"type": "category", "data": []},
        "yAxis": {"type": "value", "minInterval": 1},
        "series": [  # straight lines: a smoothed count dips below 0 between two days
            {"type": "line", "name": "Opened", "data": [], "itemStyle": {"color": "#1e88e5"}},
            {"type": "line", "name": "Closed", "data": [], "itemStyle": {"color": "#388e3c"}},
        ],
    }
