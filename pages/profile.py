"""/app/profile: one's own password, personal API tokens and AI assistance; open to every role."""

from collections.abc import Awaitable, Callable

from nicegui import APIRouter, ui
from pydantic import ValidationError

from components import theme
from components.confirm import confirm
from components.fields import clear_problems, new_password, show_problems
from components.frame import notify_next_page
from components.notifications.switches import switches_card
from components.once import one_at_a_time
from components.people.tokens import SCOPE_WORDS, token_row
from components.runtime import session
from components.runtime.page import desk_page
from desk.auth import service as auth_service
from desk.auth.models import MAX_TOKEN_DAYS, TOKEN_DAYS, PasswordChange, TokenCreate, TokenCreated, TokenRead
from desk.config import get_settings
from desk.db.client import get_db
from desk.errors import DeskError
from desk.notifications import service as notifications
from desk.notifications.models import Preferences, PreferencesUpdate
from desk.users import service as users_service

router = APIRouter()
PATH = "/app/profile"


@desk_page(router, PATH, title="Profile")
async def profile_page(visit: session.Visit, me: session.SessionUser) -> None:
    told = await notifications.get_preferences(db=get_db(), actor=me.actor)  # read before drawing: one paint
    with ui.column().classes("gap-0"):
        theme.page_heading(ui.label(me.name).classes("text-2xl font-semibold wrap-anywhere").mark("profile-name"))
        ui.label(f"{me.email} · {me.role}").classes("text-grey-7 wrap-anywhere")
    tokens = TokensCard(visit, admin=me.is_admin)
    _password_card(visit, on_tokens_revoked=tokens.show)
    _ai_card(visit, enabled=me.ai_enabled)
    _notifications_card(visit, me, told)
    await tokens.build()


def _password_card(visit: session.Visit, *, on_tokens_revoked: Callable[[], Awaitable[None]]) -> None:
    with ui.card().classes("w-full max-w-xl gap-2").mark("password-card"):
        ui.label("Change password").classes("text-lg font-semibold")
        current = ui.input("Current password", password=True).props("autocomplete=current-password")
        current.classes("w-full").mark("current-password")
        new = new_password("New password").classes("w-full").mark("new-password")
        repeat = ui.input("Repeat the new password", password=True).props("autocomplete=new-password")
        repeat.classes("w-full").mark("repeat-password")
        ui.label("At least 12 characters and not a common password. Your other sessions will be logged out.").classes(
            "text-sm text-grey-7"
        )
        revoke = ui.checkbox("Also revoke all my API tokens (programs using them stop working)").mark("revoke-tokens")
        problem = ui.label().classes("text-negative text-sm").mark("password-problem")
        # The model's and the service's field names, each beside the input it is about.
        inputs = {"current_password": current, "currentPassword": current, "new_password": new, "newPassword": new}
        inputs["repeat"] = repeat

        @one_at_a_time
        async def change() -> None:
            clear_problems(inputs, problem)
            if (new.value or "") != (repeat.value or ""):
                repeat.error = "The two new passwords are not the same."
                return
            try:
                data = PasswordChange.model_validate(
                    {"current_password": current.value or "", "new_password": new.value or ""}
                    | {"revoke_tokens": bool(revoke.value)}
                )
                await users_service.change_own_password(
                    db=get_db(),
                    actor=await visit.actor(),
                    current=data.current_password,
                    new=data.new_password,
                    keep_session=visit.secret,  # this browser stays logged in
                    revoke_tokens=data.revoke_tokens,
                )
            except (ValidationError, DeskError) as error:
                show_problems(error, inputs, problem)
                return
            current.value, new.value, repeat.value = "", "", ""
            if data.revoke_tokens:
                revoke.value = False
                message = "Password changed. Your other sessions are logged out and your API tokens revoked."
                ui.notify(message, type="positive")
                await on_tokens_revoked()
            else:
                ui.notify("Password changed. Your other sessions have been logged out.", type="positive")

        with ui.row().classes("w-full justify-end"):
            ui.button("Change password", on_click=change).mark("change-password")


def _ai_card(visit: session.Visit, *, enabled: bool) -> None:
    with ui.card().classes("w-full max-w-xl gap-1").mark("ai-card"):
        ui.label("AI assistance").classes("text-lg font-semibold")
        ui.label("The copilot and its suggestions on your work orders.").classes("text-sm text-grey-7")
        switch = ui.switch("Use AI assistance", value=enabled).mark("own-ai")
        if not get_settings().ai_enabled:  # the choice is kept, but it changes nothing until the desk has AI
            ui.label("AI is not enabled on this desk; your choice applies once it is.").classes(
                "text-sm text-grey-8"
            ).mark("own-ai-desk-off")

        async def toggle(value: bool) -> None:
            try:
                # Turning it off stops a running copilot too (the service fires desk.users.access).
                await users_service.set_own_ai(db=get_db(), actor=await visit.actor(), enabled=value)
            except DeskError as error:
                ui.notify(error.message, type="negative")
                return
            # drawn again, so the header's assistant (and Ctrl+K) comes and goes with the switch
            notify_next_page(f"AI assistance is {'on' if value else 'off'} for you.")
            ui.navigate.to(PATH)

        switch.on_value_change(lambda e: toggle(e.value))


def _notifications_card(visit: session.Visit, me: session.SessionUser, current: Preferences) -> None:
    async def save(change: PreferencesUpdate) -> Preferences:
        return await notifications.update_preferences(db=get_db(), actor=await visit.actor(), data=change)

    blurb = "What you hear about, in the bell and by email. Nothing you do yourself is ever sent to you."
    mail = get_settings().mail_enabled
    switches_card("Notifications", blurb, current, save, admin=me.is_admin, mail_enabled=mail, marker="own-notify")


class TokensCard:
    """Personal API tokens: create with chosen scopes and lifetime (the secret shown once), list without secrets,
    revoke."""

    def __init__(self, visit: session.Visit, *, admin: bool) -> None:
        self.visit = visit
        self.offered = [scope for scope in SCOPE_WORDS if admin or scope != "admin"]  # the admin scope for admins

    async def build(self) -> None:
        with ui.card().classes("w-full gap-2").mark("tokens-card"):
            ui.label("Personal API tokens").classes("text-lg font-semibold")
            ui.label("For scripts and other programs: send one as “Authorization: Bearer <token>”.").classes(
                "text-sm text-grey-7"
            )
            create = one_at_a_time(self.create)  # Enter and the button alike: a double press makes one token
            with ui.row().classes("items-start gap-3"):
                self.name = ui.input("Token name", placeholder="e.g. Reporting script").props("counter maxlength=100")
                self.name.classes("w-72").mark("token-name").on("keydown.enter", create)
                days = f"Expires in days (1 to {MAX_TOKEN_DAYS})"
                self.days = ui.number(days, value=TOKEN_DAYS, min=1, max=MAX_TOKEN_DAYS, precision=0)
                self.days.classes("w-52").mark("token-days")
                ui.button("Create token", icon="add", on_click=create).mark("create-token")
            with ui.row().classes("items-center gap-4").mark("token-scopes-choice"):
                ui.label("It may:").classes("text-sm text-grey-8")
                self.scopes = {
                    scope: ui.checkbox(SCOPE_HINTS[scope], value=scope != "admin").mark(f"scope-{scope}")
                    for scope in self.offered
                }
            self.problem = ui.label().classes("text-negative text-sm").mark("token-problem")
            self.list_area = ui.column().classes("w-full gap-0")
        await self.show()

    async def show(self) -> None:
        tokens = await auth_service.list_tokens(db=get_db(), actor=await self.visit.actor())
        self.list_area.clear()
        with self.list_area:
            if not tokens:
                ui.label("You have no API tokens.").classes("text-grey-7").mark("no-tokens")
            for token in tokens:
                token_row(token, revoke=self.revoke)

    async def create(self) -> None:
        inputs = {"name": self.name, "expiresInDays": self.days, "expires_in_days": self.days}
        clear_problems(inputs, self.problem)
        chosen = [scope for scope, box in self.scopes.items() if box.value]
        days = int(self.days.value) if self.days.value is not None else None  # empty: "Enter a number."
        try:
            data = TokenCreate.model_validate(
                {"name": self.name.value or "", "scopes": chosen, "expires_in_days": days}
            )
            created = await auth_service.create_token(
                db=get_db(),
                actor=await self.visit.actor(),
                name=data.name,
                scopes=data.scopes,
                expires_in_days=data.expires_in_days,
            )
        except (ValidationError, DeskError) as error:
            show_problems(error, inputs, self.problem)
            return
        self.name.value = ""
        await self.show()
        await _show_secret_once(created)

    async def revoke(self, token: TokenRead) -> None:
        question = ("Revoke this token?", token.name, "Programs using it stop working at once. This cannot be undone.")
        if not await confirm(*question, action="Revoke", marker="confirm-revoke"):
            return
        try:
            await auth_service.revoke_token(db=get_db(), actor=await self.visit.actor(), token_id=token.id)
        except DeskError as error:
            ui.notify(error.message, type="negative")
        else:
            ui.notify("Token revoked.", type="positive")
        await self.show()


SCOPE_HINTS = {"read": "Read (GET)", "write": "Write (change things)", "admin": "Admin (the admin API)"}


async def _show_secret_once(created: TokenCreated) -> None:
    """The only time the secret is on screen: the dialog and the secret leave the page when it closes."""
    with ui.dialog().props("persistent") as dialog, ui.card().classes("w-[36rem] gap-2").mark("token-dialog"):
        ui.label("Your new API token").classes("text-lg font-semibold")
        ui.label(created.name).classes("wrap-anywhere font-medium")
        ui.label(created.secret).classes("font-mono break-all bg-grey-2 rounded p-2 w-full").mark("token-secret")
        # a dark orange: Quasar's amber "warning" on white was hard to read
        ui.label("Copy it now: you won't see this token again.").classes("text-orange-10 font-medium")

        def copy() -> None:
            ui.clipboard.write(created.secret)
            ui.notify("Copied to the clipboard.")

        with ui.row().classes("w-full justify-end"):
            ui.button("Copy", icon="content_copy", on_click=copy).props("outline").mark("copy-token")
            ui.button("Done", on_click=lambda: dialog.submit(None)).mark("token-done")
    await dialog
    if not dialog.is_deleted:  # unless the page closed meanwhile
        dialog.delete()
