"""The notification switches, kind by kind, in the desk and by email: a person's own (the profile) or the desk's
defaults (an admin's settings page). Each switch saves on its own; the service says who may change which."""

from collections.abc import Awaitable, Callable

from nicegui import ui

from desk.errors import DeskError
from desk.labels import NOTIFICATION_CHANNELS, NOTIFICATION_KINDS
from desk.notifications.models import Preferences, PreferencesUpdate

Save = Callable[[PreferencesUpdate], Awaitable[Preferences]]


def switches_card(
    title: str, blurb: str, current: Preferences, save: Save, *, admin: bool, mail_enabled: bool, marker: str
) -> None:
    values = current.model_dump(by_alias=True)
    kinds = [kind for kind in NOTIFICATION_KINDS if admin or kind != "flagged"]  # flags reach admins alone
    with ui.card().classes("w-full max-w-xl gap-2").mark(marker):
        ui.label(title).classes("text-lg font-semibold")
        ui.label(blurb).classes("text-sm text-grey-7")
        with ui.grid(columns="1fr auto auto").classes("w-full items-center gap-x-4 gap-y-1"):
            ui.label("")
            for channel in NOTIFICATION_CHANNELS.values():
                ui.label(channel).classes("text-sm font-semibold")
            for kind in kinds:
                ui.label(NOTIFICATION_KINDS[kind]).classes("text-sm")
                for channel in NOTIFICATION_CHANNELS:
                    switch = ui.switch(value=values[channel][kind]).mark(f"{marker}-{channel}-{kind}")
                    switch.props["aria-label"] = f"{NOTIFICATION_KINDS[kind]}: {NOTIFICATION_CHANNELS[channel]}"
                    switch.on_value_change(lambda e, c=channel, k=kind: _save(save, c, k, e.value))
        if not mail_enabled:
            ui.label("This desk sends no email yet; email choices apply once it does.").classes(
                "text-sm text-grey-8"
            ).mark(f"{marker}-no-mail")


async def _save(save: Save, channel: str, kind: str, on: bool) -> None:
    try:
        await save(PreferencesUpdate.model_validate({channel: {kind: on}}))
    except DeskError as error:
        ui.notify(error.message, type="negative")
        return
    ui.notify("Saved.", type="positive")
