"""Building the desk: the API on a FastAPI app, start-up (database, indexes, first admin)."""

import logging
import secrets
from dataclasses import dataclass

from fastapi import APIRouter, Depends, FastAPI
from fastapi.middleware.gzip import GZipMiddleware
from fastapi.responses import JSONResponse
from pymongo.asynchronous.database import AsyncDatabase
from starlette.types import ASGIApp, Receive, Scope, Send

from desk import observability
from desk.agent.copilot import hooks as agent_hooks
from desk.agent.copilot.api import router as ai_router
from desk.agent.core import budget
from desk.agent.core import store as agent_store
from desk.agent.triage import policy as agent_policy
from desk.agent.triage import repository as triage_repo
from desk.agent.triage.api import router as triage_router
from desk.agent.triage.eval.api import router as eval_router
from desk.api_docs import install_docs
from desk.attachments import repository as attachments_repo
from desk.attachments.api import orders_router as order_files_router
from desk.attachments.api import router as attachments_router
from desk.audit import repository as audit_repo
from desk.audit.api import router as audit_router
from desk.auth import passwords
from desk.auth import repository as auth_repo
from desk.auth.api import router as auth_router
from desk.config import Settings
from desk.db.client import get_db, ping
from desk.errors import Conflict, DeskError
from desk.http import install_error_handlers, query_as_declared
from desk.jobs import queue as outbox_repo
from desk.metrics.api import router as metrics_router
from desk.middleware import BodyLimit, HeadAsGet, TokenLookup
from desk.notifications import mail_queue
from desk.notifications import repository as notifications_repo
from desk.notifications.api import router as notifications_router
from desk.state import Desk
from desk.users import repository as users_repo
from desk.users import service as users_service
from desk.users.api import people_router
from desk.users.api import router as users_router
from desk.users.models import UserCreate
from desk.work_orders import startup as work_orders_startup
from desk.work_orders.api import router as work_orders_router

log = logging.getLogger(__name__)
health = APIRouter(tags=["health"])
UNAVAILABLE = {"status": "unavailable"}


@health.get("/healthz")
async def healthz() -> dict[str, str]:
    """The process is up."""
    return {"status": "ok"}


@health.get(
    "/readyz",
    responses={
        200: {"description": "Ready", "content": {"application/json": {"example": {"status": "ready"}}}},
        503: {"description": "The database does not answer", "content": {"application/json": {"example": UNAVAILABLE}}},
    },
)
async def readyz() -> JSONResponse:
    """Whether the database answers (a load balancer sends traffic only while it does)."""
    ready = await ping(get_db())
    return JSONResponse({"status": "ready"} if ready else UNAVAILABLE, status_code=200 if ready else 503)


def wire(desk: Desk) -> None:
    """Subscribe the listeners that cross layers on the Desk's bus: a service tells, the agent acts.

    A person who loses access (logout, deactivation, AI off...) has their copilot runs stopped.
    Called once where the process's Desk is built (main.py; the tests' `settings` fixture).
    """
    agent_hooks.install(desk.bus)


def install_api(app: FastAPI) -> None:
    """Mount every router and the error envelope on `app` (the API's own app, in front of NiceGUI's; main.py).

    The routes read the time their limits count in from `clock` (a test's stands still until it is moved).
    """
    # FastAPI tries the routers in this order, every route of each, on every request: the copilot's
    # stream first (its first token waits on it: sixth, it took 0.2 ms to find), then the work orders.
    # The docs keep their own order (api_docs.SECTIONS).
    routers = (ai_router, work_orders_router, health, auth_router, users_router, metrics_router, triage_router)
    routers += (audit_router, people_router, notifications_router, eval_router, order_files_router, attachments_router)
    for router in (*routers, observability.router):
        # a probe's query is ignored: a load balancer may add a cache-buster, and a probe must not fail for it
        app.include_router(router, dependencies=[] if router is health else [Depends(query_as_declared)])
    app.router.redirect_slashes = False  # Starlette's bare 307 went to http:// whatever the scheme; a 404 says why
    install_error_handlers(app)
    app.add_middleware(BodyLimit)
    app.add_middleware(CompressedButTheCopilot)
    app.add_middleware(TokenLookup)  # early: the sooner the token's lookup starts, the more of it is hidden
    app.add_middleware(observability.Measured)  # it times everything, and tags the lookup's log lines
    app.add_middleware(HeadAsGet)  # outermost: HEAD is a GET to every layer (gzip's Content-Length is the GET's)
    install_docs(app)


# the copilot's stream (spec §4.8: proxies hold compressed streams back), and files (sent with their length,
# mostly compressed already)
UNCOMPRESSED = (f"{ai_router.prefix}/", f"{attachments_router.prefix}/")


class CompressedButTheCopilot:
    """gzip for API answers, except under /api/v1/ai/ and /api/v1/attachments/ (UNCOMPRESSED)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app, self.gzip = app, GZipMiddleware(app)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not scope["path"].startswith(UNCOMPRESSED):
            await self.gzip(scope, receive, send)
        else:
            await self.app(scope, receive, send)


async def ensure_indexes(db: AsyncDatabase) -> None:
    """Create every index the desk needs; safe to run at every start."""
    stores = (users_repo, auth_repo, work_orders_startup, agent_store, budget, outbox_repo, agent_policy, triage_repo)
    stores += (audit_repo, notifications_repo, mail_queue, attachments_repo)
    for repository in stores:
        await repository.ensure_indexes(db)


@dataclass(frozen=True)
class FirstAdmin:
    email: str
    password: str | None  # set only when the desk made the password up and must show it once


async def ensure_first_admin(db: AsyncDatabase, settings: Settings) -> FirstAdmin | None:
    """With no users yet, create the first admin from DESK_ADMIN_* or with a one-time password."""
    if await users_repo.count(db):
        return None
    email = settings.desk_admin_email or "admin@desk.local"
    given = settings.desk_admin_password.get_secret_value() if settings.desk_admin_password else None
    password = given or secrets.token_urlsafe(12)
    try:
        passwords.check_policy(password)
        await users_service.register(db=db, data=UserCreate(email=email, name="Admin", role="admin", password=password))
    except Conflict:
        return None  # another desk process starting beside this one made the first admin: the unique index decided
    except DeskError as error:
        raise SystemExit(f"config error: DESK_ADMIN_PASSWORD: {error.message}") from None
    return FirstAdmin(email=email, password=None if given else password)
