"""The "Quality" card: the last eval of the configured model and prompt beside always-medium, with its report;
and the live acceptance of the suggestions by week, as a chart."""

from nicegui import ui

from desk.agent.triage.acceptance import Week
from desk.agent.triage.eval.quality import Quality
from desk.labels import EVAL_METRICS

NOT_MEASURED = "Not measured yet: no eval of this model with this prompt. `desk eval triage` runs one (README)."


def quality_card(found: Quality) -> None:
    with ui.card().classes("grow min-w-0 gap-1").mark("quality"):
        ui.label("Quality").classes("text-lg font-semibold")
        what = f"{found.model} · structured output {found.structured_output} · prompt {found.prompt_hash}"
        ui.label(what).classes("text-xs text-grey-7").mark("quality-what")
        summary = found.summary
        if summary is None:
            ui.label(NOT_MEASURED).mark("quality-none")
        else:
            medium = summary["baselines"]["alwaysMedium"]
            with ui.grid(columns=3).classes("gap-x-6 gap-y-0 text-sm"):
                for text in ("", "Model", "Always medium"):
                    ui.label(text).classes("font-medium")
                for key, label in EVAL_METRICS.items():
                    ui.label(label)
                    ui.label(_percent(summary[key])).mark(f"quality-{key}")
                    ui.label(_percent(medium[key]))
            ui.label(f"{summary['items']} orders, finished {summary['finishedAt'][:16].replace('T', ' ')} UTC").classes(
                "text-xs text-grey-7"
            )
            ui.link("Open the report", found.report_url or "", new_tab=True).mark("quality-report")
        if warning := found.warning():
            ui.label(warning).classes("text-sm text-orange-9").mark("quality-warning")


def acceptance_chart(weeks: list[Week]) -> None:
    """Accepted, dismissed and overtaken suggestions per week (bars), and the share accepted (the line)."""
    with ui.card().classes("grow min-w-0").mark("acceptance"):
        ui.echart(
            {
                "title": {"text": "Suggestions answered by people, per week", "left": 8, "textStyle": {"fontSize": 14}},
                "tooltip": {"trigger": "axis"},
                "legend": {"top": 28, "left": 8},
                "grid": {"left": 40, "right": 48, "bottom": 32, "top": 72},
                "xAxis": {"type": "category", "data": [f"{week.start:%d %b}" for week in weeks]},
                "yAxis": [
                    {"type": "value", "minInterval": 1},
                    {"type": "value", "min": 0, "max": 100, "axisLabel": {"formatter": "{value} %"}},
                ],
                "series": [
                    _bars("Accepted", [week.accepted for week in weeks], "#388e3c"),
                    _bars("Dismissed", [week.dismissed for week in weeks], "#9e9e9e"),
                    _bars("Overtaken by a person", [week.overtaken for week in weeks], "#ef6c00"),
                    {
                        "type": "line",
                        "name": "Accepted %",
                        "yAxisIndex": 1,
                        "connectNulls": True,
                        "data": [None if week.rate is None else round(100 * week.rate) for week in weeks],
                    },
                ],
            }
        ).classes("w-full h-64").mark("acceptance-chart")


def _bars(name: str, data: list[int], color: str) -> dict:
    return {"type": "bar", "name": name, "stack": "answered", "data": data, "itemStyle": {"color": color}}


def _percent(value: float) -> str:
    return f"{value * 100:.1f} %"
