"""The triage agent's admin and owner surface (AGT-8): the overview, transcripts, suggestions, attention, the
switch, the worker's health (a manual run is manual.py's)."""

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from functools import partial
from typing import Any
from zoneinfo import ZoneInfo

from bson import ObjectId
from pymongo.asynchronous.database import AsyncDatabase

from desk import state
from desk.access import allows_ai, require_admin
from desk.actors import Actor
from desk.agent.core import breaker, budget, switch
from desk.agent.core.models import AgentRunDetail, AgentRunRead, AgentToolCallRead, RunMessage
from desk.agent.core.store import agent_messages, agent_runs, agent_tool_calls
from desk.agent.triage import policy
from desk.agent.triage import repository as repo
from desk.agent.triage.models import (
    AcceptanceDay,
    AiSwitchRead,
    AttentionItem,
    ProviderStatus,
    Requeued,
    RunQuery,
    TriageOverview,
    TriageSuggestionRead,
    overtaken,
)
from desk.config import Settings
from desk.errors import Conflict, Forbidden, NotFound
from desk.jobs import queue as outbox
from desk.jobs.models import OutboxEventRead
from desk.schema import OffsetPage, by_id, now, parse_object_id
from desk.users import service as users_service
from desk.work_orders import outbox as order_jobs
from desk.work_orders import permissions
from desk.work_orders import service as work_orders
from desk.work_orders.models import CLOSED, WorkOrderUpdate

ATTENTION_SCAN = 1000  # flagged, undecided suggestions looked at for one attention page
COUNT_CAP = 10_000


async def overview(*, db: AsyncDatabase, settings: Settings, actor: Actor) -> TriageOverview:
    """The policy, whether AI is on at all (the environment, the admins' switch), the queue by status, the dead
    letters and the acceptance rate."""
    config = await policy.get_config(db=db, settings=settings, actor=actor)
    failed, _ = await outbox.page(db, status="failed", offset=0, limit=20)
    return TriageOverview(
        **config.model_dump(),
        ai_enabled=settings.ai_enabled,
        ai_switch=_read(await switch.read(db)),
        events=await outbox.counts(db),
        failed=[OutboxEventRead.model_validate(doc) for doc in failed],
        acceptance=await _acceptance(db),
        provider=await provider_status(db),
    )


async def provider_status(db: AsyncDatabase) -> ProviderStatus:
    """The provider's breaker as every worker shares it: ok, or unreachable since when and why."""
    found = await breaker.state(db)
    state = "unreachable" if found.unreachable else "ok"
    return ProviderStatus(state=state, since=found.since, last_error=found.last_error)


async def retry_event(*, db: AsyncDatabase, actor: Actor, event_id: str) -> OutboxEventRead:
    """A dead-lettered event back in the queue with fresh attempts (audited)."""
    require_admin(actor, "see or run the agents")
    event = await by_id(event_id, partial(outbox.requeue, db))
    if event is None:
        raise NotFound("No such failed event.")
    await policy.record(db, agent=policy.AGENT, actor_id=actor.id, action="event_retried", after={"eventId": event_id})
    return OutboxEventRead.model_validate(event)


async def retry_failed(*, db: AsyncDatabase, actor: Actor) -> Requeued:
    """Every dead-lettered event back in the queue with fresh attempts (audited, with how many): the triage's and
    the notifications' emails alike, as the agents page lists them together."""
    require_admin(actor, "see or run the agents")
    count = await outbox.requeue_failed(db)
    await policy.record(db, agent=policy.AGENT, actor_id=actor.id, action="events_retried", after={"requeued": count})
    return Requeued(requeued=count)


async def list_runs(
    *, db: AsyncDatabase, actor: Actor, query: RunQuery, person_id: str | None = None
) -> OffsetPage[AgentRunRead]:
    """Every agent's runs (copilot and triage), newest first, filtered (`person_id`: the copilot runs of one person)."""
    require_admin(actor, "see or run the agents")
    found: dict[str, Any] = {}
    if person_id:
        found["userId"] = parse_object_id(person_id)
    if query.agent:
        found["agentName"] = query.agent
    if query.status:
        found["status"] = query.status
    if query.since or query.until:
        found["startedAt"] = {
            **({"$gte": query.since} if query.since else {}),
            **({"$lt": query.until} if query.until else {}),
        }
    offset, limit = query.offset, query.limit
    docs, total = await agent_runs.page(db, found, offset=offset, limit=limit, count_cap=COUNT_CAP)
    items = [AgentRunRead.model_validate(doc) for doc in docs]
    return OffsetPage[AgentRunRead](items=items, total=total, offset=offset, limit=limit, total_exact=total < COUNT_CAP)


async def run_detail(*, db: AsyncDatabase, actor: Actor, run_id: str) -> AgentRunDetail:
    """A run's transcript; looking at it is itself recorded: who looked at which run, and when (SEC-11)."""
    require_admin(actor, "see or run the agents")
    oid = parse_object_id(run_id)
    run = await agent_runs.get_run(db, oid) if oid else None
    if run is None:
        raise NotFound("No such run.")
    await policy.record(
        db, agent=run.get("agentName") or "copilot", actor_id=actor.id, action="run_viewed", after={"runId": run_id}
    )
    messages = [RunMessage.model_validate(m) for m in await agent_messages.run_messages(db, oid)]
    calls = [AgentToolCallRead.model_validate(c) for c in await agent_tool_calls.run_tool_calls(db, oid)]
    return AgentRunDetail(run=AgentRunRead.model_validate(run), messages=messages, tool_calls=calls)


async def ai_switch(*, db: AsyncDatabase, actor: Actor) -> AiSwitchRead:
    """The desk-wide AI switch as stored now: on or off, who flipped it last and when."""
    require_admin(actor, "see or change the agents' settings")
    return _read(await switch.read(db))


async def set_ai(*, db: AsyncDatabase, actor: Actor, on: bool) -> AiSwitchRead:
    """The desk-wide kill switch (AGT-9, issue 41): off stops every agent; pressed again, it changes nothing.

    Off takes every claimed triage event back to the queue at once (its attempt not counted, its fence moved),
    so a pass in flight can store and apply nothing (its lease check before each write fails); its worker
    cancels the model call within `switch.WATCH_SECONDS`. The copilot's turns in this process stop at once
    (the switch tells the bus), those of other processes within their watcher's second. Audited when it flips.
    """
    require_admin(actor, "see or change the agents' settings")
    after, flipped = await switch.turn(db, on=on, actor_id=actor.id)
    if flipped:
        if not on:
            await outbox.put_back_all(db, order_jobs.CREATED)
        action = "ai_turned_on" if on else "ai_turned_off"
        await policy.record(db, agent="all", actor_id=actor.id, action=action, before={"on": not on}, after={"on": on})
    return _read(after)


def _read(state: switch.Switch) -> AiSwitchRead:
    return AiSwitchRead(enabled=state.on, changed_by=state.changed_by, changed_at=state.changed_at)


async def suggestions(*, db: AsyncDatabase, actor: Actor, order_id: str) -> list[TriageSuggestionRead]:
    """An order's 20 newest suggestions, newest first, for whoever may read the order; none for a person who turned
    AI off and asked for or works on it (none are made for them; older ones are not shown either)."""
    order = await work_orders.get_or_raise(db=db, actor=actor, order_id=order_id)
    if actor.id in (order.requester_id, order.owner_id):
        person = await users_service.get_user(db=db, actor=actor, user_id=actor.id)
        if person is not None and not allows_ai(person):
            return []
    return [TriageSuggestionRead.model_validate(doc) for doc in await repo.for_order(db, ObjectId(order.id))]


async def decide(
    *, db: AsyncDatabase, actor: Actor, order_id: str, suggestion_id: str, accept: bool, version: int | None = None
) -> TriageSuggestionRead:
    """Accept (the priority applied as this person, at `version` when given (the one they saw), else the order's
    current one) or dismiss; recorded as feedback."""
    order = await work_orders.get_or_raise(db=db, actor=actor, order_id=order_id)
    if not permissions.can_change(actor, order):  # the team model: whoever may change the order's priority
        raise Forbidden("Only someone who may change this work order can decide on its suggestions.")
    oid = parse_object_id(suggestion_id)
    suggestion = await repo.get(db, oid) if oid else None
    if suggestion is None or str(suggestion["workOrderId"]) != order.id:
        raise NotFound("No such suggestion.")
    if accept and order.status in CLOSED:
        raise Conflict(f"This work order is {order.status}: reopen it to accept a suggestion, or dismiss it.")
    if accept and overtaken(TriageSuggestionRead.model_validate(suggestion), order):
        raise Conflict(
            f"Since this suggestion, the priority was set to {order.priority}: dismiss it, or change the priority"
            " on the work order.",
            details={"current": order.model_dump(mode="json", by_alias=True)},
        )
    moment = state.current().clock.now()
    decision = {
        "decision": "accepted" if accept else "dismissed",
        "decidedBy": actor.id,
        "decidedAt": moment,
        "decidedDay": budget.day_of(moment, await budget.desk_zone(db)),  # the desk's day, as the ledger's
    }
    decided = await repo.mark(db, oid, decision, only_if={"decision": None})
    if decided is None:
        raise Conflict("This suggestion was already decided.")
    if accept:
        change = WorkOrderUpdate(version=version or order.version, priority=decided["suggestedPriority"])
        try:
            await work_orders.update(db=db, actor=actor, order_id=order.id, data=change)
        except Exception:  # the order moved on (409) or the person lost the right: the suggestion stays open
            undo = {"decision": None, "decidedBy": None, "decidedAt": None, "decidedDay": None}
            await repo.mark(db, oid, undo)
            raise
    return TriageSuggestionRead.model_validate(decided)


async def attention(*, db: AsyncDatabase, actor: Actor, offset: int, limit: int) -> OffsetPage[AttentionItem]:
    """The dispatcher's attention list: the newest flagged, undecided suggestion of each order still open."""
    require_admin(actor, "see or run the agents")
    flagged = await repo.flagged_page(db, offset=0, limit=ATTENTION_SCAN)
    newest: dict[ObjectId, dict] = {}
    for doc in flagged:
        newest.setdefault(doc["workOrderId"], doc)
    orders = await work_orders.by_ids(db=db, actor=actor, order_ids=list(newest))
    items = [
        AttentionItem(suggestion=TriageSuggestionRead.model_validate(doc), order=orders[oid])
        for oid, doc in newest.items()
        if oid in orders and orders[oid].status not in CLOSED
    ]
    page = items[offset : offset + limit]
    exact = len(flagged) < ATTENTION_SCAN
    return OffsetPage[AttentionItem](items=page, total=len(items), offset=offset, limit=limit, total_exact=exact)


@dataclass(frozen=True)
class Spend:
    """Today's spend of one ledger scope against its daily cap."""

    scope: str
    spent_usd: float
    cap_usd: float


@dataclass(frozen=True)
class Health:
    """The worker as an admin sees it: the queue, its oldest waiting event, a page of dead letters (of
    `failed_total`), the last pass, spend, and whether the provider is reachable."""

    events: dict[str, int]
    oldest_pending_at: datetime | None
    failed: list[OutboxEventRead]
    last_pass: AgentRunRead | None
    spend: list[Spend]
    failed_total: int
    provider: ProviderStatus


@dataclass(frozen=True)
class RunExtra:
    cost_usd: float
    work_order_id: str | None
    work_order_title: str | None  # None: no order, or it was deleted since


@dataclass(frozen=True)
class TriageDay:
    """One day of triage, in the desk's time zone: suggestions made, decisions, and spend per ledger scope."""

    day: date
    suggested: int
    accepted: int
    dismissed: int
    spend: dict[str, float]


async def health(
    *, db: AsyncDatabase, settings: Settings, actor: Actor, failed_offset: int = 0, failed_limit: int = 20
) -> Health:
    """Queue depth by status, the age of what waits longest, a page of dead letters, the last triage run, today's
    spend, the provider's state."""
    require_admin(actor, "see or run the agents")
    failed, failed_total = await outbox.page(db, status="failed", offset=failed_offset, limit=failed_limit)
    oldest = await outbox.oldest_pending(db)
    last = await agent_runs.last_of(db, policy.AGENT)
    day = budget.day_of(now(), policy.zone(await policy.current(db, settings)))  # the ledger's day: the policy's zone
    scopes = (
        ("Triage agent", f"agent:{policy.AGENT}:{day}", settings.agent_daily_spend_usd),
        ("Whole desk", f"global:{day}", settings.ai_global_daily_spend_usd),
    )
    return Health(
        events=await outbox.counts(db),
        oldest_pending_at=oldest,
        failed=[OutboxEventRead.model_validate(doc) for doc in failed],
        last_pass=AgentRunRead.model_validate(last) if last else None,
        spend=[Spend(scope=name, spent_usd=await budget.spent(db, key), cap_usd=cap) for name, key, cap in scopes],
        failed_total=failed_total,
        provider=await provider_status(db),
    )


async def run_extras(*, db: AsyncDatabase, actor: Actor, run_ids: list[str]) -> dict[str, RunExtra]:
    """What the run read model leaves out, by run id: its cost in USD and the work order a triage run was about."""
    require_admin(actor, "see or run the agents")
    oids = [oid for oid in map(parse_object_id, run_ids) if oid]
    docs = await agent_runs.costs(db, oids)
    about = [oid for oid in (parse_object_id(str(doc.get("workOrderId"))) for doc in docs) if oid]
    orders = await work_orders.by_ids(db=db, actor=actor, order_ids=about) if about else {}  # copilot runs: none
    titles = {str(oid): order.title for oid, order in orders.items()}
    return {
        str(doc["_id"]): RunExtra(
            cost_usd=float(doc.get("costUsd", 0.0)),
            work_order_id=str(doc["workOrderId"]) if doc.get("workOrderId") else None,
            work_order_title=titles.get(str(doc.get("workOrderId"))),
        )
        for doc in docs
    }


async def per_day(*, db: AsyncDatabase, actor: Actor, days: int = 30) -> list[TriageDay]:
    """The last `days` days of the desk's time zone (the policy's, which the spend ledger counts in too):
    suggestions made, accepted and dismissed, spend per scope (agent:<name>, global).

    Counted here from a bounded find, not a date aggregation, which the embedded engine gets wrong (DESIGN §4).
    """
    require_admin(actor, "see or run the agents")
    zone = ZoneInfo(await budget.desk_zone(db))
    today = state.current().clock.now().astimezone(zone).date()
    first = today - timedelta(days=days - 1)
    made: dict[date, int] = {}
    start = datetime.combine(first, datetime.min.time(), tzinfo=zone)  # the zone's midnight
    for created in await repo.created_since(db, start):
        day = created.replace(tzinfo=created.tzinfo or UTC).astimezone(zone).date()
        made[day] = made.get(day, 0) + 1
    decided = {a.day: a for a in await _acceptance(db, days=days, today=today)}
    spend = await budget.spent_by_day(db, first.isoformat())
    result = []
    for back in range(days - 1, -1, -1):
        day = today - timedelta(days=back)
        counted = decided.get(day.isoformat())
        accepted, dismissed = (counted.accepted, counted.dismissed) if counted else (0, 0)
        result.append(TriageDay(day, made.get(day, 0), accepted, dismissed, spend.get(day.isoformat(), {})))
    return result


async def _acceptance(db: AsyncDatabase, days: int = 14, *, today: date | None = None) -> list[AcceptanceDay]:
    """Decisions per day (`decidedDay`: the desk's day when decided; a UTC day for those from before issue 41)."""
    if today is None:
        today = state.current().clock.now().astimezone(ZoneInfo(await budget.desk_zone(db))).date()
    since = (today - timedelta(days=days)).isoformat()
    counted: dict[str, list[int]] = {}
    for doc in await repo.decisions_since(db, since):
        day = counted.setdefault(doc["decidedDay"], [0, 0])
        day[0 if doc["decision"] == "accepted" else 1] += 1
    return [AcceptanceDay(day=day, accepted=a, dismissed=d) for day, (a, d) in sorted(counted.items())]


async def waiting_line(*, db: AsyncDatabase, settings: Settings, actor: Actor) -> str | None:
    """Why triage waits, if the policy is outside its working hours now ("Outside working hours: waiting until
    08:00 Europe/Berlin"); None inside them."""
    require_admin(actor, "see or run the agents")
    return hours_line(await policy.current(db, settings), now())


def hours_line(config: dict, moment: datetime) -> str | None:
    """The line for `config` at `moment`: when its hours next begin, in its own time zone, as a person reads it."""
    if policy.in_working_hours(config, moment):
        return None
    zone = config.get("timeZone") or "UTC"
    opens = policy.opens_at(config, moment)
    if opens is None:
        return "Outside working hours: none in the coming year."
    local, today = opens.astimezone(ZoneInfo(zone)), moment.astimezone(ZoneInfo(zone)).date()
    if local.date() == today:
        day = ""
    elif local.date() - today < timedelta(days=7):
        day = f"{local:%a} "  # the coming week's day by its name
    else:
        day = f"{local:%a} {local.date().isoformat()} "
    return f"Outside working hours: waiting until {day}{local:%H:%M} {zone}"
