"""The approval modal of a proposed change: the diff, the time left, Not now, Reject with a reason, Approve.

The diff is the server-rendered one (`Diff`: frozen arguments over the pre-image); values are text,
never HTML, and a long one wraps anywhere and is shortened, with "Show all" to read it whole.
"""

from collections.abc import Awaitable, Callable
from datetime import datetime

from nicegui import ui

from components.formats import when
from desk import state
from desk.agent.core.events import Diff, ToolApprovalRequired
from desk.labels import CHOICE_LABELS
from desk.work_orders.models import EDITABLE

LONG_VALUE = 400  # a value longer than this is shown shortened, with "Show all"
# Quasar keeps the focus from moving to the page behind, but Tab past the last button leaves the page for
# the browser's own controls. A sentinel at each end of the card sends the focus round to the other end.
CONTROLS = "button:not([disabled]), input:not([disabled]), textarea:not([disabled]), a[href]"
ROUND_TO = "e => {{ const c = [...e.target.closest('.q-card').querySelectorAll('{controls}')]; c.at({end})?.focus(); }}"
Decide = Callable[[bool, str | None], Awaitable[None]]  # (approve, reason): what Approve and Reject call


def approval_dialog(event: ToolApprovalRequired, *, decide: Decide) -> ui.dialog:
    """The modal for `event`, made closed; Approve and Reject call `decide`, Not now only closes it."""
    with (
        ui.dialog().props("persistent=false") as dialog,
        ui.card().classes("w-[40rem] max-w-[95vw]").mark("approval"),
    ):
        _sentinel(-1)  # Shift+Tab from the first control: to the last
        ui.label(_headline(event.diff)).classes("text-lg font-semibold")
        _diff_table(event.diff)
        _countdown(event.expires_at)
        reason = ui.input("Reason (optional, goes back to the assistant)").props("maxlength=300 dense")
        reason.classes("w-full").mark("reject-reason")
        with ui.row().classes("w-full justify-end"):
            ui.button("Not now", on_click=dialog.close).props("flat").mark("approval-dismiss")
            ui.button("Reject", on_click=lambda: decide(False, reason.value)).props("outline color=negative").mark(
                "reject"
            )
            approve = ui.button("Approve", on_click=lambda: decide(True, None)).mark("approve")
            approve.on("click", approve.disable)  # a second click can never send a second decision
        _sentinel(0)  # Tab from the last control: to the first
    return dialog


def _sentinel(end: int) -> None:
    """A focusable spot that takes no room and passes the focus to the card's first (0) or last (-1) control."""
    spot = ui.element().props("tabindex=0").classes("absolute w-0 h-0 overflow-hidden")
    spot.on("focus", js_handler=ROUND_TO.format(controls=CONTROLS, end=end))


def _countdown(expires: datetime) -> None:
    countdown = ui.label().classes("text-sm text-grey-7").mark("approval-countdown")

    def tick() -> None:
        left = int((expires - state.current().clock.now()).total_seconds())  # the clock it lapses by
        countdown.set_text(f"Expires in {left // 60}:{left % 60:02d}" if left > 0 else "Expired")

    tick()
    ui.timer(1.0, tick)


def _headline(diff: Diff) -> str:
    return {
        "create": "Create this work order?",
        "update": "Change this work order?",
        "delete": "Delete this work order?",
    }[diff.action]


def _diff_table(diff: Diff) -> None:
    """Before and after side by side; changed fields stand out. Values are text, never HTML."""
    # minmax(0, 1fr): a long unbroken value wraps inside its column instead of pushing "After" off screen
    columns = "7rem minmax(0, 1fr) minmax(0, 1fr)"
    with ui.grid(columns=columns).classes("w-full gap-x-3 gap-y-1 items-start").mark("diff"):
        for heading in ("", "Before" if diff.before is not None else "", "After" if diff.after is not None else ""):
            ui.label(heading).classes("text-xs text-grey-7 uppercase")
        for field in (*EDITABLE, "due_at"):
            changed = field in diff.changed
            ui.label("Due by" if field == "due_at" else field.title()).classes(
                "font-medium text-primary" if changed else "font-medium"
            )
            for side in (diff.before, diff.after):
                value = _shown(field, side.get(field)) if side is not None else ""
                cell = _value_cell(value)
                if changed and side is diff.after and side is not None:
                    cell.classes("bg-green-1 rounded px-1").mark("diff-changed")
                elif changed and side is not None:
                    cell.classes("bg-red-1 rounded px-1 line-through")


def _value_cell(value: str) -> ui.label:
    """A value as text that wraps anywhere; a long one shortened, with "Show all" to read it whole."""
    short = len(value) > LONG_VALUE
    cell = ui.label(value[:LONG_VALUE] + "…" if short else value)
    cell.classes("whitespace-pre-wrap wrap-anywhere min-w-0 text-sm")
    if short:

        def show_all() -> None:
            # Whole, in a box of its own that scrolls: the other fields and the buttons stay in sight.
            cell.set_text(value)
            cell.classes("max-h-[40vh] overflow-auto")
            more.delete()

        with cell:
            more = ui.button("Show all", on_click=show_all).props("flat dense size=sm no-caps").mark("diff-show-all")
    return cell


def _shown(field: str, value: object) -> str:
    if field == "due_at":  # a moment (or its text, as the event carried it), or none
        return when(datetime.fromisoformat(value) if isinstance(value, str) else value) if value else "no day"
    labels = CHOICE_LABELS.get(field)
    return labels.get(str(value), str(value)) if labels else str(value or "")
