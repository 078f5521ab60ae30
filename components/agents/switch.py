"""The triage agent's kill switch: a card with its state and one button, and a banner at the top of the page
while it is off. Turning it off asks first; turning it on does not."""

from collections.abc import Awaitable, Callable

from nicegui import ui

from components.confirm import confirm
from components.runtime import session
from desk.agent.triage import policy
from desk.config import get_settings
from desk.db.client import get_db

ON_NOTE = "New work orders are triaged as they arrive."
OFF_NOTE = "Nothing is triaged; new orders wait."


class TriageSwitch:
    """`banner` and `card` draw it (in that order on the page); `show` follows a state read elsewhere."""

    def __init__(self, visit: session.Visit, *, on: bool, switched: Callable[[bool], Awaitable[None]]) -> None:
        self.visit, self.on, self.switched = visit, on, switched

    def banner(self) -> None:
        self.off_banner = ui.card().classes("w-full bg-red-1").mark("agents-off-banner")
        with self.off_banner, ui.row().classes("items-center gap-2"):
            ui.icon("power_off", size="md").classes("text-red-8")
            ui.label(
                "The triage agent is turned off. New work orders wait untriaged until it is turned on again."
            ).classes("font-medium")

    def card(self) -> None:
        with ui.card().classes("w-80 max-md:w-full gap-3 items-center justify-center").mark("switch-card"):
            ui.label("Triage agent").classes("text-sm text-grey-7")
            self.state = ui.label().classes("text-5xl font-bold").mark("switch-state")
            self.note = ui.label().classes("text-sm text-grey-8 text-center")
            self.button = ui.button(on_click=self._toggle).props("size=lg").mark("switch-button")
        self.show(self.on)

    def show(self, on: bool) -> None:
        self.on = on
        self.state.set_text("ON" if on else "OFF")
        self.state.classes(replace="text-5xl font-bold text-green-8" if on else "text-5xl font-bold text-red-8")
        self.note.set_text(
            "New work orders are triaged as they arrive." if on else "Nothing is triaged; new orders wait."
        )
        self.button.set_text("Turn off" if on else "Turn on")
        self.button.props.update(color="negative" if on else "positive", icon="power_off" if on else "power")
        self.off_banner.set_visibility(not on)

    async def _toggle(self) -> None:
        turning_on = not self.on
        if not turning_on and not await confirm(
            "Turn the triage agent off?",
            "Workers stop within one poll interval; new work orders wait, untriaged, until it is turned on again.",
            action="Turn off",
            marker="confirm-switch-off",
        ):
            return
        actor = await self.visit.actor()
        config = await policy.set_enabled(db=get_db(), settings=get_settings(), actor=actor, enabled=turning_on)
        self.show(config.enabled)
        ui.notify(f"The triage agent is {'on' if config.enabled else 'off'}.", type="positive")
        await self.switched(config.enabled)
