"""SEC-1: frozen arguments that fail validation again, and pydantic errors in general, never put their input in a log.

The injection suite and the approval tests are watched as a whole by tests/agent/log_watch.py.
"""

import logging
import traceback

import pytest
from pydantic import BaseModel, ValidationError

from desk.agent.copilot.toolset import REGISTRY
from desk.agent.core.pipeline import revalidate
from desk.errors import ValidationFailed
from desk.logs import JsonFormatter, RedactingFilter

PRIVATE = "Alex's salary review notes: 91,000"


def test_frozen_args_that_no_longer_pass_fail_without_their_values():
    tool = REGISTRY.tools["update_work_order"]
    frozen = {"id": "665f1c2e9b1e8a0012345678", "title": PRIVATE * 10}  # longer than a title may be

    with pytest.raises(ValidationFailed) as caught:
        revalidate(tool, frozen)

    assert "title" in caught.value.message and "200" in caught.value.message
    written = "".join(traceback.format_exception(caught.value))
    assert PRIVATE[:20] not in written and "input_value" not in written


class Shape(BaseModel):
    count: int


@pytest.mark.parametrize(
    "value",
    [PRIVATE, f"{PRIVATE}, input_type=str] and then {PRIVATE}"],  # a value that fakes the end of the quote
)
def test_a_logged_validation_error_keeps_its_input_out_of_the_line(value, caplog):
    caplog.set_level(logging.INFO)
    try:
        Shape.model_validate({"count": value})
    except ValidationError:
        logging.getLogger("desk.test").exception("could not read %s", "a shape")
    (record,) = caplog.records
    RedactingFilter().filter(record)

    line = JsonFormatter().format(record)

    assert "could not read a shape" in line and "int_parsing" in line
    assert PRIVATE[:20] not in line and "Alex" not in line
