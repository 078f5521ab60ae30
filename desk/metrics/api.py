"""/api/v1/admin/metrics"""

from typing import Annotated

from fastapi import APIRouter, Query

from desk.http import AUTHED, CurrentActor, Db, errors
from desk.metrics import service
from desk.metrics.models import Metrics, MetricsQuery

router = APIRouter(prefix="/api/v1/admin", tags=["admin"])


@router.get("/metrics", response_model=Metrics, responses=errors(*AUTHED))
async def metrics(db: Db, actor: CurrentActor, query: Annotated[MetricsQuery, Query()]) -> Metrics:
    """The desk's figures; `ownerId`: one person's orders; `since`/`until` (UTC days): the per-day chart's range.

    The chart shows at most 366 days: of a longer range, its last 366 (`perDay` starts at the first day shown).
    """
    return await service.desk_metrics(db=db, actor=actor, query=query)
