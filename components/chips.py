"""Priority and status shown as coloured chips, with their words (desk/labels.py: never colour alone)."""

from nicegui import ui

from desk.labels import PRIORITY_LABELS, STATUS_LABELS

PRIORITY_COLORS = {"low": "grey-6", "medium": "blue-6", "high": "orange-8", "urgent": "red-7"}
STATUS_COLORS = {"pending": "amber-8", "in_progress": "indigo-6", "done": "green-7", "cancelled": "grey-7"}


def priority_chip(priority: str) -> ui.chip:
    return ui.chip(PRIORITY_LABELS[priority], color=PRIORITY_COLORS[priority], text_color="white").props("dense square")


def status_chip(status: str) -> ui.chip:
    return ui.chip(STATUS_LABELS[status], color=STATUS_COLORS[status], text_color="white").props("dense")
