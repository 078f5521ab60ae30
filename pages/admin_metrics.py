"""/app/admin/metrics: the desk at a glance, drawn as charts that follow every change to the work orders."""

from fastapi import Request
from nicegui import APIRouter, ui

from components import agent_charts, live, session
from components.chips import PRIORITY_LABELS, STATUS_LABELS
from components.forbidden import forbidden
from components.frame import frame
from desk.actors import Actor
from desk.agent.triage import service as triage_service
from desk.config import get_settings
from desk.db.client import get_db
from desk.errors import DeskError
from desk.metrics.models import Metrics
from desk.metrics.service import DAYS, desk_metrics

router = APIRouter()
# The chips' colours (components/chips.py) as the hex values ECharts needs.
STATUS_HEX = {"pending": "#ff8f00", "in_progress": "#3949ab", "done": "#388e3c", "cancelled": "#616161"}
PRIORITY_HEX = {"low": "#9e9e9e", "medium": "#1e88e5", "high": "#ef6c00", "urgent": "#d32f2f"}


@router.page("/app/admin/metrics")
async def admin_metrics_page(request: Request):
    user = await session.current_user()
    if user is None:
        return session.to_login(request)
    actor = session.actor_of(user)
    with frame("Metrics", user, path="/app/admin/metrics") as visit:
        if not actor.is_admin:
            forbidden()
            return
        board = MetricsBoard(visit)
        board.build(await desk_metrics(db=get_db(), actor=actor))
        await board.show_agents(actor)
    live.on_change(board.on_changes)


class MetricsBoard:
    """The charts are drawn once; a change to the work orders re-reads the figures and updates them in place."""

    def __init__(self, visit: session.Visit) -> None:
        self.visit = visit
        self.reading = self.stale = False

    def build(self, figures: Metrics) -> None:
        with ui.row().classes("w-full gap-4 items-stretch"):
            with ui.card().classes("min-w-56 gap-1").mark("total-card"):
                ui.label("Work orders").classes("text-sm text-grey-7")
                self.total = ui.label().classes("text-4xl font-semibold").mark("total")
            with ui.card().classes("min-w-72 gap-1").mark("mean-card"):
                ui.label("Mean time to done").classes("text-sm text-grey-7")
                self.mean = ui.label().classes("text-4xl font-semibold").mark("mean-to-done")
                ui.label("from opening to done, over the orders that are done").classes("text-xs text-grey-7")
        with ui.row().classes("w-full gap-4 no-wrap"):
            with ui.card().classes("w-1/2"):
                self.by_status = ui.echart(_bars("By status", STATUS_LABELS)).classes("w-full h-64")
                self.by_status.mark("status-chart")
            with ui.card().classes("w-1/2"):
                self.by_priority = ui.echart(_bars("By priority", PRIORITY_LABELS)).classes("w-full h-64")
                self.by_priority.mark("priority-chart")
        with ui.card().classes("w-full"):
            self.per_day = ui.echart(_per_day_chart()).classes("w-full h-72").mark("per-day-chart")
        self.agents = ui.row().classes("w-full gap-4 no-wrap")  # the triage agent's charts, when AI is on
        self.show(figures)

    def show(self, figures: Metrics) -> None:
        self.total.set_text(f"{figures.total:,}")
        self.mean.set_text(duration(figures.mean_hours_to_done))
        _set_bars(self.by_status, figures.by_status, STATUS_HEX)
        _set_bars(self.by_priority, figures.by_priority, PRIORITY_HEX)
        options = self.per_day.options
        options["xAxis"]["data"] = [day.day.strftime("%d %b") for day in figures.per_day]
        options["series"][0]["data"] = [day.opened for day in figures.per_day]
        options["series"][1]["data"] = [day.closed for day in figures.per_day]
        self.per_day.update()

    async def show_agents(self, actor: Actor) -> None:
        """Triage volume and acceptance per day, and AI spend per day per scope (desk/agent/triage/service.py)."""
        self.admin = actor
        if not get_settings().ai_enabled:
            return
        if not self.agents.default_slot.children:
            with self.agents:
                with ui.card().classes("w-1/2"):
                    self.triage_chart = ui.echart(agent_charts.triage_chart(DAYS)).classes("w-full h-72")
                    self.triage_chart.mark("triage-chart")
                with ui.card().classes("w-1/2"):
                    self.spend_chart = ui.echart(agent_charts.spend_chart(DAYS)).classes("w-full h-72")
                    self.spend_chart.mark("spend-chart")
        days = await triage_service.per_day(db=get_db(), actor=actor, days=DAYS)
        agent_charts.fill(self.triage_chart, self.spend_chart, days)

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
                    figures = await desk_metrics(db=get_db(), actor=await self.visit.actor(touch=False))
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
        "title": {"text": title, "textStyle": {"fontSize": 14}},
        "tooltip": {"trigger": "axis"},
        "grid": {"left": 40, "right": 16, "bottom": 32, "top": 48},
        "xAxis": {"type": "category", "data": list(labels.values())},
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
        "title": {"text": f"Opened and closed per day, last {DAYS} days (UTC)", "textStyle": {"fontSize": 14}},
        "tooltip": {"trigger": "axis"},
        "legend": {"data": ["Opened", "Closed"], "right": 16},
        "grid": {"left": 40, "right": 16, "bottom": 32, "top": 56},
        "xAxis": {"type": "category", "data": []},
        "yAxis": {"type": "value", "minInterval": 1},
        "series": [
            {"type": "line", "name": "Opened", "data": [], "smooth": True, "itemStyle": {"color": "#1e88e5"}},
            {"type": "line", "name": "Closed", "data": [], "smooth": True, "itemStyle": {"color": "#388e3c"}},
        ],
    }
