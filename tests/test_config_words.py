"""Config errors in plain words: lengths in characters, an example instead of a regular expression, no value echoed."""

from datetime import timedelta

import pytest
from pydantic import ValidationError

from desk.config import Settings, settings_errors


def _lines(**env: str) -> list[str]:
    with pytest.raises(ValidationError) as raised:
        Settings(**env)
    return settings_errors(raised.value)


def test_a_short_secret_says_how_many_characters_and_not_the_secret():
    (line,) = _lines(DESK_SECRET="too-short-secret")
    assert line == "DESK_SECRET: must be at least 32 characters long"
    assert "too-short-secret" not in line and "items" not in line


def test_shapes_are_told_with_an_example_not_a_regex():
    lines = _lines(MONGODB_DB="my desk", AGENT_WORKING_HOURS="9-5", DESK_PORT="eighty")
    assert "MONGODB_DB: must be 1 to 63 letters, digits, '_' or '-', for example desk or desk_staging" in lines
    hours = (
        "AGENT_WORKING_HOURS: must be * (any time) or a 24-hour range such as 08:00-18:00 (ending at another time),"
        " after weekdays if need be: Mon-Fri 08:00-18:00"
    )
    assert hours in lines
    assert _lines(AGENT_WORKING_HOURS="09:00-09:00") == [hours]  # no time at all, which "*" is not
    assert "DESK_PORT: must be a whole number" in lines
    assert not any("^" in line or "\\d" in line for line in lines)


def test_working_hours_with_weekdays_boot_and_a_misspelled_weekday_is_told_in_words():
    assert Settings(agent_working_hours="Mon-Fri 08:00-18:00; Sat 09:00-13:00").agent_working_hours.startswith("Mon")
    assert Settings(agent_working_hours="22:00-06:00").agent_working_hours == "22:00-06:00"  # the old shape

    (line,) = _lines(AGENT_WORKING_HOURS="Weekdays 08:00-18:00")

    assert line.startswith("AGENT_WORKING_HOURS: must be * (any time)") and "Mon-Fri 08:00-18:00" in line


def test_the_reconcile_max_age_is_days_or_hours():
    assert Settings().agent_reconcile_max_age == timedelta(days=7)
    assert Settings(AGENT_RECONCILE_MAX_AGE="36h").agent_reconcile_max_age == timedelta(hours=36)
    assert Settings(AGENT_RECONCILE_MAX_AGE="30d").agent_reconcile_max_age == timedelta(days=30)
    for wrong in ("7", "0d", "one week", "P7D"):
        assert _lines(AGENT_RECONCILE_MAX_AGE=wrong) == [
            "AGENT_RECONCILE_MAX_AGE: must be a number of days or hours such as 7d or 36h"
        ]
