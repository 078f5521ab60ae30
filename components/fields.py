"""Form problems shown where a person looks: each message beside its field, the rest below the form."""

from nicegui import ui
from pydantic import ValidationError

from desk.errors import DeskError


def clear_problems(inputs: dict[str, ui.element], problem: ui.label | None = None) -> None:
    for element in inputs.values():
        element.error = None
    if problem is not None:
        problem.set_text("")


def show_problems(error: ValidationError | DeskError, inputs: dict[str, ui.element], problem: ui.label | None) -> None:
    """Each message beside its field (pydantic's location or the service's `details.field`); the rest below."""
    if isinstance(error, DeskError):
        items = [((error.details or {}).get("field"), error.message)]
    else:
        items = [(str(item["loc"][0]) if item["loc"] else None, sentence(item)) for item in error.errors()]
    for field, message in items:
        element = inputs.get(field or "")
        if element is not None:
            element.error = message
        elif problem is not None:
            problem.set_text(message)
        else:
            ui.notify(message, type="negative")


def sentence(item: dict) -> str:
    """A pydantic problem as a sentence a person can act on."""
    context = item.get("ctx") or {}
    if item["type"] == "value_error":  # our own validators' words, e.g. "must be an email address"
        text = str(context.get("error", item["msg"]))
        return text[:1].upper() + text[1:] + "."
    limit = context.get("max_length") or context.get("min_length")
    return {
        "string_too_short": "Required.",
        "string_too_long": f"At most {limit} characters.",
        "missing": "Required.",
        "literal_error": "Choose one of the options.",
    }.get(item["type"], item["msg"])
