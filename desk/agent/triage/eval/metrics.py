"""The eval's numbers, from (expected, predicted) pairs. An invalid or missing answer is wrong everywhere:
no priority (a miss for its label's class, no one's false positive) and no flag (a missed flag when one was due).

Ratios with nothing to divide by are 0.0 (a baseline that never flags has flag precision 0.0, not undefined).
"""

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

PRIORITIES = ("low", "medium", "high", "urgent")
INVALID = "invalid"  # the confusion matrix's column for no answer
PLACES = 4


@dataclass(frozen=True)
class Label:
    priority: str
    flag: bool


@dataclass(frozen=True)
class Pair:
    expected: Label
    predicted: Label | None  # None: the answer was invalid or missing


def from_result(result: dict[str, Any]) -> Pair:
    """A results.jsonl line as the metrics take it (an invalid answer: no prediction)."""
    expected, predicted = result["expected"], result["predicted"]
    return Pair(Label(**expected), Label(**predicted) if predicted is not None else None)


def quality(pairs: Sequence[Pair]) -> dict[str, float | int]:
    """items, valid, accuracy, macroF1 (over the priorities the labels hold), withinOne, the flag's precision,
    recall and F1, invalidRate."""
    items = len(pairs)
    answered = [pair for pair in pairs if pair.predicted is not None]
    right = sum(1 for pair in answered if pair.predicted.priority == pair.expected.priority)  # type: ignore[union-attr]
    near = sum(1 for pair in answered if _distance(pair) <= 1)
    flagged = sum(1 for pair in answered if pair.predicted.flag)  # type: ignore[union-attr]
    due = sum(1 for pair in pairs if pair.expected.flag)
    caught = sum(1 for pair in answered if pair.predicted.flag and pair.expected.flag)  # type: ignore[union-attr]
    precision, recall = _ratio(caught, flagged), _ratio(caught, due)
    return {
        "items": items,
        "valid": len(answered),
        "accuracy": _round(_ratio(right, items)),
        "macroF1": _round(macro_f1(pairs)),
        "withinOne": _round(_ratio(near, items)),
        "flagPrecision": _round(precision),
        "flagRecall": _round(recall),
        "flagF1": _round(_f1(precision, recall)),
        "invalidRate": _round(_ratio(items - len(answered), items)),
    }


def macro_f1(pairs: Sequence[Pair]) -> float:
    """The mean of each labelled priority's F1 (a priority no label holds is left out)."""
    present = [p for p in PRIORITIES if any(pair.expected.priority == p for pair in pairs)]
    scores = []
    for priority in present:
        predicted = [pair for pair in pairs if pair.predicted is not None and pair.predicted.priority == priority]
        true_positives = sum(1 for pair in predicted if pair.expected.priority == priority)
        labelled = sum(1 for pair in pairs if pair.expected.priority == priority)
        scores.append(_f1(_ratio(true_positives, len(predicted)), _ratio(true_positives, labelled)))
    return sum(scores) / len(scores) if scores else 0.0


def confusion(pairs: Iterable[Pair]) -> dict[str, dict[str, int]]:
    """How many orders of each labelled priority got each answer (`invalid`: none)."""
    matrix = {expected: dict.fromkeys((*PRIORITIES, INVALID), 0) for expected in PRIORITIES}
    for pair in pairs:
        answer = pair.predicted.priority if pair.predicted is not None else INVALID
        matrix[pair.expected.priority][answer] += 1
    return matrix


def percentile(values: Sequence[float], share: float) -> float:
    """The nearest-rank percentile (`share` 50 for the median): a value that was measured, never interpolated."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[max(0, math.ceil(share / 100 * len(ordered)) - 1)]


def distance(expected: str, predicted: str | None) -> int:
    """How many levels apart two priorities are; a missing answer is further than any (len(PRIORITIES))."""
    if predicted is None:
        return len(PRIORITIES)
    return abs(PRIORITIES.index(expected) - PRIORITIES.index(predicted))


def _distance(pair: Pair) -> int:
    return distance(pair.expected.priority, pair.predicted.priority if pair.predicted else None)


def _ratio(part: int, whole: int) -> float:
    return part / whole if whole else 0.0


def _f1(precision: float, recall: float) -> float:
    return 2 * precision * recall / (precision + recall) if precision + recall else 0.0


def _round(value: float) -> float:
    return round(value, PLACES)
