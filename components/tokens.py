"""One API token as a row with its Revoke button: the person's own on the profile, anyone's on the Users page."""

from collections.abc import Awaitable, Callable

from nicegui import ui

from components.formats import ago, when
from desk.auth.models import TokenRead


def token_row(token: TokenRead, *, revoke: Callable[[TokenRead], Awaitable[None]]) -> None:
    """Name, prefix, when made and last used (never the secret), and Revoke."""
    with ui.row().classes("w-full items-center gap-3 py-1 border-b").mark(f"token-row token:{token.id}"):
        ui.label(token.name).classes("grow wrap-anywhere font-medium").mark("token-row-name")
        ui.label(f"{token.prefix}…").classes("font-mono text-xs text-grey-7")
        ui.label(f"Created {when(token.created_at)}").classes("text-sm text-grey-8")
        if token.last_used_at:
            used = ui.label(f"Last used {ago(token.last_used_at)}").tooltip(when(token.last_used_at))
        else:
            used = ui.label("Never used")
        used.classes("text-sm text-grey-8 w-36").mark("token-used")
        ui.button("Revoke", on_click=lambda: revoke(token)).props("flat dense color=negative").mark("revoke")
