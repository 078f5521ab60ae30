"""A labelled set is checked whole before any call: a bad line stops the eval, naming its line and field."""

import json

import pytest

from desk.agent.triage.eval import labels
from desk.agent.triage.eval.metrics import PRIORITIES

GOOD = {"id": "x1", "title": "Leaking tap", "description": "", "priority": "medium", "flag": False, "note": "repair"}


def write(tmp_path, *lines: str):
    path = tmp_path / "set.jsonl"
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("bad", "said"),
    [
        (
            {**GOOD, "id": "x2", "priority": "critical"},
            "line 3: priority: Input should be 'low', 'medium', 'high' or 'urgent'",
        ),
        ({**GOOD, "id": "x2", "flag": "yes"}, "line 3: flag: Input should be a valid boolean"),
        ({k: v for k, v in GOOD.items() if k != "note"} | {"id": "x2"}, "line 3: note: Field required"),
        ({**GOOD, "id": "x2", "owner": "me"}, "line 3: owner: Extra inputs are not permitted"),
        ({**GOOD, "id": "x2", "title": ""}, "line 3: title: "),
        (GOOD, "line 3: id: 'x1' is already on line 1"),
    ],
)
def test_a_bad_line_is_named_with_its_field(tmp_path, bad, said):
    path = write(tmp_path, json.dumps(GOOD), "", json.dumps(bad))
    with pytest.raises(labels.BadSet) as refused:
        labels.load(path)
    assert f"{path} {said}" in str(refused.value)


def test_a_line_that_is_not_json_is_named(tmp_path):
    path = write(tmp_path, json.dumps(GOOD), '{"id": "x2", "title": ')
    with pytest.raises(labels.BadSet, match=r"line 2: is not JSON"):
        labels.load(path)


def test_the_shipped_set_is_valid_and_big_enough_with_every_priority_well_represented():
    orders = labels.load(labels.SHIPPED)
    assert len(orders) >= 200
    counts = {priority: sum(order.priority == priority for order in orders) for priority in PRIORITIES}
    assert min(counts.values()) >= 35, counts
    assert sum(order.id.startswith("hard-") for order in orders) >= 20
