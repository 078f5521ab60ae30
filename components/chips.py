"""Priority and status shown as coloured chips, with their words (desk/labels.py: never colour alone)."""

from nicegui import ui

from desk.labels import PRIORITY_LABELS, STATUS_LABELS

# White text on each at 4.5:1 or more (WCAG AA); pending is amber, which only dark text reads on.
PRIORITY_COLORS = {"low": "grey-8", "medium": "blue-9", "high": "deep-orange-10", "urgent": "red-9"}
STATUS_COLORS = {"pending": "amber-8", "in_progress": "indigo-6", "done": "green-9", "cancelled": "grey-8"}
DARK_TEXT = {"pending"}


def text_color(status: str) -> str:
    return "black" if status in DARK_TEXT else "white"


def priority_chip(priority: str) -> ui.chip:
    return ui.chip(PRIORITY_LABELS[priority], color=PRIORITY_COLORS[priority], text_color="white").props("dense square")


def status_chip(status: str) -> ui.chip:
    return ui.chip(STATUS_LABELS[status], color=STATUS_COLORS[status], text_color=text_color(status)).props("dense")
