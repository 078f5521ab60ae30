"""How the triage worker is doing (whether the provider is reachable, its queue, last pass, spend, the failed
events a page at a time with Retry and Retry all) and the audit of the agent's settings: both re-read every few
seconds by the agents page.

Why triage waits (the provider unreachable, outside its working hours, the agent off in its policy) is said once,
at the top of the page under the desk-wide off banner; while that switch is off nothing else is said, since
nothing would resume by itself: not at the hour the working hours open, nor when the provider answers.
"""

from typing import Literal
from zoneinfo import ZoneInfo

from bson import ObjectId
from nicegui import ui

from components.agents.policy_form import shown
from components.formats import ago, when
from components.once import one_at_a_time
from components.paging import last_page, pager
from components.runtime import session
from desk.actors import Actor
from desk.agent.core.models import AgentRunRead
from desk.agent.triage import policy
from desk.agent.triage import service as triage
from desk.agent.triage.models import ProviderStatus
from desk.config import get_settings
from desk.db.client import get_db
from desk.errors import DeskError
from desk.jobs.models import OutboxEventRead
from desk.labels import POLICY_FIELDS, RUN_STATUSES, run_error
from desk.notifications.mail_queue import TASK as EMAIL_JOB
from desk.notifications.outbox import TASK as FAN_OUT_JOB
from desk.schema import now
from desk.users import service as users_service
from desk.work_orders import service as work_orders
from desk.work_orders.models import WorkOrderRead

ACTIONS = {
    "config_updated": "changed the policy",
    "enabled": "turned the triage agent on",  # before issue 41, the switch was the policy's
    "disabled": "turned the triage agent off",
    "ai_turned_off": "turned AI off for the whole desk",
    "ai_turned_on": "turned AI on again for the desk",
    "manual_run": "ran the triage by hand",
    "event_retried": "retried a failed event",
    "events_retried": "retried every failed event",
    "run_viewed": "opened a run's transcript",
    "auto_apply_unproven": "confirmed auto-apply without an eval that beats always-medium",
}

SAID_IN_FULL = {"ai_turned_off", "ai_turned_on"}  # their words say all that changed: no "on: on → off" beneath


FAILED_PAGE = 20  # failed events a page
POLICY_OFF = "The triage agent is turned off in its policy: new work orders wait until it is turned on."
HeldBy = Literal["switch", "policy"] | None  # what holds the triage agent off, if anything


class WorkerHealth:
    """The "Worker" and "Settings audit" sections, and the lines in `why` (a column at the top of the page); `show`
    reads them all again."""

    def __init__(self, visit: session.Visit, actor: Actor, *, why: ui.column) -> None:
        # `actor` serves the re-reads: the frame's own check closes the page of someone no longer admin
        self.visit, self.actor, self.why = visit, actor, why
        self.looks = 0  # each `show` numbered: only the latest one draws
        self.held_by: HeldBy = None  # held off, "Last pass" stands still; the page sets it
        self.zone = "UTC"  # the stored policy's time zone: the spend ledger's day (the page sets it)
        self.failed_page = 1  # which page of the failed events is shown (kept across the re-reads)
        self._retry_all = one_at_a_time(self._retry_all)  # per page: a class-wide guard would ignore other admins
        self.retrying: set[str] = set()  # the events whose Retry is running (each its own: others stay clickable)
        ui.label("Worker").classes("text-lg font-semibold mt-2")
        self.health = ui.column().classes("w-full gap-2").mark("health")
        ui.label("Settings audit").classes("text-lg font-semibold mt-2")
        self.audit = ui.column().classes("w-full gap-0 border rounded").mark("audit")

    async def show(self) -> None:
        """Read the worker's state and draw it, unless a later look began meanwhile (a Retry during the timer's)."""
        self.looks += 1
        mine, actor = self.looks, self.actor
        offset = (self.failed_page - 1) * FAILED_PAGE
        state = await triage.health(
            db=get_db(), settings=get_settings(), actor=actor, failed_offset=offset, failed_limit=FAILED_PAGE
        )
        if not state.failed and self.failed_page > 1:  # retried meanwhile: the pages behind are gone
            self.failed_page = last_page(state.failed_total, FAILED_PAGE)
            offset = (self.failed_page - 1) * FAILED_PAGE
            state = await triage.health(
                db=get_db(), settings=get_settings(), actor=actor, failed_offset=offset, failed_limit=FAILED_PAGE
            )
        waiting = await triage.waiting_line(db=get_db(), settings=get_settings(), actor=actor)
        refs = [ObjectId(event.payload_ref) for event in state.failed if ObjectId.is_valid(event.payload_ref)]
        found = await work_orders.by_ids(db=get_db(), actor=actor, order_ids=refs)
        failed_orders = {str(order_id): order for order_id, order in found.items()}
        entries = await policy.audit(db=get_db(), actor=actor, offset=0, limit=20)
        names = await users_service.display_names(db=get_db(), user_ids={e.actor_id for e in entries.items})
        if mine != self.looks:  # its reads straddle a change the later look has seen: drawing them would undo it
            return
        self.why.clear()
        with self.why:  # why nothing is triaged now, at the top, before the figures that would show only that
            if self.held_by == "policy":
                ui.label(POLICY_OFF).classes("text-amber-10 font-medium").mark("policy-off-line")
            elif self.held_by is None:
                if state.provider.state == "unreachable":
                    _unreachable(state.provider)
                if waiting:
                    ui.label(waiting).classes("text-amber-10 font-medium").mark("waiting-line")
        self.health.clear()
        with self.health:
            self._draw_health(state, failed_orders)
        self.audit.clear()
        with self.audit:
            if not entries.items:
                ui.label("No changes yet.").classes("text-grey-7 p-3")
            for entry in entries.items:
                row = ui.row().classes("w-full items-start gap-x-3 gap-y-1 px-3 py-2 border-b no-wrap max-md:flex-wrap")
                with row.mark("audit-row"):  # a phone: the time above the change
                    ui.label(when(entry.created_at)).classes("text-xs text-grey-7 w-40 max-md:w-full shrink-0")
                    with ui.column().classes("gap-0 grow"):
                        who = names.get(entry.actor_id, "Someone")
                        ui.label(f"{who} {ACTIONS.get(entry.action, entry.action)}").classes("font-medium")
                        for line in _audit_lines(entry.action, entry.before, entry.after):
                            ui.label(line).classes("text-sm text-grey-9 wrap-anywhere")

    def _draw_health(self, state: triage.Health, failed_orders: dict[str, WorkOrderRead]) -> None:
        """The worker's figures, the spend, and the failed events (`failed_orders`: their orders, by id)."""
        waiting = state.events.get("pending", 0) + state.events.get("processing", 0)
        with ui.row().classes("w-full gap-4 items-stretch"):
            _figure("Queue", f"{waiting:,}", f"{state.events.get('processing', 0)} being triaged", "queue-depth")
            oldest = ago(state.oldest_pending_at).replace(" ago", "") if state.oldest_pending_at else "—"
            _figure("Oldest waiting", oldest, when(state.oldest_pending_at) or "nothing waits", "oldest-pending")
            last = state.last_pass
            ended = _ended(last) if last else ""
            if self.held_by:  # nothing runs: a time that grows older every refresh would read as a worker at work
                _figure("Last pass", "off", f"{when(last.started_at)} · {ended}" if last else "never", "last-pass")
            else:
                _figure("Last pass", ago(last.started_at) if last else "never", ended, "last-pass")
            _figure("Failed", f"{state.events.get('failed', 0):,}", "gave up after every retry", "failed-count")
        with ui.card().classes("w-full gap-1").mark("spend"):
            # the ledger's day is the policy's time zone's, as the caps' are
            today = now().astimezone(ZoneInfo(self.zone))
            ui.label(f"Spend today ({today:%d %b}, {self.zone})").classes("text-sm text-grey-7").mark("spend-day")
            for spend in state.spend:
                share = min(1.0, spend.spent_usd / spend.cap_usd) if spend.cap_usd else 1.0
                with (
                    ui.row()
                    .classes("w-full items-center gap-3 no-wrap")
                    .mark(f"spend-{spend.scope.lower().replace(' ', '-')}")
                ):
                    ui.label(spend.scope).classes("w-32")
                    bar = ui.linear_progress(share, show_value=False, color="red-7" if share >= 1 else "primary")
                    bar.classes("grow").props["aria-label"] = f"{spend.scope}: share of the cap spent"  # as data
                    ui.label(f"${spend.spent_usd:.4f} of ${spend.cap_usd:.2f}").classes("w-40 text-right text-sm")
        if state.failed:
            with ui.card().classes("w-full gap-0").mark("failed-events"):
                total, first = state.failed_total, (self.failed_page - 1) * FAILED_PAGE + 1
                last = first + len(state.failed) - 1
                shown = f"{first}–{last} of {total:,}, the latest first" if total > len(state.failed) else f"{total}"
                with ui.row().classes("w-full items-center gap-3 no-wrap"):
                    ui.label(f"Failed events ({shown})").classes("text-sm text-grey-7 grow")
                    retry_all = ui.button("Retry all", on_click=self._retry_all).props("outline dense")
                    retry_all.mark("retry-all")
                for event in state.failed:
                    self._failed_row(event, failed_orders.get(event.payload_ref))
                pages = last_page(total, FAILED_PAGE)
                if pages > 1:
                    numbers = pager(pages, self.failed_page).mark("failed-pages")
                    numbers.on_value_change(lambda e: self._go(e.value))

    def _failed_row(self, event: OutboxEventRead, order: WorkOrderRead | None) -> None:
        """One dead letter: what it was for, why it failed, when, and Retry while there is something to retry."""
        # a phone: the order's title on a line of its own, then why, when and Retry
        row = ui.row().classes("w-full items-center gap-x-3 gap-y-1 py-1 border-b no-wrap max-md:flex-wrap")
        with row.mark("failed-event"):
            email = event.type in (EMAIL_JOB, FAN_OUT_JOB)  # a notification's email or fan-out, on the same queue
            if email:
                what = "An email notification" if event.type == EMAIL_JOB else "The notifications of a change"
                ui.label(what).classes("w-64 max-md:w-full").mark("failed-email")
            elif order is not None:
                link = ui.link(order.title, f"/app/work-orders/{order.id}")
                link.classes("w-64 max-md:w-full truncate")
                link.mark("failed-order")
            else:
                ui.label("A deleted work order").classes("w-64 max-md:w-full text-grey-7")
            ui.label(f"{_tries(event)}: {run_error(event.last_error)}").classes("text-sm grow wrap-anywhere")
            ui.label(ago(event.updated_at or event.created_at)).classes("text-xs text-grey-7")
            if email or order is not None:  # a deleted order has nothing left to triage
                retry = ui.button("Retry", on_click=lambda e=event: self._retry(e.id))
                retry.props("outline dense").mark("retry")
                what = "the notifications" if event.type == FAN_OUT_JOB else "the email"
                what = what if email or order is None else f"triage of {order.title}"
                retry.props["aria-label"] = f"Retry {what}"  # data: never parsed

    async def _go(self, page: int) -> None:
        self.failed_page = page
        await self.show()

    async def _retry_all(self) -> None:
        try:
            done = await triage.retry_failed(db=get_db(), actor=await self.visit.actor())
        except DeskError as error:
            self.visit.tell(error.message, type="negative")
        else:
            events = "event" if done.requeued == 1 else "events"
            self.visit.tell(f"{done.requeued:,} failed {events} back in the queue.", type="positive")
        self.failed_page = 1
        await self.show()

    async def _retry(self, event_id: str) -> None:
        if event_id in self.retrying:  # a double click: its second would read "No such failed event." in red
            return
        self.retrying.add(event_id)
        try:
            await triage.retry_event(db=get_db(), actor=await self.visit.actor(), event_id=event_id)
        except DeskError as error:
            self.visit.tell(error.message, type="negative")  # the list may have been redrawn meanwhile: see `tell`
        else:
            self.visit.tell("Back in the queue.", type="positive")
        finally:
            self.retrying.discard(event_id)
        await self.show()


def _unreachable(provider: ProviderStatus) -> None:
    """The banner while the provider's breaker is open: since when, why, and what the agent does meanwhile."""
    with ui.card().classes("w-full gap-1 bg-orange-1").mark("provider-unreachable"):
        since = when(provider.since) if provider.since else "a moment ago"
        ui.label(f"Provider unreachable since {since}").classes("font-medium").mark("provider-unreachable-since")
        why = f" The last failure: {provider.last_error}." if provider.last_error else ""
        ui.label(
            "Triage waits for it: new orders queue up and nothing is given up; the provider is tried again, less"
            f" often the longer it stays down, and triage resumes by itself once it answers.{why}"
        ).classes("text-sm")


def _tries(event: OutboxEventRead) -> str:
    made = event.attempts + event.strikes  # a strike is a try too, if not an attempt
    return f"{made} attempt{'' if made == 1 else 's'}"


def _ended(run: AgentRunRead) -> str:
    """How a pass ended, in words: "Failed: the AI provider failed (status 503)", not "error (provider_status 503)"."""
    status = RUN_STATUSES.get(run.status, run.status)
    return f"{status}: {run_error(run.error_code)}" if run.error_code else status


def _figure(title: str, value: str, note: str, marker: str) -> None:
    with ui.card().classes("w-56 max-md:w-full gap-0").mark(marker):
        ui.label(title).classes("text-sm text-grey-7")
        ui.label(value).classes("text-3xl font-semibold").mark(f"{marker}-value")
        ui.label(note).classes("text-xs text-grey-7").mark(f"{marker}-note")


def _audit_lines(action: str, before: dict | None, after: dict | None) -> list[str]:
    if action in SAID_IN_FULL:
        return []
    before, after = before or {}, after or {}
    if not before:  # a run viewed, an event retried, a manual run: what it was about
        return [f"{key}: {shown(value)}" for key, value in after.items() if value is not None]
    return [
        f"{POLICY_FIELDS.get(key, key)}: {shown(before.get(key))} → {shown(value)}"
        for key, value in after.items()
        if before.get(key) != value
    ]
