"""Priority and status shown as coloured chips, with their words (never colour alone)."""

from nicegui import ui

PRIORITY_COLORS = {"low": "grey-6", "medium": "blue-6", "high": "orange-8", "urgent": "red-7"}
STATUS_COLORS = {"pending": "amber-8", "in_progress": "indigo-6", "done": "green-7", "cancelled": "grey-7"}
STATUS_LABELS = {"pending": "Pending", "in_progress": "In progress", "done": "Done", "cancelled": "Cancelled"}
PRIORITY_LABELS = {"low": "Low", "medium": "Medium", "high": "High", "urgent": "Urgent"}
CHOICE_LABELS = {"priority": PRIORITY_LABELS, "status": STATUS_LABELS}  # an order's fields whose values have words
FIELD_NAMES = {  # an order's fields as a person reads them
    "title": "Title",
    "description": "Description",
    "priority": "Priority",
    "status": "Status",
    "ownerId": "Owner",
}


def priority_chip(priority: str) -> ui.chip:
    return ui.chip(PRIORITY_LABELS[priority], color=PRIORITY_COLORS[priority], text_color="white").props("dense square")


def status_chip(status: str) -> ui.chip:
    return ui.chip(STATUS_LABELS[status], color=STATUS_COLORS[status], text_color="white").props("dense")
