"""One API token as a row with its Revoke button: the person's own on the profile, anyone's on the Users page."""

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

from nicegui import ui

from components.formats import ago, when
from desk.auth.models import TokenRead

SCOPE_WORDS = {"read": "Read", "write": "Write", "admin": "Admin"}


def token_row(token: TokenRead, *, revoke: Callable[[TokenRead], Awaitable[None]]) -> None:
    """Name, prefix, scopes, when made, when it expires and when last used (never the secret), and Revoke."""
    with ui.row().classes("w-full items-center gap-3 py-1 border-b").mark(f"token-row token:{token.id}"):
        ui.label(token.name).classes("grow wrap-anywhere font-medium").mark("token-row-name")
        ui.label(f"{token.prefix}…").classes("font-mono text-xs text-grey-7")
        ui.label(scope_text(token.scopes)).classes("text-sm text-grey-8").mark("token-scopes")
        ui.label(f"Created {when(token.created_at)}").classes("text-sm text-grey-8")
        if token.expires_at <= datetime.now(UTC):
            expiry = ui.label("Expired").classes("text-sm text-negative font-medium")
        else:
            expiry = ui.label(f"Expires {token.expires_at.astimezone(UTC):%d %b %Y}").classes("text-sm text-grey-8")
        expiry.tooltip(when(token.expires_at)).mark("token-expiry")
        if token.last_used_at:
            used = ui.label(f"Last used {ago(token.last_used_at)}").tooltip(when(token.last_used_at))
        else:
            used = ui.label("Never used")
        used.classes("text-sm text-grey-8 w-36").mark("token-used")
        ui.button("Revoke", on_click=lambda: revoke(token)).props("flat dense color=negative").mark("revoke")


def scope_text(scopes: list[str]) -> str:
    """`Read, Write, Admin`: what the token may do, in words."""
    return ", ".join(SCOPE_WORDS[scope] for scope in scopes)
