"""One agent run as an admin reads it: its facts, its transcript and its tool calls, every model or order text
as plain text (labels and code-like blocks, never Markdown or HTML)."""

import json

from nicegui import ui

from components import theme
from components.formats import usd, when
from desk.agent.core.models import AgentRunDetail, AgentToolCallRead
from desk.agent.triage import service as triage
from desk.labels import AGENT_NAMES, APPROVAL_STATUSES, PRIORITY_LABELS, RUN_STATUSES, TOOL_OUTCOMES, run_error

RUN_STATUS_COLORS = {
    "running": "blue-9",
    "complete": "green-9",
    "error": "red-9",
    "budget_exceeded": "deep-orange-10",
}  # AA


def run_status_chip(status: str) -> ui.chip:
    return ui.chip(
        RUN_STATUSES.get(status, status), color=RUN_STATUS_COLORS.get(status, "grey-8"), text_color="white"
    ).props("dense")


def run_detail(detail: AgentRunDetail, extra: triage.RunExtra | None, names: dict[str, str]) -> None:
    """The run's facts, its transcript and its tool calls; every model or order text as plain text."""
    run = detail.run
    agent = AGENT_NAMES.get(run.agent_name or "copilot", run.agent_name or "")
    with ui.card().classes("w-full gap-1").mark("run-facts"):
        with ui.row().classes("items-center gap-3"):
            theme.page_heading(ui.label(f"{agent} run").classes("text-2xl font-semibold"))
            run_status_chip(run.status)
        person = run.actor_id if run.actor_kind == "human" else None
        who = names.get(person, "someone") if person else "no person (the triage agent works alone)"
        ui.label(f"For {who} · {run.mode} · model {run.model}").classes("text-sm text-grey-8")
        ui.label(f"Started {when(run.started_at)} · finished {when(run.finished_at) or '—'}").classes("text-sm")
        cost = f" · {usd(extra.cost_usd)}" if extra else ""
        ui.label(f"{run.input_tokens:,} tokens in · {run.output_tokens:,} out{cost}").classes("text-sm").mark(
            "run-usage"
        )
        if run.error_code:  # in words, and the stored code as a secondary line
            ui.label(f"Why: {run_error(run.error_code)}").classes("text-sm text-red-8").mark("run-error")
            ui.label(run.error_code).classes("text-xs text-grey-7 font-mono").mark("run-error-code")
        if extra and extra.work_order_id:
            ui.link("Open the work order", f"/app/work-orders/{extra.work_order_id}").classes("text-sm")
    ui.label("Transcript").classes("text-lg font-semibold mt-2")
    with ui.column().classes("w-full gap-2").mark("transcript"):
        if not detail.messages:
            ui.label("No messages kept for this run.").classes("text-grey-7")
        for message in detail.messages:
            with ui.card().classes("w-full gap-1" if message.role == "assistant" else "w-full gap-1 bg-grey-1"):
                ui.label(f"{message.role} · {when(message.created_at)}").classes("text-xs text-grey-7")
                ui.label(message.content or "(called tools)").classes("whitespace-pre-wrap wrap-anywhere").mark(
                    "message"
                )
    ui.label("Tool calls").classes("text-lg font-semibold mt-2")
    with ui.column().classes("w-full gap-2").mark("tool-calls"):
        if not detail.tool_calls:
            ui.label("No tool calls.").classes("text-grey-7")
        for call in detail.tool_calls:
            _tool_call(call)


def _tool_call(call: AgentToolCallRead) -> None:
    with ui.card().classes("w-full gap-1").mark("tool-call"):
        with ui.row().classes("items-center gap-2"):
            ui.label(call.tool).classes("font-mono font-medium")
            outcome = TOOL_OUTCOMES.get(call.outcome, call.outcome)
            ui.badge(outcome, color="green-9" if call.outcome == "ok" else "grey-8").mark("tool-outcome")
            if call.approval is not None:
                approval = APPROVAL_STATUSES.get(call.approval.status, call.approval.status)
                ui.badge(f"Approval: {approval}", color="purple-6").props("outline")
            ui.label(f"{call.latency_ms} ms").classes("text-xs text-grey-7")
        for line in diff_lines(call):
            ui.label(line).classes("text-sm wrap-anywhere").mark("tool-diff")
        ui.label("Arguments").classes("text-xs text-grey-7")
        _json_text(call.args)
        if call.result is not None:
            ui.label("Result").classes("text-xs text-grey-7")
            _json_text(call.result)


def _json_text(value: object) -> None:
    # A label, not ui.code: ui.code is Markdown inside a fence, and a ``` in the model's text would end the fence.
    text = json.dumps(value, indent=2, ensure_ascii=False, default=str)
    ui.label(text).classes("w-full font-mono text-xs whitespace-pre-wrap wrap-anywhere bg-grey-2 p-2 rounded").mark(
        "tool-json"
    )


def diff_lines(call: AgentToolCallRead) -> list[str]:
    """What a write changed: each field from the order as it was (`pre_image`) to the arguments."""
    before = call.pre_image or {}
    return [
        f"{field}: {_shown(field, before.get(field))} → {_shown(field, value)}"
        for field, value in call.args.items()
        if field in before and before.get(field) != value
    ]


def _shown(field: str, value: object) -> str:
    if field == "priority":
        return PRIORITY_LABELS.get(str(value), str(value))
    text = str(value)
    return f"“{text[:120]}…”" if len(text) > 120 else f"“{text}”"
