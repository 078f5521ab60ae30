"""A clock that stands still until a test moves it (desk/clock.py): time passes without waiting for it."""

from datetime import datetime, timedelta

from desk.clock import SYSTEM_CLOCK, Clock


class ManualClock(Clock):
    """Starts at the beginning of the current minute (a minute no test straddles by accident), and moves when told."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or SYSTEM_CLOCK.now().replace(second=0, microsecond=0)
        self._monotonic = 0.0

    def now(self) -> datetime:
        return self._now

    def monotonic(self) -> float:
        return self._monotonic

    def move(self, by: timedelta) -> None:
        """Let `by` pass, on both clocks."""
        assert by >= timedelta(), "time only moves forward"
        self._now += by
        self._monotonic += by.total_seconds()
