"""Metrics shapes for the admin charts."""

from datetime import date

from desk.schema import ReadModel


class DayCount(ReadModel):
    day: date
    opened: int
    closed: int


class Metrics(ReadModel):
    total: int
    by_status: dict[str, int]
    by_priority: dict[str, int]
    per_day: list[DayCount]  # the last 30 days, oldest first, UTC days
    mean_hours_to_done: float | None  # None until something is done
