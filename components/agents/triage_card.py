"""The triage agent's suggestion on a work order: what it proposes, or what it applied; Accept and Dismiss.

The page calls `triage_card` once. The card reads the order's newest suggestion through the triage
service and redraws when the change feed names the order (the worker's suggestion, a decision made in
another browser). Accept goes through the service's decision, which applies the priority as this person
at the version the page shows; when the order moved on, the page's own conflict card takes over.
The summary is model output: shown as a label, never as HTML.
"""

from collections.abc import Awaitable, Callable

from nicegui import ui

from components.chips import priority_chip
from components.formats import ago, when
from components.once import one_at_a_time
from components.runtime import live, session
from desk.agent.triage import service as triage
from desk.agent.triage.models import TriageSuggestionRead, overtaken
from desk.config import get_settings
from desk.db.client import get_db
from desk.errors import Conflict, DeskError, NotFound
from desk.labels import PRIORITY_LABELS
from desk.work_orders import permissions
from desk.work_orders.models import CLOSED, WorkOrderRead

NOTES = {
    "daily_action_cap": "Not applied automatically: today's limit of automatic changes was reached.",
    "ai_disabled_for_owner": "Not applied automatically: the owner has AI assistance turned off.",
    "dropped": "Not applied automatically: the work order changed at the same moment.",
    "overtaken": "Not applied automatically: someone set the priority while the agent was looking at it.",
    "raise_only": "Not applied automatically: this desk lets the agent raise a priority, never lower it.",
    "order_closed": "Not applied automatically: the work order was closed meanwhile.",
}
Conflicted = Callable[[WorkOrderRead, dict[str, object]], Awaitable[None]]


async def triage_card(visit: session.Visit, order: Callable[[], WorkOrderRead], *, on_conflict: Conflicted) -> None:
    """The suggestion card of the order `order()` returns (the version the page shows), kept live."""
    if not get_settings().ai_enabled:
        return  # AI off on this desk: no suggestion is made, and none is offered
    card = TriageCard(visit, order, on_conflict, await visit.user(touch=False))
    await card.show()
    live.on_change(card.on_changes)


class TriageCard:
    def __init__(
        self,
        visit: session.Visit,
        order: Callable[[], WorkOrderRead],
        on_conflict: Conflicted,
        me: session.SessionUser,
    ) -> None:
        self.visit, self.order, self.on_conflict = visit, order, on_conflict
        self.area = ui.column().classes("w-full").props('aria-live="polite"')  # a suggestion arriving is heard
        self.client = ui.context.client
        self.redraws = live.Redraws()
        # The person as of the page's build or their last decision; live redraws use it (the frame's check
        # closes the page of someone who lost access).
        self.me = me
        self.decide = one_at_a_time(self.decide)  # a double click decides once, and says nothing of the second

    async def show(self) -> None:
        """Read the newest suggestion and draw it (nothing at all when there is none to show)."""
        actor = self.me.actor
        order = self.order()
        newest_redraw = self.redraws.start()
        try:
            found = await triage.suggestions(db=get_db(), actor=actor, order_id=order.id)
        except NotFound:
            found = []
        if self.client.is_deleted or not newest_redraw():  # an older read answering last would draw the old
            return
        newest = found[0] if found else None  # the service shows none to a person who turned AI off
        self.area.clear()
        if newest is None:
            return
        can_decide = permissions.can_change(actor, order)
        with self.area, ui.card().classes("w-full gap-2 bg-purple-1").mark("triage-card"):
            self._draw(newest, order, can_decide=can_decide)

    def _draw(self, suggestion: TriageSuggestionRead, order: WorkOrderRead, *, can_decide: bool) -> None:
        with ui.row().classes("w-full items-center gap-2"):
            ui.icon("smart_toy").classes("text-purple-8")
            heading = "Applied by the triage agent" if suggestion.applied else "Triage suggestion"
            ui.label(heading).classes("font-semibold").mark("triage-heading")
            if suggestion.flag_for_dispatcher:
                ui.badge("Flagged for the dispatcher", color="red-7").mark("triage-flag")
            ui.space()
            ui.label(ago(suggestion.created_at)).classes("text-xs text-grey-7").tooltip(when(suggestion.created_at))
        ui.label(suggestion.summary).classes("whitespace-pre-wrap wrap-anywhere").mark("triage-summary")
        with ui.row().classes("items-center gap-2"):
            ui.label("Priority set to" if suggestion.applied else "Suggested priority").classes("text-sm")
            priority_chip(suggestion.suggested_priority).mark("triage-priority")
        if suggestion.applied_note in NOTES:
            ui.label(NOTES[suggestion.applied_note]).classes("text-sm text-grey-8")
        if suggestion.decision is not None:
            word = "Accepted" if suggestion.decision == "accepted" else "Dismissed"
            ui.label(f"{word} {ago(suggestion.decided_at)}" if suggestion.decided_at else word).classes(
                "text-sm text-grey-8"
            ).mark("triage-decided")
            return
        if suggestion.applied or not can_decide:
            return
        same = suggestion.suggested_priority == order.priority
        overtaken_since = overtaken(suggestion, order)  # Accept would be refused: not offered
        closed = order.status in CLOSED  # so would it on a done or cancelled order
        if closed:
            ui.label("The work order is closed: reopen it to change its priority.").classes("text-sm text-grey-8").mark(
                "triage-closed"
            )
        elif same:
            ui.label("The work order already has this priority.").classes("text-sm text-grey-8")
        elif overtaken_since:
            ui.label(f"Since this suggestion, the priority was set to {PRIORITY_LABELS[order.priority]}.").classes(
                "text-sm text-grey-8"
            ).mark("triage-overtaken")
        with ui.row().classes("gap-2"):
            if not (same or overtaken_since or closed):
                label = f"Accept: make it {PRIORITY_LABELS[suggestion.suggested_priority]}"
                ui.button(label, icon="check", on_click=lambda: self.decide(suggestion, accept=True)).mark(
                    "triage-accept"
                )
            ui.button("Dismiss", on_click=lambda: self.decide(suggestion, accept=False)).props("outline").mark(
                "triage-dismiss"
            )

    async def decide(self, suggestion: TriageSuggestionRead, *, accept: bool) -> None:
        self.me = await self.visit.user()
        actor = self.me.actor
        order = self.order()
        try:
            await triage.decide(
                db=get_db(),
                actor=actor,
                order_id=order.id,
                suggestion_id=suggestion.id,
                accept=accept,
                version=order.version,  # the version on screen: a change made meanwhile is a conflict, as on Save
            )
        except Conflict as conflict:
            current = (conflict.details or {}).get("current")
            if current is not None:  # the order moved on: the page says what changed and lets the person choose
                await self.on_conflict(
                    WorkOrderRead.model_validate(current), {"priority": suggestion.suggested_priority}
                )
            else:
                self.visit.tell(conflict.message, type="warning")
            await self.show()
            return
        except DeskError as error:
            self.visit.tell(error.message, type="negative")
            return
        if accept:
            self.visit.tell(f"Priority set to {PRIORITY_LABELS[suggestion.suggested_priority]}.", type="positive")
        else:
            self.visit.tell("Suggestion dismissed.")
        await self.show()

    async def on_changes(self, batch: list[dict]) -> None:
        if self.client.is_deleted or not any(change["workOrderId"] == self.order().id for change in batch):
            return
        await self.show()
