"""Metrics shapes for the admin charts, and the filters they take."""

from datetime import date, timedelta

from pydantic import BaseModel, ConfigDict, Field

from desk.schema import Day, ObjectIdStr, ReadModel, now

DAYS = 30  # the range shown when none is asked for: the last 30 days
MAX_DAYS = 366


class DayCount(ReadModel):
    day: date
    opened: int
    closed: int


class Metrics(ReadModel):
    total: int
    by_status: dict[str, int]
    by_priority: dict[str, int]
    per_day: list[DayCount]  # the days asked for (default the last 30), oldest first, UTC days
    mean_hours_to_done: float | None  # None until something is done
    # Open orders past their due moment now, by owner id ("none": the queue); owners with none are left out
    overdue_by_owner: dict[str, int]


class MetricsQuery(BaseModel):
    """An owner (their orders only) and a range of UTC days for the per-day chart (default the last 30)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    owner_id: ObjectIdStr | None = Field(None, alias="ownerId")
    since: Day | None = None
    until: Day | None = None  # before `since`: a valid request for no days (no schema can compare the two)

    def days(self) -> list[date]:
        """The days to show, oldest first: at most MAX_DAYS, ending at `until` (default today)."""
        until = self.until or now().date()
        since = self.since or _back(until, DAYS - 1)
        since = max(since, _back(until, MAX_DAYS - 1))
        return [since + timedelta(days=n) for n in range((until - since).days + 1)]


def _back(day: date, days: int) -> date:
    """`days` before `day`, or the first day there is (0001-01-01 is a valid request, and has no 30 days before it)."""
    return day - timedelta(days=days) if (day - date.min).days >= days else date.min
