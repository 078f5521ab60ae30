"""/api/v1/ai: copilot sessions, the message stream (SSE), decisions on staged writes, one's own runs."""

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Request
from fastapi.responses import Response
from fastapi.routing import APIRoute
from starlette.types import Receive, Scope, Send

from desk import state
from desk.agent.copilot import approvals, sessions
from desk.agent.copilot.start import begin
from desk.agent.core.client import provider_dependency
from desk.agent.core.events import Error, Ping, RunEvent
from desk.agent.core.models import (
    AgentRunDetail,
    AgentRunRead,
    AgentToolCallRead,
    CopilotSessionRead,
    CopilotSessionWithMessages,
    DecideIn,
    MessageIn,
)
from desk.agent.core.provider import Provider
from desk.config import get_settings
from desk.errors import ErrorCode
from desk.http import AUTHED, CurrentActor, CurrentUser, Db, current_actor, current_user, database, errors
from desk.logs import failure

log = logging.getLogger(__name__)
router = APIRouter(prefix="/api/v1/ai", tags=["ai"])
AI_ERRORS = (*AUTHED, ErrorCode.NOT_FOUND, ErrorCode.AI_APPROVAL_PENDING, ErrorCode.AI_BUDGET_EXCEEDED)
AI_ERRORS += (ErrorCode.AI_TURNED_OFF,)  # 503 while an admin has AI turned off for the whole desk
KEY_MAX = 200  # characters of an Idempotency-Key


@router.post("/sessions", status_code=201, response_model=CopilotSessionRead, responses=errors(*AI_ERRORS))
async def open_session(db: Db, actor: CurrentActor) -> CopilotSessionRead:
    """Start a new conversation (the previous one is archived)."""
    return await sessions.open_session(db=db, settings=get_settings(), actor=actor, from_api=True)


@router.get("/sessions", response_model=list[CopilotSessionWithMessages], responses=errors(*AUTHED))
async def list_sessions(db: Db, actor: CurrentActor) -> list[CopilotSessionWithMessages]:
    return await sessions.recent_sessions(db=db, actor=actor)


class StreamRoute(APIRoute):
    """The message stream's route: a request that is plainly well formed goes straight to `send_message`.

    FastAPI's own work on a request (the content type read through `email`, six dependencies solved,
    the header and the body validated) stands before the copilot's first token: about 0.2 ms of
    the 1 ms the desk may add to the stack's floor (issue 14, docs/benchmarks.md). A request with no
    query, a JSON body that `MessageIn` takes and an idempotency key within bounds passes all of
    that validation, so it only needs the route's checks, called here in the order FastAPI solves
    them (the person, their actor, the provider). Any other request goes FastAPI's way, so every
    refusal reads as on any other route; OpenAPI, the error handlers and the middleware are FastAPI's.
    """

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        framework = super().get_route_handler()

        async def handle(request: Request) -> Response:
            plain = await _plain(request)
            if plain is None:
                return await framework(request)
            body, key = plain
            db = await database()
            user = await current_user(request, db)
            actor, provider = await current_actor(request, user), await provider_dependency()
            session_id = request.path_params["session_id"]
            return await send_message(
                session_id, body, request=request, db=db, user=user, actor=actor, provider=provider, idempotency_key=key
            )

        return handle


async def _plain(request: Request) -> tuple[MessageIn, str | None] | None:
    """The message and idempotency key of a request FastAPI would validate as they are; None for any other."""
    key = request.headers.get("idempotency-key")
    if request.scope["query_string"] or request.headers.get("content-type") != "application/json":
        return None
    if key is not None and len(key) > KEY_MAX:
        return None
    try:
        return MessageIn.model_validate(json.loads(await request.body())), key  # json.loads: as FastAPI reads it
    except (ValueError, RecursionError):  # not JSON, or not a message (pydantic's ValidationError is a ValueError)
        return None


async def send_message(
    session_id: str,
    body: MessageIn,
    *,
    request: Request,
    db: Db,
    user: CurrentUser,
    actor: CurrentActor,
    provider: Annotated[Provider, Depends(provider_dependency)],
    idempotency_key: Annotated[str | None, Header(max_length=KEY_MAX)] = None,
) -> Response:
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
    return EventStream(turn.events(), keepalive=settings.ai_sse_keepalive_ms / 1000)


router.add_api_route(
    "/sessions/{session_id}/messages",
    send_message,
    methods=["POST"],
    route_class_override=StreamRoute,
    responses={
        200: {"content": {"text/event-stream": {}}, "description": "Server-sent events"},
        **errors(*AI_ERRORS, ErrorCode.AI_MESSAGE_DUPLICATE, ErrorCode.RATE_LIMITED),
    },
)


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


class EventStream(Response):
    """The run's events as SSE, each frame written as the run yields it; a `ping` after `keepalive` quiet seconds.

    The run goes on in a task of its own, which writes its frames itself: nothing stands between a
    token and the wire. (A queue did, and when the model's chunks came in a burst the first token
    waited in it until the run next waited for something, after its whole answer.) The request's own
    task meanwhile watches the client and the clock: when the client leaves, the run is cancelled and
    records `aborted`; when nothing was written for `keepalive` seconds, it writes a ping.
    """

    media_type = "text/event-stream"

    def __init__(self, events: AsyncIterator[RunEvent], *, keepalive: float) -> None:
        # not Response.__init__: a body-less response would be announced as `content-length: 0`
        self.status_code, self.background = 200, None
        self.init_headers({"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
        self.events, self.keepalive = events, keepalive
        self.written = time.monotonic()  # when the last frame went out
        self.writing = asyncio.Lock()  # the run's frames and the pings: one whole frame at a time

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
        run = asyncio.create_task(self._run(send))
        leaving = asyncio.ensure_future(_client_leaves(receive))
        try:
            while not run.done():
                quiet = time.monotonic() - self.written
                if quiet >= self.keepalive:
                    await self._write(send, encode(Ping()))
                    continue
                await asyncio.wait((run, leaving), timeout=self.keepalive - quiet, return_when=asyncio.FIRST_COMPLETED)
                if leaving.done():
                    return  # nobody to answer: `finally` stops the run
        finally:
            leaving.cancel()
            await _wind_down(run)
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _run(self, send: Send) -> None:
        try:
            async for event in self.events:
                await self._write(send, encode(event))
        except Exception as error:  # an unexpected failure still ends the stream with an error event
            log.error("copilot run failed (%s)", failure(error))  # never the message: it may quote text
            await self._write(send, encode(Error(code=ErrorCode.INTERNAL, message=FAILED)))

    async def _write(self, send: Send, frame: str) -> None:
        async with self.writing:
            await send({"type": "http.response.body", "body": frame.encode(), "more_body": True})
        self.written = time.monotonic()


FAILED = "Something went wrong on our side; it has been logged."


async def _client_leaves(receive: Receive) -> None:
    with contextlib.suppress(Exception):  # a server that cannot tell us any more: the client is as good as gone
        while (await receive())["type"] != "http.disconnect":
            pass


async def _wind_down(run: asyncio.Task) -> None:
    """Stop `run` if it still goes on, and let its clean-up finish whatever happens to the caller meanwhile.

    Shielded: when the server cancels the request (shutting down), it may do so again and again, and
    awaiting the task directly would forward each cancel into the run's clean-up (closing the upstream
    call, recording `aborted`, releasing the session) and cut it short.
    """
    if not run.done():
        run.cancel()
    held = state.current().tasks  # runs still cleaning up after their client left
    held.add(run)
    run.add_done_callback(held.discard)
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await asyncio.shield(run)
