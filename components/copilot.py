"""The copilot drawer (Cmd/Ctrl+K): a conversation with streamed answers and approvals of staged writes.

It drives the same runtime the SSE endpoint streams (desk.agent.start and runtime), in this process: no HTTP
loopback. The approval dialog shows the server-rendered diff from the `tool_approval_required`
event; deciding goes through the same `approvals.decide` as the API.
"""

import asyncio
import contextlib
from datetime import UTC, datetime
from typing import assert_never

from nicegui import background_tasks, ui

from components.chips import PRIORITY_LABELS, STATUS_LABELS
from components.safe_markdown import safe_markdown, to_safe_markdown
from desk.actors import Actor
from desk.agent import approvals, start
from desk.agent.client import get_provider
from desk.agent.events import (
    Diff,
    Error,
    MessageDone,
    Ping,
    RunEvent,
    Token,
    ToolApprovalExpired,
    ToolApprovalRequired,
    ToolCallStart,
    ToolResult,
)
from desk.agent.sessions import current_session
from desk.config import get_settings
from desk.db.client import get_db
from desk.errors import DeskError, ErrorCode

PLAIN_ERRORS = {
    ErrorCode.AI_UNAVAILABLE: "The assistant can't be reached right now. Try again in a minute.",
    ErrorCode.AI_BUDGET_EXCEEDED: "Today's AI budget is used up. It resets at midnight UTC; the desk works as usual.",
    ErrorCode.AI_APPROVAL_PENDING: "The assistant is still busy with your last message. Wait for it, or press Stop.",
    ErrorCode.RATE_LIMITED: "That was a lot of messages in a short time. Wait a minute, then ask again.",
}
FIELDS = ("title", "description", "priority", "status")


def ai_off_reason(user: dict) -> str | None:
    """Why the assistant is not available to this person, or None when it is."""
    if not get_settings().ai_enabled:
        return "The AI assistant is not enabled on this desk."
    if not user.get("aiEnabled", False):
        return "AI assistance is off for you. You can turn it on in your profile."
    return None


class Copilot:
    """One person's conversation panel; `open_drawer`/`close` are wired to Cmd/Ctrl+K by the frame."""

    def __init__(self, actor: Actor) -> None:
        self.actor = actor
        self.task: asyncio.Task | None = None
        self.pending: ToolApprovalRequired | None = None
        self.answer: ui.markdown | None = None  # the answer being streamed, and its text so far
        self.text = ""
        self.dialog: ui.dialog | None = None

    def build(self) -> None:
        with ui.column().classes("w-full h-full gap-2").mark("copilot") as self.root:
            ui.label("Assistant").classes("text-lg font-semibold")
            self.log = ui.column().classes("w-full gap-2 grow overflow-auto").mark("copilot-log")
            self.waiting = ui.chip(
                "Waiting for your approval",
                icon="pending_actions",
                color="amber-8",
                text_color="white",
                on_click=self._reopen,
            ).mark("approval-chip")
            self.waiting.set_visibility(False)
            self.input = ui.textarea(placeholder="Ask about your work orders…").props("autogrow outlined dense")
            self.input.classes("w-full").mark("copilot-input")
            self.input.on("keydown.enter.prevent", self.send)
            with ui.row().classes("w-full justify-end gap-2"):
                self.stop_button = (
                    ui.button("Stop", on_click=self.stop).props("flat color=negative").mark("copilot-stop")
                )
                self.send_button = ui.button("Send", on_click=self.send).mark("copilot-send")
            self._busy(False)

    async def send(self) -> None:
        content = (self.input.value or "").strip()
        if not content or self.task is not None:
            return
        self.input.value = ""
        with self.log:
            ui.label(content).classes("self-end bg-blue-1 rounded px-3 py-2 whitespace-pre-wrap break-words")
        self._busy(True)
        # Run inside the panel's context, so elements the run creates (answers, the dialog) land here.
        self.task = background_tasks.create(self._run(content), name="copilot-turn", context=self.root)

    async def stop(self) -> None:
        """Cancel the run: the upstream call is aborted and pending approvals expire (spec §4.5)."""
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task

    async def _run(self, content: str) -> None:
        db, settings = get_db(), get_settings()
        self.answer, self.text = None, ""
        try:
            session = await current_session(db=db, settings=settings, actor=self.actor)
            turn = await start.begin(
                db=db,
                settings=settings,
                provider=get_provider(),
                actor=self.actor,
                session_id=session.id,
                content=content,
                ip="ui",
            )
            async for event in turn.events():
                self._on_event(event)
        except DeskError as error:
            self._note(PLAIN_ERRORS.get(error.code, error.message), error=True)
        except asyncio.CancelledError:
            self._note("Stopped. Nothing pending was carried out.")
            raise
        finally:
            self.task = None
            self._close_approval()
            self._busy(False)

    def _on_event(self, event: RunEvent) -> None:
        match event:
            case Token(text=more):
                if self.answer is None:
                    with self.log:
                        self.answer = safe_markdown().classes("w-full").mark("copilot-answer")
                self.text += more
                self.answer.set_content(to_safe_markdown(self.text))
            case ToolResult(summary=summary):
                self._note(summary)
                self.answer, self.text = None, ""  # what the assistant writes next is a new answer
            case ToolApprovalRequired():
                self.pending = event
                self._show_approval(event)
            case ToolApprovalExpired():
                self._close_approval()
                self._note("The approval expired, so nothing was changed. Ask again if you still want it.", error=True)
            case Error(code=code, message=message):
                self._note(PLAIN_ERRORS.get(code, message), error=True)
            case MessageDone(notice=notice):
                if notice:
                    self._note(notice)
            case ToolCallStart() | Ping():
                pass  # a call's start and a keep-alive show nothing
            case _:
                assert_never(event)

    def _note(self, text: str, *, error: bool = False) -> None:
        with self.log:
            label = ui.label(text).classes("text-sm " + ("text-negative" if error else "text-grey-7"))
            label.mark("copilot-error" if error else "copilot-note")

    def _busy(self, busy: bool) -> None:
        self.send_button.set_enabled(not busy)
        self.stop_button.set_visibility(busy)

    # --- approvals ---------------------------------------------------------------------

    def _show_approval(self, event: ToolApprovalRequired) -> None:
        self._close_approval()
        self.waiting.set_visibility(True)
        with ui.dialog().props("persistent=false") as self.dialog, ui.card().classes("w-[40rem]").mark("approval"):
            ui.label(_headline(event.diff)).classes("text-lg font-semibold")
            _diff_table(event.diff)
            countdown = ui.label().classes("text-sm text-grey-7").mark("approval-countdown")
            expires = event.expires_at

            def tick() -> None:
                left = int((expires - datetime.now(UTC)).total_seconds())
                countdown.set_text(f"Expires in {left // 60}:{left % 60:02d}" if left > 0 else "Expired")

            tick()
            ui.timer(1.0, tick)
            reason = ui.input("Reason (optional, goes back to the assistant)").props("maxlength=300 dense")
            reason.classes("w-full").mark("reject-reason")
            with ui.row().classes("w-full justify-end"):
                ui.button("Not now", on_click=self.dialog.close).props("flat").mark("approval-dismiss")
                ui.button("Reject", on_click=lambda: self._decide(event, False, reason.value)).props(
                    "outline color=negative"
                ).mark("reject")
                approve = ui.button("Approve", on_click=lambda: self._decide(event, True, None)).mark("approve")
                approve.on("click", approve.disable)  # a second click can never send a second decision
        self.dialog.open()

    async def _decide(self, event: ToolApprovalRequired, approve: bool, reason: str | None) -> None:
        try:
            await approvals.decide(
                db=get_db(), actor=self.actor, tool_call_id=event.tool_call_id, approve=approve, reason=reason
            )
        except DeskError as error:
            self._note(error.message, error=True)
        self._close_approval()

    def _reopen(self) -> None:
        if self.dialog is not None:
            self.dialog.open()

    def _close_approval(self) -> None:
        if self.dialog is not None:
            self.dialog.close()
            self.dialog.delete()
            self.dialog = None
        self.waiting.set_visibility(False)


def _headline(diff: Diff) -> str:
    return {
        "create": "Create this work order?",
        "update": "Change this work order?",
        "delete": "Delete this work order?",
    }[diff.action]


def _diff_table(diff: Diff) -> None:
    """Before and after side by side; changed fields stand out. Values are text, never HTML."""
    with ui.grid(columns="7rem 1fr 1fr").classes("w-full gap-x-3 gap-y-1 items-start").mark("diff"):
        for heading in ("", "Before" if diff.before is not None else "", "After" if diff.after is not None else ""):
            ui.label(heading).classes("text-xs text-grey-7 uppercase")
        for field in FIELDS:
            changed = field in diff.changed
            ui.label(field.title()).classes("font-medium" + (" text-primary" if changed else ""))
            for side in (diff.before, diff.after):
                value = _shown(field, side.get(field)) if side is not None else ""
                cell = ui.label(value).classes("whitespace-pre-wrap break-words text-sm")
                if changed and side is diff.after and side is not None:
                    cell.classes("bg-green-1 rounded px-1").mark("diff-changed")
                elif changed and side is not None:
                    cell.classes("bg-red-1 rounded px-1 line-through")


def _shown(field: str, value: object) -> str:
    labels = {"priority": PRIORITY_LABELS, "status": STATUS_LABELS}.get(field)
    return labels.get(str(value), str(value)) if labels else str(value or "")
