"""The ASGI layers in front of the API's routes: a body size limit, a token looked up early, HEAD served as GET.

`desk/app.py` mounts them; `desk/http.py` reads what they leave in a request's scope (the early lookup, a HEAD
asked for) and answers their refusals in the error envelope.
"""

import asyncio
import re
from dataclasses import dataclass

from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from desk import state
from desk.auth import service as auth_service
from desk.clock import Clock
from desk.db.client import get_db

HEAD_ASKED = "desk.head"  # in the scope of a HEAD request that HeadAsGet runs as a GET


MAX_BODY_BYTES = 1024 * 1024  # nginx's `client_max_body_size 1m` (deploy/nginx.conf), for a desk served without it
TOO_LARGE = f"The request body is over {MAX_BODY_BYTES // 1024} KiB; nothing was saved."


# An upload's body: the file (DESK_MAX_ATTACHMENT_MB) and its multipart framing (boundaries, headers, the name),
# through the API or the order page's uploader (NiceGUI's upload route, which main.py puts behind this limit too).
UPLOAD_PATH = re.compile(r"^/(api/v1/work-orders/[^/]+/attachments|_nicegui/client/[^/]+/upload/[^/]+)$")
MULTIPART_SLACK = 64 * 1024


class TooLarge(StarletteHTTPException):
    """An HTTPException, so FastAPI lets it through a body read (any other error there becomes a 400)."""

    def __init__(self, message: str = TOO_LARGE) -> None:
        super().__init__(status_code=413, detail=message)


def body_limit(scope: Scope) -> tuple[int, str]:
    """The most bytes this request's body may have, and the words a refusal says."""
    if scope["method"] == "POST" and UPLOAD_PATH.match(scope["path"]):
        megabytes = state.current().settings.desk_max_attachment_mb
        return megabytes * 1024 * 1024 + MULTIPART_SLACK, f"The file is over {megabytes} MB; nothing was saved."
    return MAX_BODY_BYTES, TOO_LARGE


LOOKUP = "desk_token_lookup"
# A lookup older than this is not used: a body sent slowly must not carry a token revoked meanwhile past the check.
EARLY_FOR = 1.0


@dataclass(frozen=True)
class EarlyLookup:
    secret: str
    lookup: asyncio.Future
    clock: Clock
    started: float  # clock.monotonic()


def early_lookup(scope: Scope, secret: str) -> asyncio.Future | None:
    """The lookup TokenLookup started for this request's token, while it is recent enough to trust; else None."""
    early = scope.get("state", {}).get(LOOKUP)
    if early is None or early.secret != secret or early.clock.monotonic() - early.started >= EARLY_FOR:
        return None
    return early.lookup


class TokenLookup:
    """Start looking up the person behind a bearer token as the request comes in; `current_user` awaits it.

    The lookup is a round trip to the database (the token's aggregate). Started here, the database
    answers it while FastAPI routes the request and solves the route's other dependencies, instead
    of after them (0.15-0.2 ms off a plain GET made with a token, about a tenth, and off a copilot
    turn's first token; docs/benchmarks.md). Nothing else changes: `current_user` still decides,
    at its usual place among the route's checks, and raises what the lookup found, unless it is
    older than EARLY_FOR (a body sent slowly): then it looks again. A request answered before it
    needs its person (a 404, a 413) lets the lookup finish on its own.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            authorization = next((value for name, value in scope["headers"] if name == b"authorization"), b"")
            scheme, _, secret = authorization.decode("latin-1").partition(" ")
            if scheme.lower() == "bearer" and (secret := secret.strip()):
                lookup = asyncio.ensure_future(_look_up(secret))
                lookup.add_done_callback(_read_out)
                clock = state.current().clock  # the Desk's: a test's stands still until it is moved
                scope.setdefault("state", {})[LOOKUP] = EarlyLookup(secret, lookup, clock, clock.monotonic())
                await asyncio.sleep(0)  # the lookup's command goes out now, not when the route first waits
        await self.app(scope, receive, send)


async def _look_up(secret: str) -> dict:
    return await auth_service.user_for_token(db=get_db(), secret=secret)


def _read_out(lookup: asyncio.Future) -> None:
    """The outcome of a lookup nobody awaited is not an error for asyncio to log ("never retrieved")."""
    if not lookup.cancelled():
        lookup.exception()


class BodyLimit:
    """Refuse a request body over its limit (MAX_BODY_BYTES; an upload's, `body_limit`) with a 413 in the envelope
    before more of it is held in memory.

    By its Content-Length when the route first reads it, before a byte is held; a body sent without one as soon
    as it goes over. A route that takes no body never reads one, and answers as it would without it.
    (Starlette's own limit answers in plain text, and trips a second time when our error handler
    looks whether the client left.)
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit, refusal = body_limit(scope)
        declared = next((value for name, value in scope["headers"] if name == b"content-length"), b"")
        # Too large by its Content-Length: refused at its first read, before a byte of it is held. Not at the
        # door: routed first, so the request metrics count it under its route, not as "unmatched".
        refuse_at_once = declared.isdigit() and int(declared) > limit
        arrived = 0

        async def counted() -> Message:
            nonlocal arrived, refuse_at_once
            if refuse_at_once:
                refuse_at_once, arrived = False, limit + 1
                raise TooLarge(refusal)
            message = await receive()
            if arrived <= limit:  # refused once: a later look (has the client left?) gets its message
                arrived += len(message.get("body", b""))
                if arrived > limit:
                    raise TooLarge(refusal)
            return message

        await self.app(scope, counted, send)


class HeadAsGet:
    """HEAD answers as GET would, with its status and headers and no body (RFC 9110 §9.3.2).

    The API's routes declare GET alone, so HEAD was a 405 that a link checker or a monitor reads as a
    broken address. The route runs as GET; the headers (Content-Length included) are the GET's.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD":
            await self.app(scope, receive, send)
            return

        async def headers_only(message: Message) -> None:
            if message["type"] == "http.response.body":
                message = {**message, "body": b""}
            await send(message)

        await self.app({**scope, "method": "GET", HEAD_ASKED: True}, receive, headers_only)
