"""The eval's numbers against the same numbers worked out by hand (tests/triage/eval/hand_set.py)."""

import pytest

from desk.agent.triage.eval import baselines, labels
from desk.agent.triage.eval.metrics import Label, Pair, confusion, percentile, quality
from tests.triage.eval.hand_set import ANSWERS, ORDERS, write_set


def model_pairs() -> list[Pair]:
    return [
        Pair(Label(priority, flag), Label(*ANSWERS[id_]) if ANSWERS[id_] else None)  # type: ignore[misc]
        for id_, _, priority, flag in ORDERS
    ]


def test_the_models_metrics_are_the_ones_worked_out_by_hand():
    # right: a, c (2 of 6); within one: all but d, which has no answer (5 of 6); flagged a, c, e of which a and e
    # were due: precision 2/3, recall 2/2, F1 0.8. Per priority: urgent P 1/2 R 1 F1 2/3; high 0; medium P 1/2
    # R 1/2 F1 1/2; low 0: macro F1 (2/3 + 1/2) / 4.
    assert quality(model_pairs()) == {
        "items": 6,
        "valid": 5,
        "accuracy": 0.3333,
        "macroF1": 0.2917,
        "withinOne": 0.8333,
        "flagPrecision": 0.6667,
        "flagRecall": 1.0,
        "flagF1": 0.8,
        "invalidRate": 0.1667,
    }


def test_always_medium_is_right_on_the_medium_orders_and_never_flags():
    pairs = [Pair(Label(priority, flag), baselines.ALWAYS_MEDIUM) for _, _, priority, flag in ORDERS]
    # medium: P 2/6, R 2/2, F1 1/2; the other three 0: macro 1/8. Within one: all but the urgent one.
    assert quality(pairs) == {
        "items": 6,
        "valid": 6,
        "accuracy": 0.3333,
        "macroF1": 0.125,
        "withinOne": 0.8333,
        "flagPrecision": 0.0,
        "flagRecall": 0.0,
        "flagF1": 0.0,
        "invalidRate": 0.0,
    }


def test_the_keyword_rule_reads_smoke_broken_and_would_like(tmp_path):
    orders = labels.load(write_set(tmp_path / "set.jsonl"))
    said = [baselines.keyword_rule(order) for order in orders]
    assert [label.priority for label in said] == ["urgent", "high", "medium", "low", "medium", "medium"]
    # all right but e (high, said medium); flagged a alone of a and e: P 1, R 1/2, F1 2/3;
    # urgent F1 1, high P 1 R 1/2 F1 2/3, medium P 2/3 R 1 F1 4/5, low 1: macro 0.8667
    pairs = [Pair(Label(order.priority, order.flag), label) for order, label in zip(orders, said, strict=True)]
    assert quality(pairs) == {
        "items": 6,
        "valid": 6,
        "accuracy": 0.8333,
        "macroF1": 0.8667,
        "withinOne": 1.0,
        "flagPrecision": 1.0,
        "flagRecall": 0.5,
        "flagF1": 0.6667,
        "invalidRate": 0.0,
    }


def test_the_confusion_matrix_puts_a_missing_answer_in_its_own_column():
    matrix = confusion(model_pairs())
    assert matrix["urgent"] == {"low": 0, "medium": 0, "high": 0, "urgent": 1, "invalid": 0}
    assert matrix["high"] == {"low": 0, "medium": 1, "high": 0, "urgent": 1, "invalid": 0}
    assert matrix["low"] == {"low": 0, "medium": 0, "high": 0, "urgent": 0, "invalid": 1}


def test_macro_f1_counts_only_the_priorities_the_labels_hold():
    pairs = [Pair(Label("high", False), Label("high", False)), Pair(Label("low", False), Label("high", False))]
    # high: P 1/2 R 1 F1 2/3; low: 0; medium and urgent are in no label: (2/3 + 0) / 2
    assert quality(pairs)["macroF1"] == 0.3333


@pytest.mark.parametrize(("share", "expected"), [(50, 100), (95, 300), (20, 80), (100, 300)])
def test_latency_percentiles_are_nearest_rank_values_that_were_measured(share, expected):
    assert percentile([120, 80, 100, 300, 90], share) == expected


def test_nothing_to_count_is_zero_not_an_error():
    assert percentile([], 50) == 0.0
    assert quality([])["accuracy"] == 0.0
