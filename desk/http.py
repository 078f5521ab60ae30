"""The HTTP edge shared by every router: dependencies, the error envelope, documented error responses."""

import logging
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, get_args, get_origin

from fastapi import Depends, FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from pymongo.asynchronous.database import AsyncDatabase
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from desk.actors import Actor
from desk.actors import Scope as TokenScope
from desk.auth import service as auth_service
from desk.config import get_settings
from desk.db.client import get_db
from desk.errors import (
    STATUS,
    DeskError,
    ErrorCode,
    ErrorEnvelope,
    Forbidden,
    TokenScopeRequired,
    Unauthorized,
    ValidationFailed,
)
from desk.logs import failure
from desk.middleware import HEAD_ASKED, TOO_LARGE, TooLarge, early_lookup
from desk.problems import problems

log = logging.getLogger(__name__)

API_PREFIX = "/api/"
CSRF_HEADER = "X-Desk-CSRF"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


# Every dependency is `async def`: FastAPI runs a plain `def` one in a worker thread, a thread hop
# (and a wait for the GIL) on every request (tests/test_app.py keeps it so).
async def database() -> AsyncDatabase:
    return get_db()


Db = Annotated[AsyncDatabase, Depends(database)]


def session_cookie_name() -> str:
    """`__Host-` pins the cookie to this exact origin over https; plain http cannot use the prefix."""
    return "__Host-desk_session" if get_settings().desk_public_https else "desk_session"


def set_session_cookie(response: Response, secret: str) -> None:
    """The session cookie, for the API and the pages alike: httpOnly, SameSite=Lax, Secure behind https, and
    gone from the browser when the session would have ended anyway."""
    settings = get_settings()
    response.set_cookie(
        session_cookie_name(),
        secret,
        max_age=settings.desk_session_max_hours * 3600,
        httponly=True,
        samesite="lax",
        secure=settings.desk_public_https,
        path="/",
    )


def clear_session_cookie(response: Response) -> None:
    response.delete_cookie(session_cookie_name(), path="/", secure=get_settings().desk_public_https, httponly=True)


async def require_csrf_header(request: Request) -> None:
    """A cross-site form cannot send a custom header without a CORS preflight, which the desk refuses."""
    if request.headers.get(CSRF_HEADER) != "1":
        raise Forbidden(f"Missing the {CSRF_HEADER}: 1 header on a request that changes something.")


async def current_user(request: Request, db: Db) -> dict:
    """The stored user behind the bearer token or the session cookie of this request."""
    authorization = request.headers.get("Authorization", "")
    if authorization:
        scheme, _, secret = authorization.partition(" ")
        if scheme.lower() != "bearer" or not secret.strip():
            raise Unauthorized("Use 'Authorization: Bearer <token>'.")
        secret = secret.strip()
        early = early_lookup(request.scope, secret)  # started as the request came in (TokenLookup)
        user = await (early if early is not None else auth_service.user_for_token(db=db, secret=secret))
        _require_scopes(user[auth_service.TOKEN_SCOPES], request)
    else:
        secret = request.cookies.get(session_cookie_name(), "")
        if not secret:
            raise Unauthorized("Please log in.")
        if request.method not in SAFE_METHODS:
            await require_csrf_header(request)
        user = await auth_service.user_for_session(db=db, secret=secret)
    request.state.user = user
    return user


ADMIN_API = "/api/v1/admin/"
OWN_TOKENS = "/api/v1/auth/tokens/"


def scopes_needed(method: str, path: str) -> tuple[TokenScope, ...]:
    """The scopes an API token needs for a request: `read` to look (GET), `write` for any other method (the
    copilot's questions too: they stage changes), and `admin` as well under /api/v1/admin/. A token may always
    revoke itself (the service refuses any other), so whoever finds it leaked can end it."""
    if method == "DELETE" and path.startswith(OWN_TOKENS):
        return ()
    needed: tuple[TokenScope, ...] = ("admin",) if path.startswith(ADMIN_API) else ()
    return (*needed, "read" if method in SAFE_METHODS else "write")


def _require_scopes(held: frozenset[TokenScope], request: Request) -> None:
    """One place for every route: a token without a scope the request needs is a 403 naming that scope."""
    route = request.scope.get("route")  # the route's own path: what decides, not a spelling of the address
    for scope in scopes_needed(request.method, getattr(route, "path", request.url.path)):
        if scope not in held:
            raise TokenScopeRequired(scope)


async def current_actor(request: Request, user: Annotated[dict, Depends(current_user)]) -> Actor:
    return auth_service.actor_for(user, by_token=bool(request.headers.get("Authorization")))


CurrentUser = Annotated[dict, Depends(current_user)]
CurrentActor = Annotated[Actor, Depends(current_actor)]


async def session_actor(actor: CurrentActor) -> Actor:
    """The actor of a browser session: an API token may not do this (so revoking a leaked token cuts it off)."""
    if actor.by_token:
        raise Forbidden("An API token cannot do this; use the desk in a browser (a logged-in session).")
    return actor


SessionActor = Annotated[Actor, Depends(session_actor)]


async def query_as_declared(request: Request) -> None:
    """The query names only parameters the route takes, each once unless it is a list: anything else is a 400.

    Unknown names are refused on every route alike (a list's query model refused them, an order's
    page took anything), and a value given twice is not "the last one wins".
    """
    params = request.query_params
    route = request.scope.get("route")
    if not params or route is None:
        return
    declared, repeatable = _declared_query(route)
    if unknown := sorted(set(params) - declared):
        found = [{"field": name, "message": "unknown field", "type": "extra_forbidden"} for name in unknown]
        summary = "; ".join(f"{name}: unknown field" for name in unknown[:3])
        raise ValidationFailed(f"The request is not valid: {summary}.", details={"fields": found})
    twice = sorted(key for key in set(params) if len(params.getlist(key)) > 1 and key not in repeatable)
    if twice:
        found = [{"field": name, "message": "given more than once", "type": "repeated"} for name in twice]
        raise ValidationFailed(f"Give {', '.join(twice)} once, not more.", details={"fields": found})


def _declared_query(route: Any) -> tuple[frozenset[str], frozenset[str]]:
    """`_query_names` of a route, worked out on its first request and kept on it (routes never change once
    made; FastAPI's routes cannot be dict keys, they define equality without a hash)."""
    kept = vars(route).get("desk_query")
    if kept is None:
        names, lists = _query_names(route.dependant)
        kept = route.desk_query = (frozenset(names), frozenset(lists))
    return kept


def _query_names(dependant: Any) -> tuple[set[str], set[str]]:
    """The query parameters a route takes (a query model's fields included), and those of them that are lists."""
    names: set[str] = set()
    lists: set[str] = set()
    for param in dependant.query_params:
        annotation = param.field_info.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            fields = {info.alias or name: info for name, info in annotation.model_fields.items()}
            names |= set(fields)
            lists |= {name for name, info in fields.items() if _is_list(info.annotation)}
        else:
            names.add(param.alias)
            if _is_list(annotation):
                lists.add(param.alias)
    for sub in dependant.dependencies:
        more, more_lists = _query_names(sub)
        names |= more
        lists |= more_lists
    return names, lists


def _is_list(annotation: Any) -> bool:
    return get_origin(annotation) in (list, set, tuple) or any(_is_list(arg) for arg in get_args(annotation))


def errors(*codes: ErrorCode) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses` for the envelope errors a route can answer (validation is always possible)."""
    documented: dict[int | str, dict[str, Any]] = {}
    for code in (ErrorCode.VALIDATION_ERROR, *codes):
        status = STATUS[code]
        entry = documented.setdefault(status, {"model": ErrorEnvelope, "description": ""})
        entry["description"] = ", ".join(filter(None, [entry["description"], code.value]))
    return documented


AUTHED = (ErrorCode.UNAUTHORIZED, ErrorCode.FORBIDDEN, ErrorCode.TOKEN_SCOPE_REQUIRED)


def envelope(
    code: ErrorCode, message: str, details: Any = None, headers: dict[str, str] | None = None, status: int | None = None
) -> JSONResponse:
    """The error envelope, with the code's status unless `status` says otherwise (413 for a body too large)."""
    body = {"code": code.value, "message": message}
    if details is not None:
        body["details"] = details
    return JSONResponse({"error": body}, status_code=status or STATUS[code], headers=headers)


async def _desk_error(_: Request, error: Exception) -> Response:
    assert isinstance(error, DeskError)
    return JSONResponse(error.envelope(), status_code=error.status, headers=error.headers)


NOT_JSON = "The request body is not valid JSON."
# FastAPI's own 400 when a JSON body cannot be read at all (not UTF-8, nested too deep): told as any malformed JSON
UNREADABLE_BODY = "There was an error parsing the body"


async def _validation_error(request: Request, error: Exception) -> Response:
    assert isinstance(error, RequestValidationError)
    found = problems(error.errors())
    if any(item["type"] == "json_invalid" for item in error.errors()):
        return envelope(ErrorCode.VALIDATION_ERROR, NOT_JSON, {"fields": found})
    if _sent_as_other_than_json(request) and any(item["loc"][:1] == ("body",) for item in error.errors()):
        # FastAPI reads only a body sent as JSON as JSON: any other (or one of no type) was refused as "must be a
        # JSON object", which it may well be
        wrong_type = {"field": "body", "message": "must be sent as application/json", "type": "content_type"}
        message = "Send the request body as JSON, with Content-Type: application/json."
        return envelope(ErrorCode.VALIDATION_ERROR, message, {"fields": [wrong_type]})
    summary = "; ".join(f"{p['field']}: {p['message']}" if p["field"] else p["message"] for p in found[:3])
    return envelope(ErrorCode.VALIDATION_ERROR, f"The request is not valid: {summary}.", {"fields": found})


def _sent_as_other_than_json(request: Request) -> bool:
    """The request's body is not sent as JSON (application/json or application/*+json), or names no type at all."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    return not (kind == "application/json" or (kind.startswith("application/") and kind.endswith("+json")))


_HTTP_CODES = {
    400: ErrorCode.VALIDATION_ERROR,
    401: ErrorCode.UNAUTHORIZED,
    403: ErrorCode.FORBIDDEN,
    404: ErrorCode.NOT_FOUND,
    405: ErrorCode.METHOD_NOT_ALLOWED,
    409: ErrorCode.CONFLICT,
    429: ErrorCode.RATE_LIMITED,
}

Handler = Callable[[Request, Exception], Awaitable[Response]]


def install_error_handlers(app: FastAPI) -> None:
    """Answer every error under /api/ in the envelope; other paths keep the handlers they had (NiceGUI's pages)."""
    app.add_exception_handler(DeskError, _desk_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    for key in (StarletteHTTPException, 404, 405, Exception, 500):
        app.add_exception_handler(key, _api_or(app.exception_handlers.get(key)))


def _api_or(fallback: Handler | None) -> Handler:
    async def handle(request: Request, error: Exception) -> Response:
        if await _client_left(request):  # nobody to answer, nothing to log
            return Response(status_code=499)
        if not request.url.path.startswith(API_PREFIX) and fallback is not None:
            return await fallback(request, error)
        if isinstance(error, StarletteHTTPException):
            return _http_error(request, error)
        # the type and where it is raised, never its message: a driver's message may quote a document (SEC-1)
        log.error("unhandled error on %s %s: %s", request.method, request.url.path, failure(error))
        return envelope(ErrorCode.INTERNAL, "Something went wrong on our side; it has been logged.")

    return handle


def _http_error(request: Request, error: StarletteHTTPException) -> Response:
    """Starlette's and FastAPI's own HTTP errors, in the envelope."""
    if error.status_code == 405:
        return _method_not_allowed(request)
    if error.status_code == 413:
        return envelope(
            ErrorCode.VALIDATION_ERROR, error.detail if isinstance(error, TooLarge) else TOO_LARGE, status=413
        )
    if error.status_code == 400 and error.detail == UNREADABLE_BODY:
        unreadable = {"field": "body", "message": "not valid JSON", "type": "json_invalid"}
        return envelope(ErrorCode.VALIDATION_ERROR, NOT_JSON, {"fields": [unreadable]})
    if error.status_code == 404:
        return envelope(ErrorCode.NOT_FOUND, _no_such_endpoint(request))
    return envelope(_HTTP_CODES.get(error.status_code, ErrorCode.INTERNAL), str(error.detail), headers=error.headers)


def _no_such_endpoint(request: Request) -> str:
    path = request.url.path
    if path.endswith("/") and (plain := path.rstrip("/")) and _best_match(request, path=plain) is not Match.NONE:
        return f"No such endpoint; did you mean {plain} (no slash at the end)?"
    return "No such endpoint."


def _method_not_allowed(request: Request) -> Response:
    """405 with every method the path takes in Allow (Starlette names only the first route that matched it)."""
    methods = [method for method in METHODS if _best_match(request, method=method) is Match.FULL]
    allowed = ", ".join(m for method in methods for m in ((method, "HEAD") if method == "GET" else (method,)))
    sent = "HEAD" if request.scope.get(HEAD_ASKED) else request.method
    message = f"{sent} is not a method of this endpoint; it takes {allowed}."
    return envelope(ErrorCode.METHOD_NOT_ALLOWED, message, headers={"Allow": allowed})


METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")


def _best_match(request: Request, **changes: str) -> Match:
    """How well the app's routes take this request with `changes` to its scope (another method or path)."""
    scope = {**request.scope, **changes}
    return max((route.matches(scope)[0] for route in request.app.router.routes), key=_rank, default=Match.NONE)


def _rank(match: Match) -> int:
    return match.value  # NONE 0, PARTIAL 1 (another method), FULL 2


async def _client_left(request: Request) -> bool:
    """Whether the browser left mid-request (FastAPI reports a body cut short as a 400)."""
    try:
        return await request.is_disconnected()
    except RuntimeError:  # the handler of last resort gets a Request that cannot receive (ServerErrorMiddleware)
        return False
    except TooLarge:  # this look is the first read of a body too large by its length: no route took it (404, 405)
        return False
