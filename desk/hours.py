"""Working hours as offices keep them: `Mon-Fri 08:00-18:00`, read in a time zone, with days off.

The stored text (AGENT_WORKING_HOURS, the triage policy's `workingHours`) is one or more rules
joined by "; ", each `[DAYS ]SPAN`:

- SPAN is `*` (all day) or `HH:MM-HH:MM`; a span that ends before it starts runs past midnight
  (`22:00-06:00`, a night shift), and one that ends where it starts is refused (no time at all).
- DAYS is weekdays (`Mon`..`Sun`), ranges (`Mon-Fri`, `Fri-Mon`) and lists of them (`Mon,Wed,Fri`);
  no days means every day, so `*` and `08:00-18:00` mean what they always did.

A window belongs to the day it starts on: `Fri 22:00-06:00` runs into Saturday morning, and a
day off (an ISO date) closes the windows that start on it. Wall-clock times, so 08:00 stays 08:00
across a DST change.
"""

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_DAY = "(?:" + "|".join(DAYS) + ")"
_DAYS = rf"{_DAY}(?:-{_DAY})?(?:,{_DAY}(?:-{_DAY})?)*"
_TIME = "(?:[01][0-9]|2[0-3]):[0-5][0-9]"
_RULE = rf"(?:{_DAYS} )?(?:\*|{_TIME}-{_TIME})"
PATTERN = rf"^{_RULE}(?:; {_RULE})*$"
# The schema's: also refuses a span that ends where it starts, as `parse` does, so that a client can check
# a request before sending it ([0-9], not \d: the schema's ECMA pattern and Python's re agree on ASCII digits).
SCHEMA_PATTERN = rf"^(?!(?:.* )?([0-9]{{2}}:[0-9]{{2}})-\1(?:;|$)){PATTERN[1:]}"
_LOOSE = _RULE.replace(_TIME, "[0-9]{2}:[0-9]{2}")  # the right form with a time that is not one (25:00)
LOOKAHEAD_DAYS = 400  # how far `next_opening` looks: a year of days off, and a week more


@dataclass(frozen=True)
class Window:
    """One rule: the weekdays it starts on (0 Monday), and its span (`end` None: all day)."""

    days: frozenset[int]
    start: time
    end: time | None


def parse(text: str) -> tuple[Window, ...]:
    """The rules of a working-hours text; ValueError, saying what is wrong, when it is not one."""
    if not re.fullmatch(PATTERN, text):
        if re.fullmatch(rf"{_LOOSE}(?:; {_LOOSE})*", text):
            raise ValueError("must use times of day, from 00:00 to 23:59")
        raise ValueError('must be "*" or "HH:MM-HH:MM", after weekdays if need be (Mon-Fri 08:00-18:00)')
    return tuple(_rule(part) for part in text.split("; "))


def is_open(text: str, zone: str, days_off: list[str] | tuple[str, ...], moment: datetime) -> bool:
    """Whether `moment` falls in the working hours `text`, read in `zone`, outside the `days_off`."""
    local = moment.astimezone(ZoneInfo(zone))
    off = set(days_off)
    today, yesterday = local.date(), local.date() - timedelta(days=1)
    for window in parse(text):
        if window.end is None:
            inside = _starts(window, today, off)
        elif window.start < window.end:
            inside = _starts(window, today, off) and window.start <= local.time() < window.end
        else:  # past midnight: tonight's window, or the tail of last night's
            tonight = _starts(window, today, off) and local.time() >= window.start
            inside = tonight or (_starts(window, yesterday, off) and local.time() < window.end)
        if inside:
            return True
    return False


def next_opening(text: str, zone: str, days_off: list[str] | tuple[str, ...], moment: datetime) -> datetime | None:
    """The first moment from `moment` on that is inside the working hours (in `zone`); None within LOOKAHEAD_DAYS."""
    if is_open(text, zone, days_off, moment):
        return moment
    tz = ZoneInfo(zone)
    first = moment.astimezone(tz).date()
    off = set(days_off)
    windows = parse(text)
    for ahead in range(LOOKAHEAD_DAYS):
        day = first + timedelta(days=ahead)
        starts = [
            _utc(datetime.combine(day, window.start, tzinfo=tz)) for window in windows if _starts(window, day, off)
        ]
        later = [start for start in starts if start > moment]
        if later:
            return min(later)
    return None


def _starts(window: Window, day: date, off: set[str]) -> bool:
    return day.weekday() in window.days and day.isoformat() not in off


def _utc(local: datetime) -> datetime:
    # A wall-clock start in a spring-forward gap (02:30 that night) is read with the offset before the
    # change (fold 0): the window is reported open an hour later than the gap's end, never before it opens.
    return local.astimezone(UTC)


def _rule(text: str) -> Window:
    days_text, _, span = text.rpartition(" ")
    days = _days(days_text) if days_text else frozenset(range(7))
    if span == "*":
        return Window(days, time(0, 0), None)
    start, end = (time.fromisoformat(part) for part in span.split("-"))
    if start == end:
        raise ValueError('must end at another time than it starts ("*" for all day)')
    return Window(days, start, end)


def _days(text: str) -> frozenset[int]:
    days: set[int] = set()
    for part in text.split(","):
        first, _, last = part.partition("-")
        begin, end = DAYS.index(first), DAYS.index(last or first)
        days.update((begin + step) % 7 for step in range((end - begin) % 7 + 1))  # Fri-Mon wraps over the weekend
    return frozenset(days)
