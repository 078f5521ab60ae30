"""A copilot turn running in this process (`LiveTurn`), and the words its events and endings become.

A turn started from a panel runs in a task of its own, not the page's (`drive`): a page that closes
leaves it to finish and be stored. Every panel of the person in this process follows it
(components/copilot/panel.py draws them); one opened later catches up from what the turn has shown so far.
"""

import asyncio
import weakref
from typing import Protocol, assert_never

from nicegui import background_tasks, ui

from components.runtime.session import Visit
from desk import state
from desk.agent.copilot.turn import STEPS_USED, UNREACHED, CopilotTurn
from desk.agent.core.budget import BudgetExceeded
from desk.agent.core.events import (
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
from desk.agent.core.provider import AIUnavailable
from desk.errors import DeskError, ErrorCode

EXPIRED = "The approval expired, so nothing was changed. Ask again if you still want it."
STOPPED = "Stopped. Nothing pending was carried out."


class Follower(Protocol):
    """A panel showing the turn (components.copilot.panel.Copilot)."""

    visit: Visit
    root: ui.element

    def follow(self, live: "LiveTurn", event: RunEvent) -> None: ...

    def turn_ended(self, live: "LiveTurn") -> None: ...


def ending(status: str, code: str | None) -> tuple[str, bool]:
    """What a run that ended other than complete came to, for a page drawing it later: the words, and if an error."""
    match status:
        case "aborted":
            return STOPPED, False
        case "expired":
            return EXPIRED, True
        case "budget_exceeded" if code == "step_cap":
            return STEPS_USED, True
        case "budget_exceeded":
            return BudgetExceeded.default_message, True
        case _ if code in (ErrorCode.AI_UNAVAILABLE.value, UNREACHED):
            return AIUnavailable.default_message, True
        case _:
            return "The assistant stopped before it finished this answer.", True


class LiveTurn:
    """A turn running in this process, in its own task: it outlives the page that started it.

    Every panel of the person in this process follows it (`panels`); one opened later catches up from
    `items`, what the turn has shown so far.
    """

    def __init__(self, user_id: str, content: str) -> None:
        self.user_id, self.run_id = user_id, ""
        self.items: list[list[str]] = [["user", content]]  # [kind, text]: user, answer, note, error
        self.pending: ToolApprovalRequired | None = None
        self.thinking = True
        self.panels: weakref.WeakSet[Follower] = weakref.WeakSet()
        self.task: asyncio.Task | None = None
        self.turns_here = state.current().copilot_turns  # the process's, by person: this one is there while it runs

    def seen(self, event: RunEvent) -> None:
        """Fold one event in and show it on every panel following the turn."""
        match event:
            case Token(text=more):
                self.thinking = False
                if self.items[-1][0] != "answer":
                    self.items.append(["answer", ""])
                self.items[-1][1] += more
            case ToolResult(summary=summary):
                self.pending, self.thinking = None, True
                self.items.append(["note", summary])
            case ToolApprovalRequired():
                self.pending, self.thinking = event, False
            case ToolApprovalExpired():
                self.pending = None
                self.items.append(["error", EXPIRED])
            case Error(message=message):
                self.items.append(["error", message])
            case MessageDone(notice=notice):
                self.thinking = False
                if notice:
                    self.items.append(["note", notice])
            case ToolCallStart() | Ping():
                pass  # a call's start and a keep-alive show nothing
            case _:
                assert_never(event)
        self._each(lambda panel: panel.follow(self, event))

    def ended(self) -> None:
        self.pending, self.thinking = None, False
        if self.turns_here.get(self.user_id) is self:
            del self.turns_here[self.user_id]
        self._each(lambda panel: panel.turn_ended(self))

    def _each(self, show) -> None:
        for panel in tuple(self.panels):
            if not panel.visit.gone:
                with panel.root:
                    show(panel)


def running(user_id: str) -> LiveTurn | None:
    """The person's turn running in this process, if there is one."""
    return state.current().copilot_turns.get(user_id)


def drive(user_id: str, content: str, turn: CopilotTurn) -> LiveTurn:
    """Run `turn` (just begun) in a task of its own, in no page's context: a page may close, the turn goes on."""
    live = LiveTurn(user_id, content)
    live.run_id = turn.run_id
    live.turns_here[user_id] = live
    live.task = background_tasks.create(_drive(live, turn), name="copilot-turn")
    return live


async def _drive(live: LiveTurn, turn: CopilotTurn) -> None:
    """Consume the turn to its end, whatever becomes of the pages that show it."""
    try:
        async for event in turn.events():
            live.seen(event)
    except asyncio.CancelledError:
        live.items.append(["note", STOPPED])
        raise
    except DeskError as error:
        live.seen(Error(code=error.code, message=error.message))
    finally:
        live.ended()
