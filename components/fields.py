"""Form fields: a new password one can show, and problems shown where a person looks (each message beside its
field, the rest below the form)."""

from nicegui import ui
from pydantic import ValidationError

from desk import problems
from desk.auth import passwords
from desk.errors import DeskError


def new_password(label: str) -> ui.input:
    """A password field with a Show/Hide button a keyboard reaches and a screen reader names.

    NiceGUI's `password_toggle_button` is a bare icon: a mouse can click it, Tab passes it by.
    """
    field = ui.input(label, password=True).props("autocomplete=new-password")
    with field.add_slot("append"):
        toggle = ui.button(icon="visibility_off").props("flat round dense aria-label='Show password'")
        toggle.classes("text-grey-8").mark("show-password")

    def flip() -> None:
        hidden = field.props.get("type") == "password"
        field.props["type"] = "text" if hidden else "password"
        toggle.props["icon"] = "visibility" if hidden else "visibility_off"
        toggle.props["aria-label"] = "Hide password" if hidden else "Show password"

    toggle.on_click(flip)
    return field


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
    for field, said in items:
        element = inputs.get(field or "")
        # the browser empties a number field of what is not a number ("abc"): "Required." would puzzle them
        message = "Enter a number." if isinstance(element, ui.number) and said == "Required." else said
        if element is not None:
            element.error = message
        elif problem is not None:
            problem.set_text(message)
        else:
            ui.notify(message, type="negative")


def sentence(item: dict) -> str:
    """A pydantic problem as a sentence a person can act on: a form's own words, else the API's as a sentence."""
    limit = (item.get("ctx") or {}).get("max_length")
    in_a_form = {
        "string_too_short": "Required.",
        "string_too_long": f"At most {limit} characters.",
        "missing": "Required.",
        "not_null": "Required.",  # an empty number field: the API's words ("leave the field out") are not a form's
        "literal_error": "Choose one of the options.",
    }.get(item["type"])
    if in_a_form is not None:
        return in_a_form
    text = problems.message(item)  # never pydantic's "Input should be ..."
    return text[:1].upper() + text[1:] + "."


def password_problem(password: str) -> str | None:
    """What the password policy says of `password` (None: nothing), to show beside its field with the form's
    other problems at once: the schema's checks come first, the policy's only once they pass. The service
    checks it again when the form is sent."""
    try:
        passwords.check_policy(password)
    except DeskError as error:
        return error.message
    return None
