"""Prometheus metrics at /metrics, for the addresses in DESK_METRICS_ALLOW only (docs/operations.md).

Two kinds of figures. What this process sees at its HTTP edge (`Measured`, around the API app):
requests, latency and errors per route, and the copilot's turns, time to first token and the errors
its streams end with, read from the event frames as they leave. And the desk's shared state, read
from the database when Prometheus scrapes: the outbox's depth and oldest pending age, triage
decisions today, AI spend per scope against its cap, whether the AI provider is unreachable (its breaker
is open). Each web process is its own scrape target.
"""

import ipaddress
import json
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from fastapi import APIRouter, Request, Response
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)
from pymongo.asynchronous.database import AsyncDatabase
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from desk import state
from desk.agent.core import breaker, budget
from desk.agent.triage import acceptance
from desk.agent.triage import policy as agent_policy
from desk.agent.triage import repository as triage_repo
from desk.config import Settings, get_settings
from desk.db.client import get_db
from desk.errors import Forbidden
from desk.jobs import queue as outbox_repo
from desk.logs import tag, untag
from desk.schema import now
from desk.work_orders import repository as orders_repo

PATH = "/metrics"
COPILOT_STREAM = "/api/v1/ai/sessions/{session_id}/messages"

REGISTRY = CollectorRegistry()
ProcessCollector(registry=REGISTRY)
PlatformCollector(registry=REGISTRY)
REQUESTS = Counter(
    "desk_http_requests",
    "API requests answered, by route template and status",
    ["method", "route", "status"],
    registry=REGISTRY,
)
LATENCY = Histogram(
    "desk_http_request_seconds",
    "API request time to the last byte, by route template",
    ["method", "route"],
    registry=REGISTRY,
)
TURNS = Counter("desk_copilot_turns", "Copilot messages whose answer started streaming", registry=REGISTRY)
FIRST_TOKEN = Histogram(
    "desk_copilot_first_token_seconds",
    "From the message's arrival to the first token frame sent",
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 16),
    registry=REGISTRY,
)
STREAM_ERRORS = Counter(
    "desk_copilot_stream_errors",
    "Copilot streams ended by an error event, by code (AI_UNAVAILABLE: the provider)",
    ["code"],
    registry=REGISTRY,
)
SCREENS = Gauge("desk_open_screens", "Browser tabs connected to this web process", registry=REGISTRY)
OUTBOX = Gauge(
    "desk_outbox_events", "Outbox events by status (pending: the triage's queue)", ["status"], registry=REGISTRY
)
OLDEST = Gauge("desk_outbox_oldest_pending_seconds", "Age of the oldest pending outbox event", registry=REGISTRY)
DECISIONS = Gauge(
    "desk_triage_decisions_today",
    "Triage suggestions decided today (the desk's time zone)",
    ["decision"],
    registry=REGISTRY,
)
ANSWERED = Gauge(
    "desk_triage_suggestions_answered_7d",
    "Triage suggestions of the last 7 days that a person answered: accepted, dismissed, overtaken",
    ["outcome"],
    registry=REGISTRY,
)
ACCEPTANCE = Gauge(
    "desk_triage_acceptance_ratio_7d", "Accepted of the triage suggestions people answered in 7 days", registry=REGISTRY
)
SPEND = Gauge("desk_ai_spend_usd", "AI spend today (the desk's time zone) by scope", ["scope"], registry=REGISTRY)
CAP = Gauge("desk_ai_spend_cap_usd", "The daily cap of each spend scope", ["scope"], registry=REGISTRY)
UNREACHABLE = Gauge(
    "desk_ai_provider_unreachable",
    "1 while the AI provider's breaker is open (the agents wait for it), else 0",
    registry=REGISTRY,
)


def count_open_screens(count: Callable[[], int]) -> None:
    """How to count this process's open screens: the UI knows, and desk/ never imports it (main.py sets this)."""
    SCREENS.set_function(count)


router = APIRouter(tags=["operations"])


@router.get(PATH, include_in_schema=False)
async def metrics(request: Request) -> Response:
    """The Prometheus text format; only for clients in DESK_METRICS_ALLOW."""
    settings = get_settings()
    if not allowed(request.client.host if request.client else None, settings):
        raise Forbidden("Metrics are not served to this address (DESK_METRICS_ALLOW).")
    await _read_shared_state(get_db(), settings)
    return Response(generate_latest(REGISTRY), media_type=CONTENT_TYPE_LATEST)


def allowed(host: str | None, settings: Settings) -> bool:
    """Whether `host` is inside one of the DESK_METRICS_ALLOW networks."""
    try:
        address = ipaddress.ip_address(host or "")
    except ValueError:
        return False
    networks = [ipaddress.ip_network(part.strip()) for part in settings.desk_metrics_allow.split(",") if part.strip()]
    return any(address in network for network in networks)


async def _read_shared_state(db: AsyncDatabase, settings: Settings) -> None:
    for status, count in (await outbox_repo.counts(db)).items():
        OUTBOX.labels(status).set(count)
    oldest = await outbox_repo.oldest_pending(db)
    OLDEST.set((now() - _aware(oldest)).total_seconds() if oldest else 0)
    zone = await budget.desk_zone(db)  # the ledger's days and the decisions' are the desk's (the policy's zone)
    day = budget.day_of(state.current().clock.now(), zone)
    decided: dict[str, int] = {"accepted": 0, "dismissed": 0}
    for doc in await triage_repo.decisions_since(db, day):
        decided[str(doc.get("decision"))] = decided.get(str(doc.get("decision")), 0) + 1
    for decision, count in decided.items():
        DECISIONS.labels(decision).set(count)
    await _read_acceptance(db)
    scopes = {
        f"agent:{agent_policy.AGENT}": settings.agent_daily_spend_usd,
        "agent:eval": settings.agent_daily_spend_usd,  # desk eval triage, billed on its own
        "global": settings.ai_global_daily_spend_usd,
    }
    ledger_day = budget.day_of(now(), zone)
    for scope, cap in scopes.items():
        SPEND.labels(scope).set(await budget.spent(db, f"{scope}:{ledger_day}"))
        CAP.labels(scope).set(cap)
    UNREACHABLE.set(1 if (await breaker.state(db)).unreachable else 0)


async def _read_acceptance(db: AsyncDatabase) -> None:
    async def priorities(ids: list) -> dict:
        found = await orders_repo.page(db, {"_id": {"$in": ids}}, sort="createdAt", offset=0, limit=len(ids))
        return {doc["_id"]: doc["priority"] for doc in found}

    counts = dict.fromkeys(acceptance.OUTCOMES, 0)
    for _, outcome in await acceptance.outcomes(db, now() - timedelta(days=7), priorities):
        counts[outcome] += 1
    for outcome, count in counts.items():
        ANSWERED.labels(outcome).set(count)
    answered = sum(counts.values())
    ACCEPTANCE.set(counts["accepted"] / answered if answered else 0)


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


class Measured:
    """Counts and times every API request by its route template; watches the copilot's frames as they leave."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        tagged = tag(requestId=uuid.uuid4().hex[:16])  # ties the request's log lines together
        status = 500  # an exception before the answer started
        first_token = False

        async def watch(message: Message) -> None:
            nonlocal status, first_token
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)  # first: a stream's frame is counted once written, and never waits for it
            if message["type"] == "http.response.body" and _route(scope) == COPILOT_STREAM and status == 200:
                body = message.get("body", b"")
                if not first_token and b"event: token" in body:
                    first_token = True
                    FIRST_TOKEN.observe(time.perf_counter() - started)
                for code in _error_codes(body):
                    STREAM_ERRORS.labels(code).inc()

        try:
            await self.app(scope, receive, watch)
        finally:
            untag(tagged)
            route = _route(scope)
            if route == COPILOT_STREAM and status == 200:
                TURNS.inc()
            REQUESTS.labels(scope["method"], route, str(status)).inc()
            LATENCY.labels(scope["method"], route).observe(time.perf_counter() - started)


def _route(scope: Scope) -> str:
    # FastAPI puts the matched route in the scope; a path that matched none is one label, not one per path
    route = scope.get("route")
    return getattr(route, "path", None) or "unmatched"


def _error_codes(body: bytes) -> list[str]:
    codes = []
    for frame in body.split(b"\n\n"):
        if frame.startswith(b"event: error\n"):
            data = frame.partition(b"\ndata: ")[2]
            try:
                codes.append(str(json.loads(data).get("code", "unknown")))
            except (ValueError, AttributeError):
                codes.append("unknown")
    return codes
