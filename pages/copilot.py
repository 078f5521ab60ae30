"""/app/copilot: the assistant on a full page, with recent conversations and one's own runs (COP-8, COP-10)."""

from fastapi import Request
from nicegui import APIRouter, ui

from components import session
from components.copilot import Copilot, ai_off_reason
from components.formats import ago, when
from components.frame import frame
from desk.agent import sessions as agent_sessions
from desk.db.client import get_db

router = APIRouter()
STATUS_WORDS = {
    "running": "Running",
    "complete": "Answered",
    "error": "Failed",
    "budget_exceeded": "Out of budget",
    "expired": "Approval expired",
    "aborted": "Stopped",
}


@router.page("/app/copilot")
async def copilot_page(request: Request):
    user = await session.current_user()
    if user is None:
        return session.to_login(request)
    actor = session.actor_of(user)
    with frame("Assistant", user, path="/app/copilot"):
        off = ai_off_reason(user)
        with ui.row().classes("w-full gap-6 items-start no-wrap"):
            with ui.card().classes("w-[40rem] min-h-[28rem]"):
                if off is None:
                    Copilot(actor).build()
                else:
                    ui.label(off).mark("copilot-page-off")
            with ui.column().classes("grow gap-4"):
                await _recent(actor)
                await _runs(actor)


async def _recent(actor) -> None:
    ui.label("Recent conversations").classes("text-lg font-semibold")
    found = await agent_sessions.recent_sessions(db=get_db(), actor=actor)
    if not found:
        ui.label("No conversations yet.").classes("text-grey-7")
        return
    for conversation in found[:10]:
        with ui.expansion(f"{when(conversation.created_at)} · {len(conversation.messages)} messages").classes("w-full"):
            for message in conversation.messages:
                who = "You" if message.role == "user" else "Assistant"
                ui.label(f"{who}: {message.content}").classes("text-sm whitespace-pre-wrap break-words")


async def _runs(actor) -> None:
    ui.label("Your runs").classes("text-lg font-semibold")
    found = await agent_sessions.own_runs(db=get_db(), actor=actor)
    if not found:
        ui.label("No runs yet.").classes("text-grey-7")
        return
    with ui.column().classes("w-full gap-0 border rounded").mark("runs"):
        for run in found[:25]:
            with ui.row().classes("w-full gap-3 px-3 py-1 border-b text-sm"):
                ui.label(STATUS_WORDS.get(run.status, run.status)).classes("w-32")
                ui.label(f"{run.input_tokens + run.output_tokens:,} tokens").classes("w-28 text-grey-8")
                ui.label(ago(run.started_at)).classes("text-grey-7").tooltip(when(run.started_at))
