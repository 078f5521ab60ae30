"""The triage agent's charts on the metrics page: volume and acceptance per day, AI spend per day per scope."""

from nicegui import ui

from desk.agent.triage.service import TriageDay

SCOPES = {"agent:triage": "Triage agent", "global": "Whole desk"}  # copilot turns are billed to people and global
SCOPE_HEX = {"agent:triage": "#8e24aa", "global": "#616161"}
# Every chart: its title on the first line at the left, the legend on a line of its own below it, the plot under both.
TITLE = {"left": 8, "top": 4, "textStyle": {"fontSize": 14}}
LEGEND = {"left": 8, "top": 30}
GRID_TOP = 72


def triage_chart(days: int) -> dict:
    """Days of the desk's time zone (the triage policy's), as the service counts them and the ledger bills."""
    return {
        "title": {"text": f"Triage per day, last {days} days", **TITLE},
        "tooltip": {"trigger": "axis"},
        "legend": {"data": ["Suggested", "Accepted", "Dismissed", "Acceptance %"], **LEGEND},
        "grid": {"left": 40, "right": 48, "bottom": 32, "top": GRID_TOP},
        "xAxis": {"type": "category", "data": []},
        "yAxis": [
            {"type": "value", "minInterval": 1},
            {"type": "value", "min": 0, "max": 100, "axisLabel": {"formatter": "{value} %"}},
        ],
        "series": [
            {"type": "bar", "name": "Suggested", "data": [], "itemStyle": {"color": "#8e24aa"}},
            {"type": "bar", "name": "Accepted", "data": [], "itemStyle": {"color": "#388e3c"}},
            {"type": "bar", "name": "Dismissed", "data": [], "itemStyle": {"color": "#9e9e9e"}},
            {
                "type": "line",
                "name": "Acceptance %",
                "yAxisIndex": 1,
                "data": [],
                "connectNulls": True,
                "itemStyle": {"color": "#ef6c00"},
            },
        ],
    }


def spend_chart(days: int) -> dict:
    return {
        "title": {"text": f"AI spend per day (USD), last {days} days", **TITLE},
        "tooltip": {"trigger": "axis"},
        "legend": {"data": list(SCOPES.values()), **LEGEND},
        "grid": {"left": 56, "right": 16, "bottom": 32, "top": GRID_TOP},
        "xAxis": {"type": "category", "data": []},
        "yAxis": {"type": "value"},
        "series": [
            {"type": "line", "name": name, "data": [], "itemStyle": {"color": SCOPE_HEX[scope]}}
            for scope, name in SCOPES.items()
        ],
    }


def fill(triage: ui.echart, spend: ui.echart, days: list[TriageDay]) -> None:
    labels = [day.day.strftime("%d %b") for day in days]
    triage.options["xAxis"]["data"] = labels
    series = triage.options["series"]
    series[0]["data"] = [day.suggested for day in days]
    series[1]["data"] = [day.accepted for day in days]
    series[2]["data"] = [day.dismissed for day in days]
    series[3]["data"] = [_rate(day) for day in days]
    triage.update()
    spend.options["xAxis"]["data"] = labels
    for line, scope in zip(spend.options["series"], SCOPES, strict=True):
        line["data"] = [round(day.spend.get(scope, 0.0), 4) for day in days]
    spend.update()


def _rate(day: TriageDay) -> float | None:
    decided = day.accepted + day.dismissed
    return round(100 * day.accepted / decided) if decided else None  # no decision that day: no point
