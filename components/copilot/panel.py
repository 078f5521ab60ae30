"""The copilot drawer (Cmd/Ctrl+K) and the Assistant page's panel: a view of the person's conversation.

The conversation lives on the server, not in a page: every panel (any page, a reload, a second tab)
shows its newest messages, a turn still running (with a Stop that works from anywhere) and a change
waiting for approval, decidable right there. A turn started here runs in a task of its own
(components/runtime/copilot_turn.py), not the page's, and every panel of the person in this process follows
it live. A panel in another process reads the database: once a second while it shows a running turn
or a waiting change, and not at all otherwise.

It drives the same runtime the SSE endpoint streams (desk.agent.copilot.start and runtime), in process; the
approval modal (components/copilot/approval.py) shows the server-rendered diff; deciding goes through the same
`approvals.decide` as the API.
"""

import asyncio
import contextlib
from collections.abc import Callable

from nicegui import ui

from components.copilot.approval import approval_dialog
from components.copilot.log import ConversationLog
from components.runtime.copilot_turn import STOPPED, LiveTurn, drive, ending, running
from components.runtime.session import SessionUser, Visit
from desk import access, state
from desk.agent.copilot import approvals, sessions, start
from desk.agent.core import switch
from desk.agent.core.client import get_provider
from desk.agent.core.events import (
    Error,
    MessageDone,
    RunEvent,
    Token,
    ToolApprovalExpired,
    ToolApprovalRequired,
    ToolResult,
)
from desk.config import get_settings
from desk.db.client import get_db
from desk.errors import AiTurnedOff, DeskError

WAITING_FOR_YOU = "The assistant is waiting for you to approve or reject its change first."
WATCH_SECONDS = 1.0  # a panel showing a turn or a change of another process looks this often


def ai_off_reason(me: SessionUser, *, desk_switch: switch.Switch | None = None) -> str | None:
    """Why the assistant is not available to this person (in desk/access.py's words), or None when it is;
    `desk_switch`: as if the desk-wide switch stood so (by default, as this process last read it)."""
    # the switch as this process last read it (no read: the page's frame is drawn without waiting); a message sent
    # while it is off is refused with its reason all the same
    desk_switch = desk_switch or switch.known()
    decision = access.can_use_ai(me, settings=get_settings(), switch=desk_switch)
    return decision.reason if isinstance(decision, access.Denied) else None


class Copilot:
    """One page's view of the person's conversation; `build` draws it, then `load` fills it from the server."""

    def __init__(self, visit: Visit, *, on_change=None) -> None:
        self.visit = visit
        self.on_change = on_change  # told when a turn starts or ends (the Assistant page's list of runs)
        self.live: LiveTurn | None = None
        self.remote_run: str | None = None  # a turn of another process (or not followable here) holds the conversation
        self.session_id: str | None = None
        self.pending: ToolApprovalRequired | None = None
        self.dialog: ui.dialog | None = None
        self._unwatch_decision: Callable[[], None] = _nothing  # the pending change's subscription on the bus
        self.watching = False

    def build(self, *, on_close: Callable[[], object] | None = None) -> None:
        """Draw the panel; `on_close` adds a close button (the drawer's: on a phone it covers the whole screen)."""
        with ui.column().classes("w-full h-full gap-2 no-wrap min-h-0").mark("copilot") as self.root:
            with ui.row().classes("w-full items-center justify-between no-wrap"):
                ui.label("Assistant").classes("text-lg font-semibold")
                if on_close is not None:
                    close = ui.button(icon="close", on_click=on_close).props('flat round dense aria-label="Close"')
                    close.tooltip("Close (Ctrl+K)").mark("copilot-close")
            # the conversation is the person's, wherever it began: one an API client opened says so
            self.origin = ui.label("Started from the API").classes("text-xs text-grey-8").mark("copilot-origin")
            self.origin.set_visibility(False)
            self.log = ConversationLog()
            self.thinking = ui.label("Thinking…").classes("text-sm text-grey-7 italic").mark("copilot-thinking")
            # a button, not a chip: after a reload only this shows the change, and a chip neither looked clickable
            # nor was announced as something to press
            self.waiting = ui.button("Waiting for your approval", icon="pending_actions", on_click=self.open_approval)
            self.waiting.props("unelevated no-caps color=amber-3 text-color=grey-10").mark("approval-chip")
            self.waiting.props["aria-label"] = "Review the change waiting for your approval"
            self.input = ui.textarea(placeholder="Ask about your work orders…").props("autogrow outlined dense")
            self.input.classes("w-full copilot-input").mark("copilot-input")
            self.input.on("keydown.enter.prevent", self.send)
            with ui.row().classes("w-full justify-end gap-2"):
                self.stop_button = (
                    ui.button("Stop", on_click=self.stop).props("flat color=negative").mark("copilot-stop")
                )
                self.send_button = ui.button("Send", on_click=self.send).mark("copilot-send")
        ui.timer(WATCH_SECONDS, self._watch)
        # The person's other tabs in this process hear of a new turn or conversation on the Desk's bus (held
        # weakly: a closed page's panel is simply forgotten).
        state.current().bus.subscribe("conversation", self.visit.user_id, self._heard, weak=True)
        self._state()

    async def _heard(self, turn: LiveTurn | None) -> None:
        """Another tab of the person, in this process, started `turn`, or (None) moved to a new conversation."""
        if self.visit.gone:
            return
        with self.root:
            if turn is None:
                await self.load()
            else:
                self._attach_new(turn)

    async def load(self) -> None:
        """Show the conversation as the server has it now (on building, on opening the drawer, after a turn)."""
        actor = await self.visit.actor(touch=False)
        try:
            found = await sessions.conversation(db=get_db(), settings=get_settings(), actor=actor)
        except AiTurnedOff as off:  # turned off in another process since this one last read the switch
            if not self.visit.gone:
                with self.root:
                    self.log.clear(hint_for_writer=None)
                    self.log.note(off.message, error=True)
            return
        if self.visit.gone:
            return
        with self.root:
            self.session_id = found.session_id
            self.origin.set_visibility(found.from_api)
            live = running(actor.id)
            begun = bool(found.messages) or live is not None  # else a new conversation: what the assistant is for
            self.log.clear(hint_for_writer=None if begun else actor.can_write)
            mine = live.run_id if live else None
            shown = [m for m in found.messages if m[2] != mine]
            for at, (role, text, run_id) in enumerate(shown):
                if role == "note":
                    self.log.note(text)
                else:
                    self.log.message(role, text)
                last_of_run = at + 1 == len(shown) or shown[at + 1][2] != run_id
                if last_of_run and run_id in found.endings:  # how it ended, as it was said when it did
                    words, error = ending(*found.endings[run_id])
                    self.log.note(words, error=error)
            if live is not None:
                self._attach(live)
            else:
                self.live = None
                self.remote_run = found.running_run_id
                if found.waiting:
                    self._show_approval(found.waiting[-1], open_now=False)
                else:
                    self._close_approval()
            self._state()
            self.log.follow()

    def _attach(self, live: LiveTurn) -> None:
        self.live, self.remote_run = live, None
        live.panels.add(self)
        for kind, text in live.items:
            self.log.item(kind, text)
        if live.pending is not None:
            self._show_approval(live.pending, open_now=False)

    async def send(self) -> None:
        content = (self.input.value or "").strip()
        if not content:
            return
        self.log.follow_now()  # to what this send shows
        if self.live is not None or self.remote_run is not None:
            if self.pending is not None:  # not busy: waiting for this person, who may not have seen the chip
                self.log.note(WAITING_FOR_YOU, error=True)
                self.open_approval()
            else:
                self.log.note(start.ApprovalPending.default_message, error=True)
            return
        actor = await self.visit.actor()
        db, settings = get_db(), get_settings()
        self.input.value = ""
        self.send_button.set_enabled(False)
        try:
            session = await sessions.current_session(db=db, settings=settings, actor=actor)
            if session.id != self.session_id:  # another tab (or process) started a new one: show it, then ask there
                await show_current_conversation(actor.id)
            turn = await start.begin(
                db=db,
                settings=settings,
                provider=get_provider(),
                actor=actor,
                session_id=session.id,
                content=content,
                ip="ui",
            )
        except DeskError as error:
            self.log.note(error.message, error=True)
            self._state()
            return
        live = drive(actor.id, content, turn)
        await state.current().bus.publish("conversation", actor.id, live)  # this panel and the person's other tabs

    def _attach_new(self, live: LiveTurn) -> None:
        self.live, self.remote_run = live, None
        live.panels.add(self)
        self.log.begun(live.items[0][1])
        self._state()
        if self.on_change:
            self.on_change()

    async def stop(self) -> None:
        """Stop the running turn, wherever it runs: here at once, in another process at its next look."""
        actor = await self.visit.actor()
        live = self.live
        if live is not None and live.task is not None:
            live.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await live.task
            return
        if self.remote_run is not None:
            await sessions.stop_run(db=get_db(), actor=actor, run_id=self.remote_run)
            self.log.note("Stopping…")

    def follow(self, live: LiveTurn, event: RunEvent) -> None:
        """One event of the followed turn, shown here."""
        match event:
            case Token():
                self.log.stream(live.items[-1][1])
            case ToolApprovalRequired():
                self._show_approval(event, open_now=True)
            case ToolResult() | ToolApprovalExpired() | Error() | MessageDone():
                if isinstance(event, ToolResult | ToolApprovalExpired):
                    self._close_approval()
                if not isinstance(event, MessageDone) or event.notice:
                    self.log.item(*live.items[-1])
                self.log.answer = None
            case _:
                pass
        self._state()

    def turn_ended(self, live: LiveTurn) -> None:
        self.live = None
        self._close_approval()
        if live.items[-1][1] == STOPPED:
            self.log.note(live.items[-1][1])
        self._state()
        if self.on_change:
            self.on_change()

    async def _watch(self) -> None:
        """A turn or a change of another process: look once a second until it is over (else nothing is read)."""
        if self.watching or self.visit.gone or self.live is not None:
            return
        if self.remote_run is None and self.pending is None:
            return
        self.watching = True
        try:
            db = get_db()
            if self.pending is not None and not await sessions.still_waiting(
                db=db, tool_call_id=self.pending.tool_call_id
            ):
                self._close_approval()  # decided (or expired) in another tab
            running = self.remote_run is not None and self.session_id is not None
            if running and await sessions.run_status(db=db, session_id=self.session_id) is None:
                await self.load()  # the turn is over: its answer is stored
            self._state()
        finally:
            self.watching = False

    def _state(self) -> None:
        busy = self.live is not None or self.remote_run is not None
        self.send_button.set_enabled(not busy)
        self.stop_button.set_visibility(busy)
        remote_thinking = self.remote_run is not None and self.pending is None
        self.thinking.set_visibility(bool(self.live and self.live.thinking) or remote_thinking)
        self.waiting.set_visibility(self.pending is not None)

    # --- approvals ---------------------------------------------------------------------

    def _show_approval(self, event: ToolApprovalRequired, *, open_now: bool) -> None:
        if self.pending is not None and self.pending.tool_call_id == event.tool_call_id and self.dialog is not None:
            return
        self._close_approval()
        self.pending = event
        # decided in another tab of this process: closed there at once, not at that tab's next look
        self._unwatch_decision = state.current().bus.subscribe(
            "tool_call", event.tool_call_id, self._decided, weak=True
        )
        with self.root:
            self.dialog = approval_dialog(event, decide=lambda approve, reason: self._decide(event, approve, reason))
        if open_now:
            self.dialog.open()
        self._state()

    async def _decide(self, event: ToolApprovalRequired, approve: bool, reason: str | None) -> None:
        actor = await self.visit.actor()
        try:
            await approvals.decide(
                db=get_db(), actor=actor, tool_call_id=event.tool_call_id, approve=approve, reason=reason
            )
        except DeskError as error:
            self.log.note(error.message, error=True)
        self._close_approval()

    def _decided(self, tool_call_id: str) -> None:
        """The change this panel shows was decided (`approvals.decide` publishes it), maybe in another tab."""
        if self.pending is not None and self.pending.tool_call_id == tool_call_id and not self.visit.gone:
            with self.root:
                self._close_approval()

    def open_approval(self) -> None:
        """Put the waiting change before the person again (its button, or the drawer opening with it waiting)."""
        if self.dialog is not None:
            self.dialog.open()

    def _close_approval(self) -> None:
        self._unwatch_decision()
        self._unwatch_decision = _nothing
        self.pending = None
        if self.dialog is not None:
            self.dialog.close()
            self.dialog.delete()
            self.dialog = None
        self.waiting.set_visibility(False)


async def show_current_conversation(user_id: str) -> None:
    """Every open panel of the person in this process shows their conversation as stored now: a new one was
    started (one tab's "New conversation" must not leave another tab showing the archived one)."""
    await state.current().bus.publish("conversation", user_id)


def _nothing() -> None:
    """No subscription to end."""
