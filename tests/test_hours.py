"""Working hours (desk/hours.py): weekdays, days off, night shifts and DST, as the triage policy reads them."""

import re
from datetime import datetime

import pytest

from desk import hours
from desk.agent.triage import policy
from desk.agent.triage.service import hours_line

OFFICE = "Mon-Fri 08:00-18:00"


def at(moment: str) -> datetime:
    return datetime.fromisoformat(moment)


@pytest.mark.parametrize(
    ("text", "zone", "days_off", "moment", "inside"),
    [
        (OFFICE, "UTC", [], "2026-03-06T12:00:00+00:00", True),  # a Friday
        (OFFICE, "UTC", [], "2026-03-07T12:00:00+00:00", False),  # a Saturday
        (OFFICE, "UTC", [], "2026-03-08T12:00:00+00:00", False),  # a Sunday
        (OFFICE, "UTC", [], "2026-03-09T07:59:00+00:00", False),  # Monday, before the office opens
        (OFFICE, "UTC", [], "2026-03-09T18:00:00+00:00", False),  # and as it closes
        (OFFICE, "UTC", ["2026-03-09"], "2026-03-09T12:00:00+00:00", False),  # a day off
        (OFFICE, "UTC", ["2026-03-09"], "2026-03-10T12:00:00+00:00", True),  # the day after it
        # Berlin: Monday 08:30 local is 07:30 UTC in winter, Sunday 23:30 UTC already Monday 00:30 there
        (OFFICE, "Europe/Berlin", [], "2026-03-09T07:30:00+00:00", True),
        ("Mon-Fri *", "Europe/Berlin", [], "2026-03-08T23:30:00+00:00", True),
        ("Mon-Fri *", "UTC", [], "2026-03-08T23:30:00+00:00", False),
        # a night shift starting Friday runs into Saturday morning; Monday morning is Sunday night's, not worked
        ("Mon-Fri 22:00-06:00", "UTC", [], "2026-03-07T05:00:00+00:00", True),
        ("Mon-Fri 22:00-06:00", "UTC", [], "2026-03-09T05:00:00+00:00", False),
        ("Mon-Fri 22:00-06:00", "UTC", [], "2026-03-09T22:30:00+00:00", True),
        ("Mon-Fri 22:00-06:00", "UTC", ["2026-03-06"], "2026-03-07T05:00:00+00:00", False),  # Friday's shift off
        # more than one rule, and ranges across the weekend
        ("Mon-Fri 08:00-18:00; Sat 09:00-13:00", "UTC", [], "2026-03-07T10:00:00+00:00", True),
        ("Mon-Fri 08:00-18:00; Sat 09:00-13:00", "UTC", [], "2026-03-07T14:00:00+00:00", False),
        ("Fri-Mon *", "UTC", [], "2026-03-08T12:00:00+00:00", True),
        ("Fri-Mon *", "UTC", [], "2026-03-10T12:00:00+00:00", False),
        ("Mon,Wed 08:00-09:00", "UTC", [], "2026-03-11T08:30:00+00:00", True),
        # the old shapes mean every day, as they always did
        ("08:00-18:00", "UTC", [], "2026-03-07T12:00:00+00:00", True),
        ("*", "UTC", [], "2026-03-07T03:00:00+00:00", True),
        ("*", "UTC", ["2026-03-07"], "2026-03-07T03:00:00+00:00", False),
    ],
)
def test_working_hours_with_weekdays_and_days_off(text, zone, days_off, moment, inside):
    assert hours.is_open(text, zone, days_off, at(moment)) is inside


@pytest.mark.parametrize(
    ("moment", "opens"),
    [
        # the Saturday before Berlin's clocks go forward (2026-03-29): 08:00 on Monday is 06:00 UTC, no longer 07:00
        ("2026-03-28T12:00:00+00:00", "2026-03-30T06:00:00+00:00"),
        ("2026-03-21T12:00:00+00:00", "2026-03-23T07:00:00+00:00"),
        # and back (2026-10-25): 07:00 UTC again
        ("2026-10-24T12:00:00+00:00", "2026-10-26T07:00:00+00:00"),
        # in the evening: the next morning
        ("2026-03-10T18:30:00+00:00", "2026-03-11T07:00:00+00:00"),
        # inside: now
        ("2026-03-10T12:00:00+00:00", "2026-03-10T12:00:00+00:00"),
    ],
)
def test_the_next_opening_is_read_in_the_time_zone_across_dst(moment, opens):
    assert hours.next_opening(OFFICE, "Europe/Berlin", [], at(moment)) == at(opens)


def test_the_next_opening_steps_over_days_off_and_says_none_when_there_is_none():
    christmas = ["2026-12-24", "2026-12-25", "2026-12-28"]
    assert hours.next_opening(OFFICE, "UTC", christmas, at("2026-12-23T19:00:00+00:00")) == at(
        "2026-12-29T08:00:00+00:00"
    )
    every_monday = [f"2026-{m:02d}-{d:02d}" for m in range(1, 13) for d in range(1, 32) if _monday(2026, m, d)]
    every_monday += [f"2027-{m:02d}-{d:02d}" for m in range(1, 13) for d in range(1, 32) if _monday(2027, m, d)]
    assert hours.next_opening("Mon 08:00-09:00", "UTC", every_monday, at("2026-01-01T00:00:00+00:00")) is None


def _monday(year: int, month: int, day: int) -> bool:
    try:
        return datetime(year, month, day).weekday() == 0
    except ValueError:
        return False


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("9 to 5", "after weekdays"),
        ("Mon-Fri", "after weekdays"),
        ("mon-fri 08:00-18:00", "after weekdays"),
        ("Mon-Fri 25:00-26:00", "times of day"),
        ("Mon-Fri 08:00-08:00", "another time"),
        ("Mon-Fri 08:00-18:00;Sat 09:00-12:00", "after weekdays"),  # rules are joined by "; "
    ],
)
def test_what_is_not_working_hours_is_refused_saying_why(text, says):
    with pytest.raises(ValueError, match=says):
        hours.parse(text)


def test_the_policy_reads_its_days_off_and_a_policy_stored_before_them_still_works():
    stored_before = {"workingHours": "08:00-18:00", "timeZone": "Europe/Berlin"}
    with_days_off = {**stored_before, "workingHours": OFFICE, "daysOff": ["2026-03-10"]}

    assert policy.in_working_hours(stored_before, at("2026-03-07T10:00:00+00:00")) is True  # Saturday: every day
    assert policy.in_working_hours(with_days_off, at("2026-03-10T10:00:00+00:00")) is False
    assert policy.opens_at(with_days_off, at("2026-03-10T10:00:00+00:00")) == at("2026-03-11T07:00:00+00:00")


@pytest.mark.parametrize(
    ("moment", "line"),
    [
        ("2026-03-10T05:00:00+00:00", "Outside working hours: waiting until 08:00 Europe/Berlin"),
        ("2026-03-07T12:00:00+00:00", "Outside working hours: waiting until Mon 08:00 Europe/Berlin"),
        ("2026-03-10T12:00:00+00:00", None),
    ],
)
def test_the_agents_page_line_says_until_when_triage_waits(moment, line):
    config = {"workingHours": OFFICE, "timeZone": "Europe/Berlin", "daysOff": []}
    assert hours_line(config, at(moment)) == line


def test_the_line_names_the_date_when_the_opening_is_over_a_week_away():
    config = {"workingHours": OFFICE, "timeZone": "UTC", "daysOff": [f"2026-08-{d:02d}" for d in range(1, 32)]}
    assert hours_line(config, at("2026-07-31T19:00:00+00:00")) == (
        "Outside working hours: waiting until Tue 2026-09-01 08:00 UTC"
    )


@pytest.mark.parametrize(
    "text",
    [
        "*",
        "08:00-18:00",
        "08:00-08:00",
        "Mon-Fri 08:00-08:00",
        "Mon-Fri 08:00-18:00; Sat 09:00-09:00",
        "Mon-Fri 08:00-18:00; Sat 09:00-13:00",
        "Fri-Mon *",
        "18:00-08:00",
        "Mon 25:00-26:00",
        "Mon-Fri",
    ],
)
def test_the_schemas_pattern_takes_exactly_what_the_api_takes(text):
    """A client checking a request against the schema's pattern is never refused (nor let through) by the API."""
    try:
        hours.parse(text)
        taken = True
    except ValueError:
        taken = False
    assert bool(re.match(hours.SCHEMA_PATTERN, text)) is taken
