"""What a model must beat: always "medium" (what a new order already says), and a keyword rule a person could write."""

import re

from desk.agent.triage.eval.labels import LabelledOrder
from desk.agent.triage.eval.metrics import Label

ALWAYS_MEDIUM = Label("medium", False)

# First match wins, most urgent first. Stems, so "flooding" and "flooded" both count.
RULES: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "urgent",
        (
            "fire",
            "smoke",
            "gas",
            "flood",
            "sparks",
            "injur",
            "bleed",
            "unconscious",
            "break-in",
            "emergency",
            "electric shock",
            "trapped",
            "collapsed",
            "no power",
            "no heating",
        ),
    ),
    (
        "high",
        (
            "broken",
            "not working",
            "doesn't work",
            "does not work",
            "leak",
            "outage",
            "down",
            "locked out",
            "can't log in",
            "cannot log in",
            "urgent",
            "asap",
            "failed",
            "crash",
        ),
    ),
    ("low", ("would like", "could we", "nice to have", "when you have time", "no rush", "suggest", "wish", "paint")),
)


def keyword_rule(order: LabelledOrder) -> Label:
    """The first rule whose word occurs in the title or description; urgent ones flagged; else medium."""
    text = f"{order.title}\n{order.description}".casefold()
    for priority, words in RULES:
        if any(re.search(rf"\b{re.escape(word)}", text) for word in words):
            return Label(priority, priority == "urgent")
    return ALWAYS_MEDIUM
