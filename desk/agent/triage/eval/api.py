"""The triage's quality over HTTP, for admins: the last eval of the configured model and prompt, and its report."""

import asyncio

from fastapi import APIRouter
from fastapi.responses import HTMLResponse

from desk.agent.triage.eval import quality
from desk.agent.triage.eval.models import QualityRead
from desk.config import get_settings
from desk.errors import ErrorCode
from desk.http import AUTHED, CurrentActor, errors

router = APIRouter(tags=["agents"])
# The report's own policy (the desk's would allow its scripts): no script at all, its inline style, nothing fetched.
REPORT_CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
)


@router.get("/api/v1/admin/agents/triage/quality", response_model=QualityRead, responses=errors(*AUTHED))
async def triage_quality(actor: CurrentActor) -> QualityRead:
    """The configured model and prompt (its hash), their last eval's summary, its report and any auto-apply warning."""
    return QualityRead.of(await quality.quality(settings=get_settings(), actor=actor))


# The errors in the JSON envelope, as everywhere; the page itself as HTML (a response_class would claim both).
PAGE = {200: {"description": "The report", "content": {"text/html": {"schema": {"type": "string"}}}}}


@router.get(
    f"{quality.REPORTS}/{{name:path}}/report",
    response_model=None,
    responses={**PAGE, **errors(*AUTHED, ErrorCode.NOT_FOUND)},
)
async def eval_report(name: str, actor: CurrentActor) -> HTMLResponse:
    """An eval's report.html, as `desk eval triage` wrote it under the data directory."""
    path = quality.report(settings=get_settings(), actor=actor, name=name)
    page = await asyncio.to_thread(path.read_text, encoding="utf-8")
    return HTMLResponse(page, headers={"Content-Security-Policy": REPORT_CSP, "Cache-Control": "no-store"})
