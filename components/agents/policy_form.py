"""The triage policy as a form: the agent's own on/off, mode, when to apply, flag threshold, working hours,
days off, time zone, daily cap.

It is saved at the version the admin read (`loaded`), so a second admin who saved first is never
overwritten: the form says what they changed and offers to load their version instead.
"""

from collections.abc import Awaitable, Callable

from nicegui import ui
from pydantic import ValidationError

from components.confirm import confirm
from components.fields import clear_problems, show_problems
from components.formats import when
from components.once import one_at_a_time
from components.runtime import session
from desk import zone as desk_zones
from desk.actors import Actor
from desk.agent.triage import policy
from desk.agent.triage.eval import quality
from desk.agent.triage.models import AgentConfigRead, AgentConfigUpdate
from desk.config import get_settings
from desk.db.client import get_db
from desk.errors import Conflict, DeskError, NothingToChange
from desk.labels import APPLY_WHEN, POLICY_FIELDS, PRIORITY_LABELS, TRIAGE_MODES, TRIAGE_OUTCOMES

AUTO_ONLY = "not used while people decide (suggest only)"


class PolicyForm:
    """`loaded` is the policy as the admin read it; `saved` and `reloaded` tell the page of a new one."""

    def __init__(
        self,
        visit: session.Visit,
        config: AgentConfigRead,
        *,
        saved: Callable[[AgentConfigRead], Awaitable[None]],
        reloaded: Callable[[AgentConfigRead], None],
    ) -> None:
        self.visit, self.loaded, self.saved, self.reloaded = visit, config, saved, reloaded
        self.inputs: dict[str, ui.element] = {}
        # a double click saves once: its second click, sent at the version the first moves on, met "Someone else
        # changed the triage settings first" (per form: a class-wide guard would ignore every other admin)
        self.save = one_at_a_time(self.save)

    def build(self) -> None:
        config = self.loaded
        zones = desk_zones.offered(config.time_zone)
        with ui.card().classes("grow min-w-0 gap-2").mark("policy"):
            with ui.row().classes("w-full items-center justify-between"):
                ui.label("Policy").classes("text-lg font-semibold")
                # the triage agent alone, saved with the policy; the desk-wide switch beside the form stops every agent
                self.inputs["enabled"] = ui.switch("Triage agent on", value=config.enabled)
            with ui.row().classes("w-full gap-3 items-start"):
                mode = ui.select(TRIAGE_MODES, label="Mode", value=config.mode).classes("w-72")
                mode.on_value_change(lambda e: self._show_auto_only(e.value))
                self.inputs["mode"] = mode
                self.inputs["applyWhen"] = ui.select(
                    APPLY_WHEN, label="Apply automatically", value=config.apply_when
                ).classes("w-72")
                self.inputs["flagThreshold"] = ui.select(
                    PRIORITY_LABELS, label="Flag for the dispatcher from", value=config.flag_threshold
                ).classes("w-56")
            with ui.row().classes("w-full gap-3 items-start"):
                hours = ui.input("Working hours", value=config.working_hours).classes("w-64")
                hours.props('hint="* for always, 08:00-18:00, or Mon-Fri 08:00-18:00"')
                self.inputs["workingHours"] = hours
                off = ui.input("Days off", value=days_text(config.days_off)).classes("w-64")
                off.props('hint="dates such as 2026-12-24, 2026-12-25"')
                self.inputs["daysOff"] = off
                zone = ui.select(zones, label="Time zone", value=config.time_zone, with_input=True).classes("w-64")
                self.inputs["timeZone"] = zone
                # no min/max: the field would clamp what was typed without a word; the policy's check says why
                cap = ui.number("Daily action cap", value=config.daily_action_cap, step=1).classes("w-48")
                self.inputs["dailyActionCap"] = cap
            for field, element in self.inputs.items():
                element.mark(f"policy-{field}")
            self.problem = ui.label().classes("text-negative text-sm").mark("policy-problem")
            self.conflict = ui.column().classes("w-full")
            with ui.row().classes("w-full justify-between items-center"):
                self.version_note = ui.label().classes("text-xs text-grey-7")
                ui.button("Save policy", on_click=self.save).mark("policy-save")
        self._show_version()
        self._show_auto_only(config.mode)

    def _show_auto_only(self, mode: str) -> None:
        """The two fields only auto-apply reads say so while people decide: "Suggest only" beside "Apply
        automatically: any change of priority" read as a contradiction. They stay editable, to be set before
        the mode is changed."""
        suggest = mode == "suggest"
        for name, hint in (
            ("applyWhen", "which changes the agent makes itself"),
            ("dailyActionCap", "automatic changes per day"),
        ):
            element = self.inputs[name]
            element.props["hint"] = AUTO_ONLY if suggest else hint
            element.update()

    def _show_version(self) -> None:
        self.version_note.set_text(f"Version {self.loaded.version}, saved {when(self.loaded.updated_at)}")

    def edits(self) -> dict[str, object]:
        """The fields the admin changed, by their API names."""
        now = {name: self.inputs[name].value for name in self.inputs}
        now["daysOff"] = days_list(now["daysOff"])
        if isinstance(now["dailyActionCap"], float) and now["dailyActionCap"].is_integer():
            now["dailyActionCap"] = int(now["dailyActionCap"])
        before = self.loaded.model_dump(by_alias=True)
        return {name: value for name, value in now.items() if value != before[name]}

    async def save(self) -> None:
        clear_problems(self.inputs, self.problem)
        self.conflict.clear()
        actor = await self.visit.actor()
        go_on, unproven = await self._unproven_auto_apply(actor)
        if not go_on:
            return
        try:
            data = AgentConfigUpdate.model_validate({"version": self.loaded.version, **self.edits()})
            saved = await policy.update_config(db=get_db(), settings=get_settings(), actor=actor, data=data)
            if unproven is not None:  # saved despite the warning: who confirmed it, and what they were told
                await quality.confirm_unproven(db=get_db(), actor=actor, seen=unproven)
        except NothingToChange:
            ui.notify("Nothing to save.")
            return
        except Conflict as conflict:
            self._show_conflict(AgentConfigRead.model_validate(conflict.details["current"]))
            return
        except (ValidationError, DeskError) as error:
            show_problems(error, self.inputs, self.problem)
            return
        self.loaded = saved
        self._show_version()
        ui.notify("Policy saved.", type="positive")
        await self.saved(saved)

    async def _unproven_auto_apply(self, actor: Actor) -> tuple[bool, quality.Quality | None]:
        """Switching to auto-apply with no eval that earns it: the admin is told why and asked. Whether to save,
        and the quality they were shown if they confirmed despite it."""
        if self.edits().get("mode") != "auto_apply":
            return True, None
        found = await quality.quality(settings=get_settings(), actor=actor)
        if (warning := found.warning()) is None:
            return True, None
        asked = await confirm(
            warning,
            "Switch to automatic priorities anyway? Your confirmation is recorded in the audit.",
            action="Switch anyway",
            marker="confirm-auto-apply",
        )
        return asked, found

    def _show_conflict(self, current: AgentConfigRead) -> None:
        with self.conflict, ui.card().classes("w-full bg-amber-1 gap-1").mark("policy-conflict"):
            ui.label("Someone else changed the triage settings first. Nothing of yours was saved.").classes(
                "font-medium"
            )
            mine, theirs = self.loaded.model_dump(by_alias=True), current.model_dump(by_alias=True)
            for name, label in POLICY_FIELDS.items():
                if mine.get(name) != theirs.get(name):
                    ui.label(f"They changed {label}: {shown(mine.get(name))} → {shown(theirs.get(name))}").classes(
                        "text-sm"
                    )

            def load_theirs() -> None:
                self.loaded = current
                for name, element in self.inputs.items():
                    element.value = days_text(theirs[name]) if name == "daysOff" else theirs[name]
                clear_problems(self.inputs, self.problem)
                self.conflict.clear()
                self._show_version()
                self.reloaded(current)

            ui.button("Load their version (discard my changes)", on_click=load_theirs).props("outline").mark(
                "policy-load-theirs"
            )


def days_text(days: list[str]) -> str:
    return ", ".join(days)


def days_list(text: str | None) -> list[str]:
    """The days off as typed, commas or spaces between them, in the order the policy keeps them (sorted, once each)."""
    return sorted({part for part in (text or "").replace(",", " ").split() if part})


def shown(value: object) -> str:
    """A policy value in words: a switch on or off, a list, a mode or a priority by its label."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, list):
        return ", ".join(map(str, value)) or "none"
    labels = {**TRIAGE_MODES, **PRIORITY_LABELS, **APPLY_WHEN, **TRIAGE_OUTCOMES}  # outcomes: a manual run's audit
    return labels.get(str(value), str(value)) if value is not None else "—"
