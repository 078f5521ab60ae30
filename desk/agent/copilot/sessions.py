"""Copilot sessions and a person's own runs (COP-1, COP-8, COP-10), and ending runs at logout."""

import asyncio
from dataclasses import dataclass
from functools import partial

from bson import ObjectId
from pymongo.asynchronous.database import AsyncDatabase

from desk import state
from desk.actors import Actor
from desk.agent.copilot import approvals, live
from desk.agent.copilot.start import ApprovalPending, require_ai_user
from desk.agent.core.events import ToolApprovalRequired
from desk.agent.core.models import AgentRunDetail, AgentRunRead, CopilotSessionRead, CopilotSessionWithMessages
from desk.agent.core.store import agent_messages, agent_runs, agent_tool_calls, copilot_sessions
from desk.config import Settings
from desk.errors import Conflict, NotFound
from desk.schema import by_id, parse_object_id


async def open_session(
    *, db: AsyncDatabase, settings: Settings, actor: Actor, from_api: bool = False
) -> CopilotSessionRead:
    """A fresh conversation; the previous one is archived unless a run in it is still going. `from_api`: opened
    by an API client (POST /api/v1/ai/sessions), which the person's drawer says."""
    user = await require_ai_user(db, settings, actor)
    current = await copilot_sessions.active_session(db, user["_id"])
    if current is not None and not await copilot_sessions.archive_session(db, current["_id"]):
        raise ApprovalPending("Your last conversation is still running or waiting for your approval.")
    created = await copilot_sessions.insert_session(db, user["_id"], from_api=from_api)
    if created is None:  # a concurrent request opened one first: the same answer as a failed archive above,
        # which is what a loser of that race usually meets first (clients see one code for "not now")
        raise ApprovalPending("Another conversation was just started; use that one.")
    return CopilotSessionRead.model_validate(created)


async def current_session(*, db: AsyncDatabase, settings: Settings, actor: Actor) -> CopilotSessionRead:
    """The person's active conversation, opening one when there is none."""
    user = await require_ai_user(db, settings, actor)
    current = await copilot_sessions.active_session(db, user["_id"])
    if current is not None:
        return CopilotSessionRead.model_validate(current)
    created = await copilot_sessions.insert_session(db, user["_id"])
    if created is None:  # another page of the person opened it at the same moment: that one is theirs
        created = await copilot_sessions.active_session(db, user["_id"])
    if created is None:
        raise Conflict("Another conversation was just started; use that one.")
    return CopilotSessionRead.model_validate(created)


async def recent_sessions(*, db: AsyncDatabase, actor: Actor) -> list[CopilotSessionWithMessages]:
    """The person's recent conversations with their messages (at most 50 each)."""
    found = []
    for session in await copilot_sessions.recent_sessions(db, ObjectId(actor.id)):
        messages = await agent_messages.session_messages(db, session["_id"], limit=50)
        shown = [m for m in messages if m["role"] in ("user", "assistant") and m["content"]]
        found.append(CopilotSessionWithMessages.model_validate({**session, "messages": shown}))
    return found


async def own_runs(*, db: AsyncDatabase, actor: Actor) -> list[AgentRunRead]:
    return [AgentRunRead.model_validate(run) for run in await agent_runs.user_runs(db, ObjectId(actor.id))]


async def own_run(*, db: AsyncDatabase, actor: Actor, run_id: str) -> AgentRunDetail:
    """One of the person's runs with its messages and tool calls; someone else's is NotFound."""
    run = await by_id(run_id, partial(agent_runs.get_run, db))
    if run is None or str(run.get("userId")) != actor.id:
        raise NotFound("No such run.")
    messages = await agent_messages.run_messages(db, run["_id"])
    calls = await agent_tool_calls.run_tool_calls(db, run["_id"])
    return AgentRunDetail.model_validate({"run": run, "messages": messages, "toolCalls": calls})


async def abort_runs(*, db: AsyncDatabase, user_id: str) -> None:
    """Logout or deactivation: every running run of the person ends as aborted, approvals expire.

    Their turns in this web process stop at once, in the middle of a model call too; a turn in
    another process sees its run ended at its next check (see live.interrupt).
    """
    oid = parse_object_id(user_id)
    for run in await agent_runs.running_runs(db, oid) if oid else []:
        if await agent_runs.finish_run(db, run["_id"], "aborted"):
            await approvals.expire_for_run(db, run["_id"])
    await live.interrupt(user_id)


@dataclass(frozen=True)
class Conversation:
    session_id: str
    messages: list[tuple[str, str, str]]  # role (user, assistant, or note: a tool call's line), text, run id; oldest
    running_run_id: str | None
    waiting: list[ToolApprovalRequired]
    endings: dict[str, tuple[str, str | None]]  # run id -> status and error code, for those not ended complete
    from_api: bool = False  # started by an API client, not in the desk's pages


async def conversation(*, db: AsyncDatabase, settings: Settings, actor: Actor, limit: int = 50) -> Conversation:
    """The person's active conversation as any page shows it: newest messages, a run still going, a change waiting."""
    session = await current_session(db=db, settings=settings, actor=actor)
    oid = ObjectId(session.id)
    stored, found = await asyncio.gather(
        agent_messages.session_messages(db, oid, limit=limit), copilot_sessions.get_session(db, oid)
    )
    running = found.get("runningRunId") if found else None
    waiting = await agent_tool_calls.pending_approvals(db, running) if running else []
    shown = [(_role(m), _text(m), m.get("runId")) for m in stored]
    moment = state.current().clock.now()  # the clock approvals lapse by (desk/agent/copilot/approvals.py)
    ended = await agent_runs.endings(db, list({run_id for _, _, run_id in shown if run_id is not None}))
    return Conversation(
        session_id=session.id,
        messages=[(role, text, str(run_id)) for role, text, run_id in shown if text],
        running_run_id=str(running) if running else None,
        waiting=[_waiting_event(call) for call in waiting if call["approval"]["expiresAt"] > moment],
        endings={str(run_id): ending for run_id, ending in ended.items()},
        from_api=bool(found and found.get("startedFrom") == "api"),
    )


def _role(message: dict) -> str:
    return "note" if message["role"] == "tool" else message["role"]


def _text(message: dict) -> str | None:
    """What the person read of a stored message: their words, the answer, or a tool call's line (never its result)."""
    if message["role"] == "tool":
        return message.get("summary")  # a call stored before summaries were kept shows nothing, as before
    return message["content"] if message["role"] in ("user", "assistant") else None


def _waiting_event(call: dict) -> ToolApprovalRequired:
    """A stored proposal as the event that first showed it (the diff from its frozen args and pre-image)."""
    return ToolApprovalRequired(
        tool_call_id=str(call["_id"]),
        tool=call["tool"],
        args=call["args"],
        diff=approvals.diff(call["tool"], call["args"], call.get("preImage")),
        expires_at=call["approval"]["expiresAt"],
    )


async def still_waiting(*, db: AsyncDatabase, tool_call_id: str) -> bool:
    """Whether a proposed change is still waiting for its decision (a page in another process decides)."""
    call = await by_id(tool_call_id, partial(agent_tool_calls.get_tool_call, db))
    return bool(call and call.get("approval") and call["approval"]["status"] == "pending")


async def run_status(*, db: AsyncDatabase, session_id: str) -> str | None:
    """The id of the run holding the conversation now, or None when it is free."""
    found = await copilot_sessions.get_session(db, ObjectId(session_id))
    running = found.get("runningRunId") if found else None
    return str(running) if running else None


async def stop_run(*, db: AsyncDatabase, actor: Actor, run_id: str) -> None:
    """Stop one of the person's runs from any page or tab: ended in the database, interrupted where it runs.

    In this process the turn stops at once; in another one at its next look (a second while it waits for
    a decision, its lease keeper's next renewal while the model answers). A run not stored yet (no first
    token so far) cannot be ended from another process (known gap): it runs to its end.
    """
    oid = parse_object_id(run_id)
    run = await agent_runs.get_run(db, oid) if oid else None
    if run is not None and str(run.get("userId")) == actor.id and await agent_runs.finish_run(db, oid, "aborted"):
        await approvals.expire_for_run(db, oid)
    await live.stop(actor.id, run_id)


async def asked_in(*, db: AsyncDatabase, actor: Actor, run_ids: list[str]) -> dict[str, str]:
    """What the person asked in each of their own runs (its first message), by run id: two reads for a whole list."""
    oids = [oid for run_id in run_ids if (oid := parse_object_id(run_id)) is not None]
    mine = await agent_runs.owned_by(db, ObjectId(actor.id), oids)  # another person's run ids answer nothing
    return {str(run_id): content for run_id, content in (await agent_messages.first_asked(db, mine)).items()}
