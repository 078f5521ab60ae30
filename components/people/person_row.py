"""One person on the users page: their row (name, email, last login, role, AI, access, lock) and its dialogs.

Every control saves at once through the users service; a refused change puts the control back to
what is stored (`shown`). The page (pages/admin_users.py) draws one row per person and, while it is
open, hands a row what other admins changed (`UserRow.show`).
"""

from collections.abc import Iterable

from nicegui import ui
from pydantic import ValidationError

from components.confirm import confirm
from components.fields import clear_problems, new_password, sentence, show_problems
from components.formats import ago, when
from components.once import one_at_a_time
from components.people.demotion import ask_to_make_viewer, orders
from components.people.tokens import token_row
from components.runtime import session
from desk.auth import service as auth_service
from desk.auth.models import TokenRead
from desk.db.client import get_db
from desk.errors import DeskError
from desk.labels import ROLE_LABELS, ROLE_NOUNS
from desk.users import handover
from desk.users import service as users_service
from desk.users.models import UserAdminUpdate, UserRead


class UserRow:
    """One person with their controls; `shown` is what is stored, so a refused change can be put back."""

    def __init__(self, visit: session.Visit, person: UserRead, *, you: bool) -> None:
        self.visit, self.shown = visit, person
        self.saving = False  # a change of this row is on its way to the database
        with ui.row().classes("w-full items-center gap-3 px-3 py-1 border-b").mark(f"user-row user:{person.email}"):
            with ui.row().classes("w-40 items-center gap-1 no-wrap"):
                self.name = ui.label(person.name).classes("wrap-anywhere").mark("user-name")
                if you:
                    ui.label("(you)").classes("text-xs text-grey-7")
            self.email = ui.label(person.email).classes("w-56 wrap-anywhere text-sm").mark("user-email")
            with ui.label().classes("w-28 text-sm text-grey-8").mark("last-login") as self.last:
                self.last_at = ui.tooltip()
            self._show_last_login()
            self.role = (
                ui.select(ROLE_LABELS, value=person.role).props("dense options-dense").classes("w-32").mark("role")
            )
            self.role.on_value_change(lambda e: self.change("role", e.value))
            self.ai = ui.switch(_ai_text(person.ai_enabled), value=person.ai_enabled).classes("w-28").mark("ai")
            self.ai.on_value_change(lambda e: self.change("ai_enabled", e.value))
            self.active = ui.switch(_active_text(person.active), value=person.active).mark("active")
            self.active.on_value_change(lambda e: self.change("active", e.value))
            self._name_controls()
            if you:  # an admin cannot demote or deactivate themselves: no control that only leads to a refusal
                for control in (self.role, self.active):
                    control.disable()
                    control.tooltip("Another admin can change your role or deactivate you.")
            self.lock_area = ui.row().classes("items-center gap-1 no-wrap")
            self._show_lock()
            ui.space()
            # icons, each named by its tooltip and for screen readers: with words the three wrapped onto a
            # second line under every person, even on a wide screen
            actions = (
                ("edit", "Edit name and email", self.edit_identity, "edit-person"),
                ("vpn_key", "API tokens", self.show_tokens, "tokens"),
                ("lock_reset", "Reset password", self.reset_password, "reset"),
            )
            for icon, words, action, marker in actions:
                button = ui.button(icon=icon, on_click=action).props("flat round dense").mark(marker)
                button.props["aria-label"] = words
                button.tooltip(words)

    def show(self, person: UserRead) -> None:
        """`person` as stored now (another admin changed them, or they logged in), drawn in place."""
        self.shown = person
        self.name.set_text(person.name)
        self.email.set_text(person.email)
        self._show_last_login()
        self._name_controls()
        self._show_stored()
        self._show_lock()

    def _show_last_login(self) -> None:
        at = self.shown.last_login_at
        self.last.set_text(ago(at) if at else "Never")
        self.last_at.set_text(when(at) if at else "")
        self.last_at.set_visibility(at is not None)

    def _name_controls(self) -> None:
        """Rows look alike: each control says whose it is."""
        self.role.props["aria-label"] = f"Role of {self.shown.name}"
        self.ai.props["aria-label"] = f"AI assistance for {self.shown.name}"
        self.active.props["aria-label"] = f"{self.shown.name} can log in"
        for control in (self.role, self.ai, self.active):
            control.update()

    async def change(self, field: str, value: object) -> None:
        if getattr(self.shown, field) == value:
            return  # the control was put back to what is stored
        self.saving = True  # the list's follow must not put the stored value back meanwhile
        try:
            await self._save(field, value)
        finally:
            self.saving = False

    async def _save(self, field: str, value: object) -> None:
        if field == "active" and not value:  # it logs the person out everywhere: a slip of the hand must not
            question = f"Deactivate {self.shown.name}? They are logged out everywhere at once."
            until = "They cannot log in until reactivated."
            if not await confirm(question, until, action="Deactivate", marker="confirm-deactivate"):
                self._show_stored()
                return
        returning = False  # a new viewer's open orders go back to the queue
        if field == "role" and value == "viewer":  # every change taken (a viewer reads only): as deliberate
            actor = await self.visit.actor()
            owned = await handover.open_orders_owned(db=get_db(), actor=actor, user_id=self.shown.id)
            chosen = await ask_to_make_viewer(self.shown.name, owned)
            if chosen is None:
                self._show_stored()
                return
            returning = chosen == "return"
        elif field == "role" and "admin" in (value, self.shown.role):  # admin rights given or taken
            name, noun = self.shown.name, ROLE_NOUNS[str(value)]
            what = (
                "They can then manage people and settings."
                if value == "admin"
                else "They lose the admin pages at once."
            )
            if not await confirm(f"Make {name} {noun}?", what, action=f"Make {noun}", marker="confirm-role"):
                self._show_stored()
                return
        try:
            self.shown = await self._update({field: value})
        except (ValidationError, DeskError) as error:
            message = error.message if isinstance(error, DeskError) else sentence(error.errors()[0])
            ui.notify(message, type="negative")
            self._show_stored()
            return
        self._show_stored()
        said = _changed(self.shown, field)
        if returning:
            actor = await self.visit.actor()
            back = await handover.return_to_queue(db=get_db(), actor=actor, user_id=self.shown.id)
            said += f" {orders(back)} went back to the queue." if back else ""
        ui.notify(said, type="positive")

    def _show_stored(self) -> None:
        self.role.value, self.ai.value, self.active.value = self.shown.role, self.shown.ai_enabled, self.shown.active
        self.ai.text, self.active.text = _ai_text(self.shown.ai_enabled), _active_text(self.shown.active)

    async def edit_identity(self) -> None:
        """Name and email in a dialog: the email is lower-cased and must be nobody else's."""
        person = self.shown
        with ui.dialog() as dialog, ui.card().classes("w-[28rem] gap-2").mark("edit-dialog"):
            ui.label("Name and email").classes("text-lg font-semibold")
            inputs = {
                "name": ui.input("Name", value=person.name).props("counter maxlength=100 autofocus").classes("w-full"),
                "email": ui.input("Email", value=person.email).props("autocomplete=off").classes("w-full"),
            }
            for field, element in inputs.items():
                element.mark(f"edit-person-{field}")
            problem = ui.label().classes("text-negative text-sm").mark("edit-person-problem")

            async def save() -> None:
                clear_problems(inputs, problem)
                values = {k: (e.value or "") for k, e in inputs.items()}
                changed = {k: v for k, v in values.items() if v != getattr(person, k)}
                if not changed:
                    dialog.submit(False)
                    return
                if saved := await self._update_or_explain(changed, inputs, problem):
                    self.shown = saved
                    dialog.submit(True)

            _cancel_or(dialog, "Save", save, "edit-person-save", inputs.values())
        if await _answer(dialog):
            self.name.set_text(self.shown.name)
            self.email.set_text(self.shown.email)
            ui.notify(f"Saved {self.shown.name} ({self.shown.email}).", type="positive")

    async def reset_password(self) -> None:
        person = self.shown
        with ui.dialog() as dialog, ui.card().classes("w-[28rem] gap-2").mark("reset-dialog"):
            ui.label("Reset password").classes("text-lg font-semibold")
            ui.label(f"New password for {person.name} ({person.email})").classes("wrap-anywhere")
            ui.label(
                "They are logged out everywhere, their API tokens stop working, and they need this password "
                "to log in again."
            ).classes("text-sm text-grey-7")
            password = new_password("New password").classes("w-full").props("autofocus").mark("reset-password")
            problem = ui.label().classes("text-negative text-sm")

            async def save() -> None:
                clear_problems({"password": password}, problem)
                if await self._update_or_explain({"password": password.value or ""}, {"password": password}, problem):
                    dialog.submit(True)

            _cancel_or(dialog, "Set password", save, "reset-save", [password])
        if await _answer(dialog):  # the typed password leaves the page with the dialog
            ui.notify(f"Password reset for {person.name}; their sessions have ended.", type="positive")

    async def _update(self, values: dict) -> UserRead:
        """Store `values` for this person through the users service; raises what it refuses."""
        data = UserAdminUpdate.model_validate(values)
        actor = await self.visit.actor()
        return await users_service.update_user(db=get_db(), actor=actor, user_id=self.shown.id, data=data)

    async def _update_or_explain(self, values: dict, inputs: dict, problem: ui.label) -> UserRead | None:
        """`_update` from a dialog; None when refused, the reasons shown beside `inputs` and in `problem`."""
        try:
            return await self._update(values)
        except (ValidationError, DeskError) as error:
            show_problems(error, inputs, problem)
            return None

    def _show_lock(self) -> None:
        self.lock_area.clear()
        if self.shown.locked_until is None:
            return
        with self.lock_area:
            ui.icon("lock", color="negative")
            ui.label(f"Locked until {when(auth_service.lock_ends(self.shown.locked_until))}").classes(
                "text-sm text-negative"
            ).mark("locked")
            ui.button("Unlock", on_click=self.unlock).props("flat dense").mark("unlock")

    async def unlock(self) -> None:
        try:
            actor = await self.visit.actor()
            self.shown = await users_service.unlock_user(db=get_db(), actor=actor, user_id=self.shown.id)
        except DeskError as error:
            ui.notify(error.message, type="negative")
            return
        self._show_lock()
        ui.notify(f"{self.shown.name} is unlocked and can log in again.", type="positive")

    async def show_tokens(self) -> None:
        await TokensDialog(self.visit, self.shown).open()


class TokensDialog:
    """A person's API tokens with their last use, each with Revoke (the secrets are never stored, so never shown)."""

    def __init__(self, visit: session.Visit, person: UserRead) -> None:
        self.visit, self.person = visit, person

    async def open(self) -> None:
        with ui.dialog() as self.dialog, ui.card().classes("w-[40rem] gap-2").mark("tokens-dialog"):
            ui.label(f"API tokens of {self.person.name}").classes("text-lg font-semibold wrap-anywhere")
            self.list_area = ui.column().classes("w-full gap-0")
            with ui.row().classes("w-full justify-end"):
                ui.button("Close", on_click=lambda: self.dialog.submit(None)).props("flat").mark("tokens-close")
        await self.show()
        await self.dialog
        if not self.dialog.is_deleted:  # unless the page closed meanwhile
            self.dialog.delete()

    async def show(self) -> None:
        actor = await self.visit.actor()
        tokens = await auth_service.list_tokens_of(db=get_db(), actor=actor, user_id=self.person.id)
        self.list_area.clear()
        with self.list_area:
            if not tokens:
                ui.label(f"{self.person.name} has no API tokens.").classes("text-grey-7 wrap-anywhere").mark(
                    "no-tokens"
                )
            for token in tokens:
                token_row(token, revoke=self.revoke)

    async def revoke(self, token: TokenRead) -> None:
        question = (f"Revoke {self.person.name}'s token?", token.name, "Programs using it stop working at once.")
        if not await confirm(*question, action="Revoke", marker="confirm-revoke"):
            return
        try:
            actor = await self.visit.actor()
            await auth_service.revoke_token_of(db=get_db(), actor=actor, user_id=self.person.id, token_id=token.id)
        except DeskError as error:
            ui.notify(error.message, type="negative")
        else:
            ui.notify(f"Token revoked for {self.person.name}.", type="positive")
        await self.show()


def _cancel_or(dialog: ui.dialog, label: str, save, marker: str, fields: Iterable[ui.input]) -> None:
    """A dialog's buttons: Cancel, and `label`, which runs `save`, as Enter in any of its `fields` does
    (a double press saves once)."""
    save = one_at_a_time(save)
    for field in fields:
        field.on("keydown.enter", save)
    with ui.row().classes("w-full justify-end"):
        ui.button("Cancel", on_click=lambda: dialog.submit(False)).props("flat")
        ui.button(label, on_click=save).mark(marker)


async def _answer(dialog: ui.dialog) -> bool:
    """Wait for the dialog and remove it; whether it was saved (not when the page closed meanwhile: the session
    ended or the role changed)."""
    done = await dialog
    if dialog.is_deleted:
        return False
    dialog.delete()
    return bool(done)


def _ai_text(enabled: bool) -> str:
    return "AI on" if enabled else "AI off"


def _active_text(active: bool) -> str:
    return "Active" if active else "Deactivated"


def _changed(person: UserRead, field: str) -> str:
    match field:
        case "role":
            return f"{person.name} is now {ROLE_NOUNS[person.role]}."
        case "ai_enabled" if person.ai_enabled:
            return f"AI assistance turned on for {person.name}."
        case "ai_enabled":  # the person's own choice too (profile): the admin must not think it is locked off
            return f"AI assistance turned off for {person.name}. They can turn it on again in their profile."
        case _:
            if person.active:
                return f"{person.name} can log in again."
            return f"{person.name} is deactivated; their sessions have ended."
