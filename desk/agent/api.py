"""/api/v1/ai: copilot sessions, the message stream (SSE), decisions on staged writes, one's own runs."""

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Depends, Header, Request
from fastapi.responses import StreamingResponse

from desk.agent import approvals, sessions
from desk.agent.client import provider_dependency
from desk.agent.events import Error, Ping, RunEvent
from desk.agent.models import (
    AgentRunDetail,
    AgentRunRead,
    AgentToolCallRead,
    CopilotSessionRead,
    CopilotSessionWithMessages,
    DecideIn,
    MessageIn,
)
from desk.agent.provider import Provider
from desk.agent.start import begin
from desk.config import get_settings
from desk.errors import ErrorCode
from desk.http import AUTHED, CurrentActor, CurrentUser, Db, errors

log = logging.getLogger(__name__)
router = APIRouter(prefix="/api/v1/ai", tags=["ai"])
AI_ERRORS = (*AUTHED, ErrorCode.NOT_FOUND, ErrorCode.AI_APPROVAL_PENDING, ErrorCode.AI_BUDGET_EXCEEDED)
_winding_down: set[asyncio.Task] = set()  # runs still cleaning up after their client left (strong refs)


@router.post("/sessions", status_code=201, response_model=CopilotSessionRead, responses=errors(*AI_ERRORS))
async def open_session(db: Db, actor: CurrentActor) -> CopilotSessionRead:
    """Start a new conversation (the previous one is archived)."""
    return await sessions.open_session(db=db, settings=get_settings(), actor=actor)


@router.get("/sessions", response_model=list[CopilotSessionWithMessages], responses=errors(*AUTHED))
async def list_sessions(db: Db, actor: CurrentActor) -> list[CopilotSessionWithMessages]:
    return await sessions.recent_sessions(db=db, actor=actor)


@router.post(
    "/sessions/{session_id}/messages",
    responses={
        200: {"content": {"text/event-stream": {}}, "description": "Server-sent events"},
        **errors(*AI_ERRORS, ErrorCode.AI_MESSAGE_DUPLICATE, ErrorCode.RATE_LIMITED),
    },
)
async def send_message(
    session_id: str,
    body: MessageIn,
    *,
    request: Request,
    db: Db,
    user: CurrentUser,
    actor: CurrentActor,
    provider: Annotated[Provider, Depends(provider_dependency)],
    idempotency_key: Annotated[str | None, Header(max_length=200)] = None,
) -> StreamingResponse:
    """Ask the copilot; the answer streams as SSE events. Refusals before the stream are the JSON envelope."""
    settings = get_settings()
    turn = await begin(
        db=db,
        settings=settings,
        provider=provider,
        actor=actor,
        session_id=session_id,
        content=body.content,
        ip=request.client.host if request.client else "unknown",
        idempotency_key=idempotency_key,
        user=user,  # read by authentication for this very request: AI access is checked without reading it again
    )
    stream = sse(turn.events(), keepalive=settings.ai_sse_keepalive_ms / 1000)
    headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    return StreamingResponse(stream, media_type="text/event-stream", headers=headers)


@router.post(
    "/tool-calls/{tool_call_id}/decide",
    response_model=AgentToolCallRead,
    responses=errors(
        *AUTHED,
        ErrorCode.NOT_FOUND,
        ErrorCode.AI_APPROVAL_RESOLVED,
        ErrorCode.AI_APPROVAL_STALE,
        ErrorCode.AI_APPROVAL_EXPIRED,
    ),
)
async def decide(tool_call_id: str, body: DecideIn, db: Db, actor: CurrentActor) -> AgentToolCallRead:
    """Approve or reject a staged write; a rejection's reason goes back to the assistant."""
    return await approvals.decide(
        db=db, actor=actor, tool_call_id=tool_call_id, approve=body.approve, reason=body.reason
    )


@router.get("/runs", response_model=list[AgentRunRead], responses=errors(*AUTHED))
async def my_runs(db: Db, actor: CurrentActor) -> list[AgentRunRead]:
    return await sessions.own_runs(db=db, actor=actor)


@router.get("/runs/{run_id}", response_model=AgentRunDetail, responses=errors(*AUTHED, ErrorCode.NOT_FOUND))
async def my_run(run_id: str, db: Db, actor: CurrentActor) -> AgentRunDetail:
    """One of your runs, with its messages and tool calls."""
    return await sessions.own_run(db=db, actor=actor, run_id=run_id)


def encode(event: RunEvent) -> str:
    """One SSE frame: the event name from the closed set, the payload as one line of JSON."""
    return f"event: {event.kind}\ndata: {json.dumps(event.model_dump(mode='json'), ensure_ascii=False)}\n\n"


async def sse(events: AsyncIterator[RunEvent], *, keepalive: float) -> AsyncIterator[str]:
    """Frames for `events`, with a `ping` whenever nothing else was sent for `keepalive` seconds.

    The run is pumped by its own task so a quiet stretch (a slow model, a pending approval) can be
    filled with pings; when the client goes away, cancelling that task aborts the run. Events that
    are already waiting are sent in one write: each write passes the whole middleware stack.
    """
    queue: asyncio.Queue[RunEvent | None] = asyncio.Queue()

    async def pump() -> None:
        try:
            async for event in events:
                await queue.put(event)
        except Exception as error:  # an unexpected failure still ends the stream with an error event
            log.error("copilot run failed (%s)", type(error).__name__)  # the type only: messages may quote text
            await queue.put(
                Error(code=ErrorCode.INTERNAL, message="Something went wrong on our side; it has been logged.")
            )
        finally:
            await queue.put(None)

    task = asyncio.create_task(pump())
    try:
        while True:
            try:
                async with asyncio.timeout(keepalive):
                    event = await queue.get()
            except TimeoutError:
                yield encode(Ping())
                continue
            frames = []
            while event is not None:  # events already waiting go out in one write: nothing waits, fewer sends
                frames.append(encode(event))
                if queue.empty():
                    break
                event = queue.get_nowait()
            if frames:
                yield "".join(frames)
            if event is None:
                break
    finally:
        if not task.done():
            task.cancel()
        # Shielded: when the client left, this generator is cancelled again and again by the server's
        # cancel scope, and awaiting the task directly would forward each cancel into the run's clean-up
        # (closing the upstream call, recording `aborted`, releasing the session) and cut it short.
        _winding_down.add(task)
        task.add_done_callback(_winding_down.discard)
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await asyncio.shield(task)
