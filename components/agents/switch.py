"""The desk-wide AI switch (the kill switch): a card with its state, who flipped it and when, and one button, and
a banner at the top of the page while it is off. Turning it off asks first; turning it on does not.

It stops every agent (the triage agent and the assistant) and is kept apart from the triage policy, so
flipping it never trips an admin's open policy form; the triage agent's own on/off is in that form.
"""

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

from nicegui import ui

from components.confirm import confirm
from components.formats import when
from components.once import one_at_a_time
from components.runtime import session
from desk.agent.triage import service as triage
from desk.agent.triage.models import AiSwitchRead
from desk.db.client import get_db
from desk.users import service as users_service

# "may": on, this switch holds nothing off, but the triage agent's own switch in the policy beside it may
ON_NOTE = "The triage agent (as its policy says) and the assistant may run."
OFF_BANNER = "AI is turned off on this desk: the triage agent and the assistant do not run. New work orders wait."


class AiSwitch:
    """`banner` and `card` draw it (in that order on the page); `show` follows a state read elsewhere."""

    def __init__(self, visit: session.Visit, *, state: AiSwitchRead, switched: Callable[[bool], Awaitable[None]]):
        self.visit, self.state, self.switched = visit, state, switched
        # a double click asks once (its second click would open a second "Turn AI off?" left behind the first);
        # wrapped here, per page: a class-wide guard would ignore every other admin while one dialog is open
        self._toggle = one_at_a_time(self._toggle)

    @property
    def on(self) -> bool:
        return self.state.enabled

    def banner(self) -> None:
        self.off_banner = ui.card().classes("w-full bg-red-1").mark("agents-off-banner")
        with self.off_banner, ui.row().classes("items-center gap-2"):
            ui.icon("power_off", size="md").classes("text-red-8")
            ui.label(OFF_BANNER).classes("font-medium")

    def card(self) -> None:
        with ui.card().classes("w-80 max-md:w-full gap-3 items-center justify-center").mark("switch-card"):
            ui.label("AI on this desk").classes("text-sm text-grey-7")
            self.label = ui.label().classes("text-5xl font-bold").mark("switch-state")
            self.note = ui.label().classes("text-sm text-grey-8 text-center").mark("switch-note")
            self.button = ui.button(on_click=self._toggle).props("size=lg").mark("switch-button")

    async def show(self, state: AiSwitchRead) -> None:
        """Draw `state`: ON or OFF, and who turned it off and when ("Turned off by Dana at 10:02 UTC")."""
        self.state = state
        on = state.enabled
        self.label.set_text("ON" if on else "OFF")
        self.label.classes(replace="text-5xl font-bold text-green-8" if on else "text-5xl font-bold text-red-8")
        self.note.set_text(ON_NOTE if on else await _turned_off(state))
        self.button.set_text("Turn off" if on else "Turn on")
        self.button.props.update(color="negative" if on else "positive", icon="power_off" if on else "power")
        self.off_banner.set_visibility(not on)

    async def _toggle(self) -> None:
        turning_on = not self.on
        if not turning_on and not await confirm(
            "Turn AI off for the whole desk?",
            "The triage agent stops within a second, its passes in flight are dropped and their orders wait; the"
            " assistant stops every conversation and answers no one until AI is turned on again.",
            action="Turn off",
            marker="confirm-switch-off",
        ):
            return
        actor = await self.visit.actor()
        state = await triage.set_ai(db=get_db(), actor=actor, on=turning_on)
        self.state = state
        # the page's figures first, the switch last: once it shows the new state this click is done, and the next
        # one (turning it back at once) is not taken for a double click and dropped
        await self.switched(state.enabled)
        await self.show(state)
        ui.notify(
            "AI is turned on for the desk." if state.enabled else "AI is turned off for the whole desk.",
            type="positive",
        )

    def newer(self, state: AiSwitchRead) -> bool:
        """Whether `state`, read elsewhere, is a later flip than the one shown (a read begun before this page's own
        flip must not turn it back)."""
        never = datetime.min.replace(tzinfo=UTC)
        return state != self.state and (state.changed_at or never) >= (self.state.changed_at or never)


async def _turned_off(state: AiSwitchRead) -> str:
    """Who turned it off and when: "Turned off by Dana at 10:02 UTC" today, with the day before; a label's text."""
    if state.changed_by is None or state.changed_at is None:
        return "Turned off."
    names = await users_service.display_names(db=get_db(), user_ids={state.changed_by})
    who = names.get(state.changed_by, "someone")
    at = state.changed_at.astimezone(UTC)
    moment = f"at {at:%H:%M} UTC" if at.date() == datetime.now(UTC).date() else f"on {when(at)}"
    return f"Turned off by {who} {moment}. Nothing runs; new work orders wait."
