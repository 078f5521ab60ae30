"""/api/v1/admin/audit: the desk-wide audit log, for admins."""

from typing import Annotated

from fastapi import APIRouter, Query

from desk.audit import service
from desk.audit.models import AuditQuery, AuditRead
from desk.http import AUTHED, CurrentActor, Db, errors
from desk.schema import OffsetPage

router = APIRouter(prefix="/api/v1/admin", tags=["admin"])


@router.get("/audit", response_model=OffsetPage[AuditRead], responses=errors(*AUTHED))
async def audit(db: Db, actor: CurrentActor, query: Annotated[AuditQuery, Query()]) -> OffsetPage[AuditRead]:
    """Deleted work orders, role, activation and password-reset changes, token revocations; newest first.

    Filtered by what happened (`action`), who did it (`actorId`) and whom or which order it was done to
    (`subjectId`), each optional; together they all apply."""
    return await service.list_entries(db=db, actor=actor, query=query)
