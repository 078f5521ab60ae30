"""The triage agent over HTTP (spec §8.2 M2, DESIGN §3a): admin routes, and suggestions on a work order."""

from typing import Annotated

from fastapi import APIRouter, Depends, Query

from desk.agent.core.client import provider_dependency
from desk.agent.core.models import AgentRunDetail, AgentRunRead
from desk.agent.core.provider import Provider
from desk.agent.triage import manual, service
from desk.agent.triage.models import (
    AgentConfigRead,
    AgentConfigUpdate,
    AiSwitchRead,
    AttentionItem,
    DecideSuggestionIn,
    ManualRunIn,
    ManualRunOut,
    Requeued,
    RetryEventsIn,
    RunQuery,
    TriageOverview,
    TriageSuggestionRead,
)
from desk.agent.triage.policy import get_config, update_config
from desk.config import get_settings
from desk.errors import ErrorCode
from desk.http import AUTHED, CurrentActor, Db, errors
from desk.jobs.models import OutboxEventRead
from desk.schema import OffsetPage, PageQuery

router = APIRouter(tags=["agents"])
ADMIN = "/api/v1/admin/agents"
MISSING = (*AUTHED, ErrorCode.NOT_FOUND)
AgentProvider = Annotated[Provider, Depends(provider_dependency)]


@router.get(f"{ADMIN}/triage", response_model=TriageOverview, responses=errors(*AUTHED))
async def overview(db: Db, actor: CurrentActor) -> TriageOverview:
    """The triage policy (AgentConfig), with the queue by status, its dead letters and the acceptance rate."""
    return await service.overview(db=db, settings=get_settings(), actor=actor)


@router.patch(f"{ADMIN}/triage/config", response_model=AgentConfigRead, responses=errors(*AUTHED, ErrorCode.CONFLICT))
async def change_config(body: AgentConfigUpdate, db: Db, actor: CurrentActor) -> AgentConfigRead:
    """Change policy fields (never the provider's URL or key) at the `version` read, else 409 CONFLICT."""
    return await update_config(db=db, settings=get_settings(), actor=actor, data=body)


@router.get(f"{ADMIN}/triage/config", response_model=AgentConfigRead, responses=errors(*AUTHED))
async def config(db: Db, actor: CurrentActor) -> AgentConfigRead:
    return await get_config(db=db, settings=get_settings(), actor=actor)


@router.post(
    f"{ADMIN}/triage/run",
    response_model=ManualRunOut,
    responses=errors(
        *MISSING, ErrorCode.CONFLICT, ErrorCode.RATE_LIMITED, ErrorCode.AI_BUDGET_EXCEEDED, ErrorCode.AI_TURNED_OFF
    ),
)
async def run_now(body: ManualRunIn, db: Db, actor: CurrentActor, provider: AgentProvider) -> ManualRunOut:
    """Triage one work order now (as the triage agent, under the policy, billed like any pass); audited."""
    settings = get_settings()
    return await manual.manual_run(
        db=db, settings=settings, provider=provider, actor=actor, order_id=body.work_order_id
    )


@router.post(f"{ADMIN}/triage/events/retry", response_model=Requeued, responses=errors(*AUTHED))
async def retry_events(body: RetryEventsIn, db: Db, actor: CurrentActor) -> Requeued:
    """Put every dead-lettered event back in the queue (`{"status": "failed"}`), with fresh attempts; audited."""
    return await service.retry_failed(db=db, actor=actor)


@router.post(f"{ADMIN}/triage/events/{{event_id}}/retry", response_model=OutboxEventRead, responses=errors(*MISSING))
async def retry_event(event_id: str, db: Db, actor: CurrentActor) -> OutboxEventRead:
    """Put a dead-lettered event back in the queue."""
    return await service.retry_event(db=db, actor=actor, event_id=event_id)


@router.get(f"{ADMIN}/triage/attention", response_model=OffsetPage[AttentionItem], responses=errors(*AUTHED))
async def attention(db: Db, actor: CurrentActor, page: Annotated[PageQuery, Query()]) -> OffsetPage[AttentionItem]:
    """Flagged suggestions on open orders, newest first: what a dispatcher should look at."""
    return await service.attention(db=db, actor=actor, offset=page.offset, limit=page.limit)


@router.get(f"{ADMIN}/runs", response_model=OffsetPage[AgentRunRead], responses=errors(*AUTHED))
async def list_runs(db: Db, actor: CurrentActor, query: Annotated[RunQuery, Query()]) -> OffsetPage[AgentRunRead]:
    """Every agent's runs (copilot and triage), newest first; `since`/`until` bound when they started."""
    return await service.list_runs(db=db, actor=actor, query=query)


@router.get(f"{ADMIN}/runs/{{run_id}}", response_model=AgentRunDetail, responses=errors(*MISSING))
async def run_detail(run_id: str, db: Db, actor: CurrentActor) -> AgentRunDetail:
    """A run's messages and tool calls; the view itself is recorded in the agents' audit."""
    return await service.run_detail(db=db, actor=actor, run_id=run_id)


@router.post(f"{ADMIN}/disable", response_model=AiSwitchRead, responses=errors(*AUTHED))
async def disable(db: Db, actor: CurrentActor) -> AiSwitchRead:
    """The desk-wide kill switch: every agent stops. Triage passes in flight are cancelled within about a second
    and their events wait, pending; copilot turns end `aborted`, and new ones are refused (503 AI_TURNED_OFF).
    It moves no policy version; the triage agent's own switch is the policy's `enabled`."""
    return await service.set_ai(db=db, actor=actor, on=False)


@router.post(f"{ADMIN}/enable", response_model=AiSwitchRead, responses=errors(*AUTHED))
async def enable(db: Db, actor: CurrentActor) -> AiSwitchRead:
    """Turn AI on again for the desk (AI_ENABLED=false in the environment still holds it off)."""
    return await service.set_ai(db=db, actor=actor, on=True)


@router.get(
    "/api/v1/work-orders/{order_id}/triage", response_model=list[TriageSuggestionRead], responses=errors(*MISSING)
)
async def suggestions(order_id: str, db: Db, actor: CurrentActor) -> list[TriageSuggestionRead]:
    """The order's triage suggestions, newest first: the 20 newest (each manual run adds one)."""
    return await service.suggestions(db=db, actor=actor, order_id=order_id)


@router.post(
    "/api/v1/work-orders/{order_id}/triage/{suggestion_id}/decide",
    response_model=TriageSuggestionRead,
    responses=errors(*MISSING, ErrorCode.CONFLICT),
)
async def decide(
    order_id: str, suggestion_id: str, body: DecideSuggestionIn, db: Db, actor: CurrentActor
) -> TriageSuggestionRead:
    """Accept (the suggested priority is applied as you) or dismiss. 409 when it was already decided, when the
    order is no longer at the `version` sent, or, on accept, when someone set the priority since the triage (an
    older suggestion must not undo a person's decision: dismiss it instead)."""
    return await service.decide(
        db=db, actor=actor, order_id=order_id, suggestion_id=suggestion_id, accept=body.accept, version=body.version
    )
