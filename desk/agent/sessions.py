"""Copilot sessions and a person's own runs (COP-1, COP-8, COP-10), and ending runs at logout."""

from bson import ObjectId
from pymongo.asynchronous.database import AsyncDatabase

from desk.actors import Actor
from desk.agent import approvals, live, runs
from desk.agent.models import AgentRunDetail, AgentRunRead, CopilotSessionRead, CopilotSessionWithMessages
from desk.agent.start import ApprovalPending, require_ai_user
from desk.config import Settings
from desk.errors import NotFound
from desk.schema import parse_object_id


async def open_session(*, db: AsyncDatabase, settings: Settings, actor: Actor) -> CopilotSessionRead:
    """A fresh conversation; the previous one is archived unless a run in it is still going."""
    user = await require_ai_user(db, settings, actor)
    current = await runs.active_session(db, user["_id"])
    if current is not None and not await runs.archive_session(db, current["_id"]):
        raise ApprovalPending("Your last conversation is still running or waiting for your approval.")
    created = await runs.insert_session(db, user["_id"])
    if created is None:  # a concurrent request opened one first
        raise ApprovalPending("Another conversation was just started; use that one.")
    return CopilotSessionRead.model_validate(created)


async def current_session(*, db: AsyncDatabase, settings: Settings, actor: Actor) -> CopilotSessionRead:
    """The person's active conversation, opening one when there is none."""
    user = await require_ai_user(db, settings, actor)
    current = await runs.active_session(db, user["_id"])
    if current is not None:
        return CopilotSessionRead.model_validate(current)
    return await open_session(db=db, settings=settings, actor=actor)


async def recent_sessions(*, db: AsyncDatabase, actor: Actor) -> list[CopilotSessionWithMessages]:
    """The person's recent conversations with their messages (at most 50 each)."""
    found = []
    for session in await runs.recent_sessions(db, ObjectId(actor.id)):
        messages = await runs.session_messages(db, session["_id"], limit=50)
        shown = [m for m in messages if m["role"] in ("user", "assistant") and m["content"]]
        found.append(CopilotSessionWithMessages.model_validate({**session, "messages": shown}))
    return found


async def own_runs(*, db: AsyncDatabase, actor: Actor) -> list[AgentRunRead]:
    return [AgentRunRead.model_validate(run) for run in await runs.user_runs(db, ObjectId(actor.id))]


async def own_run(*, db: AsyncDatabase, actor: Actor, run_id: str) -> AgentRunDetail:
    """One of the person's runs with its messages and tool calls; someone else's is NotFound."""
    oid = parse_object_id(run_id)
    run = await runs.get_run(db, oid) if oid else None
    if run is None or str(run.get("userId")) != actor.id:
        raise NotFound("No such run.")
    messages = await runs.run_messages(db, run["_id"])
    calls = await runs.run_tool_calls(db, run["_id"])
    return AgentRunDetail.model_validate({"run": run, "messages": messages, "toolCalls": calls})


async def abort_runs(*, db: AsyncDatabase, user_id: str) -> None:
    """Logout or deactivation: every running run of the person ends as aborted, approvals expire.

    Their turns in this web process stop at once, in the middle of a model call too; a turn in
    another process sees its run ended at its next check (see live.interrupt).
    """
    oid = parse_object_id(user_id)
    for run in await runs.running_runs(db, oid) if oid else []:
        if await runs.finish_run(db, run["_id"], "aborted"):
            await approvals.expire_for_run(db, run["_id"])
    live.interrupt(user_id)
