"""The "Due by" field of the order forms: a day picked in the browser, meaning the end of that day in the
desk's time zone (the API takes any moment; a person picks a day)."""

from datetime import date, datetime

from nicegui import ui

from desk.zone import day_in, end_of_day

NOT_A_DAY = "Pick a day, such as 2026-12-10, or leave it empty."


def due_input(moment: datetime | None, zone: str) -> ui.input:
    """A date field showing the day `moment` falls on in `zone` (empty: due by no day)."""
    field = ui.input("Due by (optional)", value=due_day(moment, zone))
    return field.props("type=date clearable stack-label").classes("w-48")


def due_day(moment: datetime | None, zone: str) -> str:
    return day_in(moment, zone).isoformat() if moment else ""


def due_moment(text: str | None, zone: str) -> datetime | None:
    """The moment a picked day means: its last millisecond in `zone`; None for no day. ValueError: not a day."""
    text = (text or "").strip()
    return end_of_day(date.fromisoformat(text), zone) if text else None


def kept_day(kept: dict[str, object], zone: str) -> str | None:
    """The due field's text for what a draft kept of it, as `EditForm.edits` gave it: the day of a moment (kept as
    text) in `zone`, empty for a cleared day, other text as it was typed (Save refuses it beside the field, as it
    did before); None when the draft has no due day (or one that is no field's value)."""
    value = kept.get("due_at", False)
    if value is None:
        return ""
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return value
    return due_day(moment, zone) if moment.tzinfo is not None else value
