"""/api/v1/admin/metrics"""

from fastapi import APIRouter

from desk.http import AUTHED, CurrentActor, Db, errors
from desk.metrics import service
from desk.metrics.models import Metrics

router = APIRouter(prefix="/api/v1/admin", tags=["admin"])


@router.get("/metrics", response_model=Metrics, responses=errors(*AUTHED))
async def metrics(db: Db, actor: CurrentActor) -> Metrics:
    return await service.desk_metrics(db=db, actor=actor)
