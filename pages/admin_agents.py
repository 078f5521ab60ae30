"""/app/admin/agents: the triage agent for admins: its switch, its policy, the attention list, the worker, the audit.

Everything here goes through the triage services in process (desk/agent/triage/policy.py, desk/agent/triage/
service.py), as the API does. The policy is saved at the version the admin read, so a second admin who
saved first is never overwritten. The switch, the worker's health and the audit are re-read every few
seconds; the attention list follows the change feed, which every stored or decided suggestion enters.
"""

from datetime import UTC, datetime
from zoneinfo import available_timezones

from bson import ObjectId
from nicegui import APIRouter, ui
from pydantic import ValidationError

from components.chips import PRIORITY_LABELS, priority_chip
from components.confirm import confirm
from components.fields import clear_problems, show_problems
from components.formats import ago, when
from components.runtime import live, session
from components.runtime.page import desk_page
from desk.actors import Actor
from desk.agent.triage import policy
from desk.agent.triage import service as triage
from desk.agent.triage.models import AgentConfigRead, AgentConfigUpdate
from desk.config import get_settings
from desk.db.client import get_db
from desk.errors import Conflict, DeskError, NothingToChange
from desk.users import service as users_service
from desk.work_orders import service as work_orders
from desk.work_orders.models import WorkOrderRead

router = APIRouter()
PATH = "/app/admin/agents"
FAILURES = {  # why the worker gave up on an event, in words (the outbox keeps a code)
    "invalid_output": "the model's answers were not a usable suggestion",
    "lease_expired": "a worker stopped while triaging it",
    "internal": "an error on our side (the worker's log says which)",
}
REFRESH_SECONDS = 2.0
MODES = {"suggest": "Suggest only (people decide)", "auto_apply": "Apply the priority automatically"}
ACTIONS = {
    "config_updated": "changed the policy",
    "enabled": "turned the triage agent on",
    "disabled": "turned the triage agent off",
    "manual_run": "ran the triage by hand",
    "event_retried": "retried a failed event",
    "run_viewed": "opened a run's transcript",
}
POLICY_NAMES = {
    "mode": "Mode",
    "workingHours": "Working hours",
    "timeZone": "Time zone",
    "dailyActionCap": "Daily action cap",
    "flagThreshold": "Flag threshold",
    "enabled": "Switch",
    "allowedFields": "Fields it may change",
}


@desk_page(router, PATH, title="Agents", admin=True)
async def admin_agents_page(visit: session.Visit, me: session.SessionUser) -> None:
    agents_tabs(PATH)
    if not get_settings().ai_enabled:
        ai_off_notice()
        return
    config = await policy.get_config(db=get_db(), settings=get_settings(), actor=me.actor)
    screen = AgentsScreen(visit, me.actor, config)
    await screen.build()
    ui.timer(REFRESH_SECONDS, screen.refresh)
    live.on_change(screen.on_changes)


def agents_tabs(path: str) -> None:
    """Settings and runs, side by side under the one "Agents" entry of the navigation."""
    with ui.row().classes("gap-4 items-center"):
        ui.label("Agents").classes("text-2xl font-semibold")
        for label, target in (("Triage settings", PATH), ("All runs", f"{PATH}/runs")):
            link = ui.link(label, target).classes("text-base")
            if target == path:
                link.classes("font-semibold no-underline")


def ai_off_notice() -> None:
    with ui.card().classes("w-full bg-grey-2").mark("ai-off"):
        ui.label("AI is not enabled on this desk.").classes("text-lg font-semibold")
        ui.label(
            "The triage agent and the copilot do not run, and nothing can be changed here. "
            "An administrator of the server turns AI on with AI_ENABLED and a provider, then restarts the desk."
        ).classes("text-grey-8")


class AgentsScreen:
    """`loaded` is the policy as the admin read it: a save is made at its version."""

    def __init__(self, visit: session.Visit, actor: Actor, config: AgentConfigRead) -> None:
        # `actor` serves the background re-reads: the frame's own check closes the page of someone no longer admin
        self.visit, self.actor, self.loaded = visit, actor, config
        self.inputs: dict[str, ui.element] = {}
        self.refreshing = False

    async def build(self) -> None:
        self.banner = ui.card().classes("w-full bg-red-1").mark("agents-off-banner")
        with self.banner, ui.row().classes("items-center gap-2"):
            ui.icon("power_off", size="md").classes("text-red-8")
            ui.label(
                "The triage agent is turned off. New work orders wait untriaged until it is turned on again."
            ).classes("font-medium")
        with ui.row().classes("w-full gap-4 items-stretch no-wrap max-md:flex-wrap"):  # a phone: one above the other
            self._switch_card()
            self._policy_form()
        ui.label("Needs attention").classes("text-lg font-semibold mt-2")
        ui.label("Flagged suggestions on open work orders, newest first.").classes("text-sm text-grey-7")
        self.attention = ui.column().classes("w-full gap-0 border rounded").mark("attention")
        ui.label("Worker").classes("text-lg font-semibold mt-2")
        self.health = ui.column().classes("w-full gap-2").mark("health")
        ui.label("Settings audit").classes("text-lg font-semibold mt-2")
        self.audit = ui.column().classes("w-full gap-0 border rounded").mark("audit")
        self._show_switch()
        await self._show_attention()
        await self._show_health_and_audit()

    # --- the kill switch ---

    def _switch_card(self) -> None:
        with ui.card().classes("w-80 max-md:w-full gap-3 items-center justify-center").mark("switch-card"):
            ui.label("Triage agent").classes("text-sm text-grey-7")
            self.switch_state = ui.label().classes("text-5xl font-bold").mark("switch-state")
            self.switch_note = ui.label().classes("text-sm text-grey-8 text-center")
            self.switch_button = ui.button(on_click=self._toggle).props("size=lg").mark("switch-button")

    def _show_switch(self) -> None:
        on = self.loaded.enabled
        self.switch_state.set_text("ON" if on else "OFF")
        self.switch_state.classes(replace="text-5xl font-bold text-green-8" if on else "text-5xl font-bold text-red-8")
        self.switch_note.set_text(
            "New work orders are triaged as they arrive." if on else "Nothing is triaged; new orders wait."
        )
        self.switch_button.set_text("Turn off" if on else "Turn on")
        self.switch_button.props.update(color="negative" if on else "positive", icon="power_off" if on else "power")
        self.banner.set_visibility(not on)

    async def _toggle(self) -> None:
        turning_on = not self.loaded.enabled
        if not turning_on and not await confirm(
            "Turn the triage agent off?",
            "Workers stop within one poll interval; new work orders wait, untriaged, until it is turned on again.",
            action="Turn off",
            marker="confirm-switch-off",
        ):
            return
        self.actor = actor = await self.visit.actor()
        config = await policy.set_enabled(db=get_db(), settings=get_settings(), actor=actor, enabled=turning_on)
        self.loaded = self.loaded.model_copy(update={"enabled": config.enabled})
        self._show_switch()
        ui.notify(f"The triage agent is {'on' if config.enabled else 'off'}.", type="positive")
        await self._show_health_and_audit()

    # --- the policy ---

    def _policy_form(self) -> None:
        config = self.loaded
        zones = sorted(available_timezones())
        with ui.card().classes("grow min-w-0 gap-2").mark("policy"):
            ui.label("Policy").classes("text-lg font-semibold")
            with ui.row().classes("w-full gap-3 items-start"):
                self.inputs["mode"] = ui.select(MODES, label="Mode", value=config.mode).classes("w-72")
                self.inputs["flagThreshold"] = ui.select(
                    PRIORITY_LABELS, label="Flag for the dispatcher from", value=config.flag_threshold
                ).classes("w-56")
            with ui.row().classes("w-full gap-3 items-start"):
                hours = ui.input("Working hours", value=config.working_hours).classes("w-48")
                hours.props('hint="* for always, or 08:00-18:00"')
                self.inputs["workingHours"] = hours
                zone = ui.select(zones, label="Time zone", value=config.time_zone, with_input=True).classes("w-64")
                self.inputs["timeZone"] = zone
                # no min/max: the field would clamp what was typed without a word; the policy's check says why
                cap = ui.number("Daily action cap", value=config.daily_action_cap, step=1)
                cap.props('hint="automatic changes per day"').classes("w-48")
                self.inputs["dailyActionCap"] = cap
            for field, element in self.inputs.items():
                element.mark(f"policy-{field}")
            self.problem = ui.label().classes("text-negative text-sm").mark("policy-problem")
            self.conflict = ui.column().classes("w-full")
            with ui.row().classes("w-full justify-between items-center"):
                self.version_note = ui.label().classes("text-xs text-grey-7")
                ui.button("Save policy", on_click=self.save).mark("policy-save")
        self._show_version()

    def _show_version(self) -> None:
        self.version_note.set_text(f"Version {self.loaded.version}, saved {when(self.loaded.updated_at)}")

    def edits(self) -> dict[str, object]:
        """The fields the admin changed, by their API names."""
        now = {name: self.inputs[name].value for name in self.inputs}
        if isinstance(now["dailyActionCap"], float) and now["dailyActionCap"].is_integer():
            now["dailyActionCap"] = int(now["dailyActionCap"])
        before = self.loaded.model_dump(by_alias=True)
        return {name: value for name, value in now.items() if value != before[name]}

    async def save(self) -> None:
        clear_problems(self.inputs, self.problem)
        self.conflict.clear()
        self.actor = actor = await self.visit.actor()
        try:
            data = AgentConfigUpdate.model_validate({"version": self.loaded.version, **self.edits()})
            saved = await policy.update_config(db=get_db(), settings=get_settings(), actor=actor, data=data)
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
        self._show_switch()
        ui.notify("Policy saved.", type="positive")
        await self._show_health_and_audit()

    def _show_conflict(self, current: AgentConfigRead) -> None:
        with self.conflict, ui.card().classes("w-full bg-amber-1 gap-1").mark("policy-conflict"):
            ui.label("Someone else changed the triage settings first. Nothing of yours was saved.").classes(
                "font-medium"
            )
            mine, theirs = self.loaded.model_dump(by_alias=True), current.model_dump(by_alias=True)
            for name, label in POLICY_NAMES.items():
                if mine.get(name) != theirs.get(name):
                    ui.label(f"They changed {label}: {_value(mine.get(name))} → {_value(theirs.get(name))}").classes(
                        "text-sm"
                    )

            def load_theirs() -> None:
                self.loaded = current
                for name, element in self.inputs.items():
                    element.value = theirs[name]
                clear_problems(self.inputs, self.problem)
                self.conflict.clear()
                self._show_version()
                self._show_switch()

            ui.button("Load their version (discard my changes)", on_click=load_theirs).props("outline").mark(
                "policy-load-theirs"
            )

    # --- what is re-read ---

    async def refresh(self) -> None:
        """The switch (another admin, another tab), the worker and the audit, every few seconds."""
        if self.refreshing:
            return
        self.refreshing = True
        try:
            current = await policy.get_config(db=get_db(), settings=get_settings(), actor=self.actor)
            if current.enabled != self.loaded.enabled:  # the switch lands whatever the version: show it
                self.loaded = self.loaded.model_copy(update={"enabled": current.enabled})
                self._show_switch()
            await self._show_health_and_audit()
        except DeskError:
            return  # no longer an admin: the frame's check closes the page
        finally:
            self.refreshing = False

    async def on_changes(self, batch: list[dict]) -> None:
        await self._show_attention()

    async def _show_attention(self) -> None:
        found = await triage.attention(db=get_db(), actor=self.actor, offset=0, limit=25)
        self.attention.clear()
        with self.attention:
            if not found.items:
                ui.label("Nothing flagged right now.").classes("text-grey-7 p-3").mark("attention-empty")
            for item in found.items:
                with ui.row().classes("w-full items-center gap-3 px-3 py-2 border-b no-wrap").mark("attention-row"):
                    ui.badge("Flagged", color="red-7")
                    priority_chip(item.suggestion.suggested_priority)
                    with ui.column().classes("gap-0 grow min-w-0"):
                        ui.link(item.order.title, f"/app/work-orders/{item.order.id}").classes("wrap-anywhere")
                        ui.label(item.suggestion.summary).classes("text-sm text-grey-8 wrap-anywhere")
                    ui.label(ago(item.suggestion.created_at)).classes("text-xs text-grey-7 w-24").tooltip(
                        when(item.suggestion.created_at)
                    )

    async def _show_health_and_audit(self) -> None:
        actor = self.actor
        state = await triage.health(db=get_db(), settings=get_settings(), actor=actor)
        refs = [ObjectId(event.payload_ref) for event in state.failed if ObjectId.is_valid(event.payload_ref)]
        found = await work_orders.by_ids(db=get_db(), actor=actor, order_ids=refs)
        failed_orders = {str(order_id): order for order_id, order in found.items()}
        entries = await policy.audit(db=get_db(), actor=actor, offset=0, limit=20)
        names = await users_service.display_names(db=get_db(), user_ids={e.actor_id for e in entries.items})
        self.health.clear()
        with self.health:
            self._draw_health(state, failed_orders)
        self.audit.clear()
        with self.audit:
            if not entries.items:
                ui.label("No changes yet.").classes("text-grey-7 p-3")
            for entry in entries.items:
                with ui.row().classes("w-full items-start gap-3 px-3 py-2 border-b no-wrap").mark("audit-row"):
                    ui.label(when(entry.created_at)).classes("text-xs text-grey-7 w-40 shrink-0")
                    with ui.column().classes("gap-0 grow"):
                        who = names.get(entry.actor_id, "Someone")
                        ui.label(f"{who} {ACTIONS.get(entry.action, entry.action)}").classes("font-medium")
                        for line in _audit_lines(entry.before, entry.after):
                            ui.label(line).classes("text-sm text-grey-9 wrap-anywhere")

    def _draw_health(self, state: triage.Health, failed_orders: dict[str, WorkOrderRead]) -> None:
        """The worker's figures, the spend, and the failed events (`failed_orders`: their orders, by id)."""
        waiting = state.events.get("pending", 0) + state.events.get("processing", 0)
        with ui.row().classes("w-full gap-4 items-stretch"):
            _figure("Queue", f"{waiting:,}", f"{state.events.get('processing', 0)} being triaged", "queue-depth")
            oldest = ago(state.oldest_pending_at).replace(" ago", "") if state.oldest_pending_at else "—"
            _figure("Oldest waiting", oldest, when(state.oldest_pending_at) or "nothing waits", "oldest-pending")
            last = state.last_pass
            _figure(
                "Last pass",
                ago(last.started_at) if last else "never",
                f"{last.status}{f' ({last.error_code})' if last and last.error_code else ''}" if last else "",
                "last-pass",
            )
            _figure("Failed", f"{state.events.get('failed', 0):,}", "gave up after every retry", "failed-count")
        with ui.card().classes("w-full gap-1").mark("spend"):
            ui.label(f"Spend today (UTC {datetime.now(UTC):%d %b})").classes("text-sm text-grey-7")
            for spend in state.spend:
                share = min(1.0, spend.spent_usd / spend.cap_usd) if spend.cap_usd else 1.0
                with (
                    ui.row()
                    .classes("w-full items-center gap-3 no-wrap")
                    .mark(f"spend-{spend.scope.lower().replace(' ', '-')}")
                ):
                    ui.label(spend.scope).classes("w-32")
                    ui.linear_progress(share, show_value=False, color="red-7" if share >= 1 else "primary").classes(
                        "grow"
                    )
                    ui.label(f"${spend.spent_usd:.4f} of ${spend.cap_usd:.2f}").classes("w-40 text-right text-sm")
        if state.failed:
            with ui.card().classes("w-full gap-0").mark("failed-events"):
                total = state.events.get("failed", len(state.failed))
                shown = f"the newest {len(state.failed)} of {total:,}" if total > len(state.failed) else f"{total}"
                ui.label(f"Failed events ({shown})").classes("text-sm text-grey-7")
                for event in state.failed:
                    order = failed_orders.get(event.payload_ref)
                    with ui.row().classes("w-full items-center gap-3 py-1 border-b no-wrap").mark("failed-event"):
                        if order is not None:
                            link = ui.link(order.title, f"/app/work-orders/{order.id}").classes("w-64 truncate")
                            link.mark("failed-order")
                        else:
                            ui.label("A deleted work order").classes("w-64 text-grey-7")
                        tries = f"{event.attempts} attempt{'' if event.attempts == 1 else 's'}"
                        ui.label(f"{tries}: {_why(event.last_error)}").classes("text-sm grow wrap-anywhere")
                        ui.label(ago(event.updated_at or event.created_at)).classes("text-xs text-grey-7")
                        if order is not None:  # a deleted order has nothing left to triage
                            retry = ui.button("Retry", on_click=lambda e=event: self._retry(e.id))
                            retry.props("outline dense").mark("retry")
                            retry.props["aria-label"] = f"Retry triage of {order.title}"  # data: never parsed

    async def _retry(self, event_id: str) -> None:
        try:
            await triage.retry_event(db=get_db(), actor=await self.visit.actor(), event_id=event_id)
        except DeskError as error:
            self.visit.tell(error.message, type="negative")  # the list may have been redrawn meanwhile: see `tell`
        else:
            self.visit.tell("Back in the queue.", type="positive")
        await self._show_health_and_audit()


def _why(code: str | None) -> str:
    if code and code.startswith("provider_"):
        return f"the AI provider failed ({code.removeprefix('provider_')})"
    return FAILURES.get(code or "", code or "no reason was kept")


def _figure(title: str, value: str, note: str, marker: str) -> None:
    with ui.card().classes("min-w-48 gap-0").mark(marker):
        ui.label(title).classes("text-sm text-grey-7")
        ui.label(value).classes("text-3xl font-semibold").mark(f"{marker}-value")
        ui.label(note).classes("text-xs text-grey-7")


def _audit_lines(before: dict | None, after: dict | None) -> list[str]:
    before, after = before or {}, after or {}
    if not before:  # a run viewed, an event retried, a manual run: what it was about
        return [f"{key}: {_value(value)}" for key, value in after.items() if value is not None]
    return [
        f"{POLICY_NAMES.get(key, key)}: {_value(before.get(key))} → {_value(value)}"
        for key, value in after.items()
        if before.get(key) != value
    ]


def _value(value: object) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, list):
        return ", ".join(map(str, value)) or "none"
    labels = {**MODES, **PRIORITY_LABELS}
    return labels.get(str(value), str(value)) if value is not None else "—"
