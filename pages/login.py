"""/login: email and password, with plain messages for a wrong password, lockout and rate limit."""

from fastapi import Request
from fastapi.responses import RedirectResponse
from nicegui import APIRouter, ui

from components import theme
from components.runtime import session
from components.work_order import drafts
from desk.errors import DeskError

router = APIRouter()


@router.page("/")
async def index(request: Request):
    if await session.current_user() is None:
        return session.to_login(request)
    return RedirectResponse("/app", status_code=303)


@router.page("/login")
async def login_page(request: Request, redirect_to: str | None = None, reason: str | None = None) -> None:
    target = session.safe_target(redirect_to)
    if await session.current_user() is not None:
        ui.navigate.to(target)
        return
    drafts.own(None)  # no session here: every draft this browser kept goes (an ended session's, for the next person)
    ip = request.client.host if request.client else "unknown"
    browser = session.browser_of(request)
    ui.page_title("Log in · Work Order Desk")
    theme.look()

    async def submit() -> None:
        message.set_text("")
        if not email.value or not password.value:
            message.set_text("Enter your email and password.")
            return
        button.disable()
        try:
            signed_in = await session.sign_in(
                email=email.value, password=password.value, ip=ip, browser=browser, redirect_to=target
            )
        except DeskError as error:
            message.set_text(error.message)
            password.set_value("")
            return
        finally:
            button.enable()
        ui.navigate.to(signed_in)  # an HTTP request sets the new session cookie, then goes on to the target

    with ui.card().classes("absolute-center w-96 gap-3"):
        theme.page_heading(ui.label("Work Order Desk").classes("text-xl font-semibold"))
        if reason == session.ENDED:
            ui.label(
                "Your session ended (you logged out, it expired, or an admin changed your account). "
                "Log in again to carry on. Edits you had not saved went with it, "
                "so that nobody else on this browser finds them."
            ).classes("text-sm bg-blue-1 p-2 rounded").mark("login-reason")
        email = ui.input("Email").props("autofocus autocomplete=username").classes("w-full").mark("email")
        password = ui.input("Password", password=True).props("autocomplete=current-password").classes("w-full")
        password.mark("password").on("keydown.enter", submit)
        message = ui.label().classes("text-negative text-sm").mark("login-message")
        button = ui.button("Log in", on_click=submit).classes("w-full").mark("login")


@router.get(session.SIGNED_IN_PATH, include_in_schema=False)
async def signed_in(request: Request, ticket: str = "", redirect_to: str | None = None) -> RedirectResponse:
    return await session.finish_sign_in(request, ticket, redirect_to)
