"""/api/v1/work-orders: thin routes over the work-order service."""

from typing import Annotated

from fastapi import APIRouter, Query, Response, status

from desk.errors import ErrorCode
from desk.http import AUTHED, CurrentActor, Db, errors
from desk.schema import OffsetPage
from desk.work_orders import service
from desk.work_orders.models import (
    ActivityRead,
    CommentCreate,
    CommentRead,
    TimelineQuery,
    Version,
    WorkOrderCreate,
    WorkOrderQuery,
    WorkOrderRead,
    WorkOrderUpdate,
)

router = APIRouter(prefix="/api/v1/work-orders", tags=["work orders"])
MISSING = (*AUTHED, ErrorCode.NOT_FOUND)
WRITE = ErrorCode.RATE_LIMITED  # a person's writes are limited per minute (desk/auth/write_limit.py)


@router.get("", response_model=OffsetPage[WorkOrderRead], responses=errors(*AUTHED))
async def list_orders(
    db: Db, actor: CurrentActor, query: Annotated[WorkOrderQuery, Query()]
) -> OffsetPage[WorkOrderRead]:
    """The work orders you may see (yours, those you asked for and the queue; admins and viewers: all), filtered
    (`ownerId=none`: the unassigned queue; `requesterId`: who asked, yourself unless you see all; `due`: open
    orders `overdue`, due `today` or in the `week` from today, days in the desk's time zone), searched (`q`) and
    sorted (`sort=dueAt`: due soonest first, orders due by no day last)."""
    return await service.list_orders(db=db, actor=actor, query=query)


CREATED = {201: {"headers": {"Location": {"description": "The new work order's URL", "schema": {"type": "string"}}}}}


@router.post(
    "",
    status_code=201,
    response_model=WorkOrderRead,
    responses=CREATED | errors(*AUTHED, ErrorCode.NOT_FOUND, ErrorCode.CONFLICT, WRITE),
)
async def create(body: WorkOrderCreate, db: Db, actor: CurrentActor, response: Response) -> WorkOrderRead:
    created = await service.create(db=db, actor=actor, data=body)
    response.headers["Location"] = f"{router.prefix}/{created.id}"  # where it is read (GET), changed and deleted
    return created


@router.get("/{order_id}", response_model=WorkOrderRead, responses=errors(*MISSING))
async def get(order_id: str, db: Db, actor: CurrentActor) -> WorkOrderRead:
    return await service.get_or_raise(db=db, actor=actor, order_id=order_id)


@router.patch("/{order_id}", response_model=WorkOrderRead, responses=errors(*MISSING, ErrorCode.CONFLICT, WRITE))
async def update(order_id: str, body: WorkOrderUpdate, db: Db, actor: CurrentActor) -> WorkOrderRead:
    """Change fields (leave out what stays; null and nothing to change are 400); `version` must be the
    one you read, else 409 CONFLICT with the current order. `{version, ownerId: <your id>}` takes an order
    from the queue; such a take changes nothing else unless you asked for the order (or are an admin)."""
    return await service.update(db=db, actor=actor, order_id=order_id, data=body)


@router.delete(
    "/{order_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    response_class=Response,
    responses=errors(*MISSING, ErrorCode.CONFLICT, WRITE),
)
async def delete(order_id: str, version: Annotated[Version, Query()], db: Db, actor: CurrentActor) -> None:
    await service.delete(db=db, actor=actor, order_id=order_id, version=version)


@router.get("/{order_id}/activity", response_model=list[ActivityRead], responses=errors(*MISSING))
async def activity(
    order_id: str, db: Db, actor: CurrentActor, page: Annotated[TimelineQuery, Query()]
) -> list[ActivityRead]:
    """The timeline: who changed what, and when; newest first, `limit` entries (200 unless asked) from `offset`.
    Page back by raising `offset` until fewer than `limit` come back."""
    return await service.activity(db=db, actor=actor, order_id=order_id, offset=page.offset, limit=page.limit)


@router.get("/{order_id}/comments", response_model=list[CommentRead], responses=errors(*MISSING))
async def comments(
    order_id: str, db: Db, actor: CurrentActor, page: Annotated[TimelineQuery, Query()]
) -> list[CommentRead]:
    """The comments on the order's timeline (plain text), paged as the timeline is."""
    return await service.comments(db=db, actor=actor, order_id=order_id, offset=page.offset, limit=page.limit)


@router.post("/{order_id}/comments", status_code=201, response_model=CommentRead, responses=errors(*MISSING, WRITE))
async def add_comment(order_id: str, body: CommentCreate, db: Db, actor: CurrentActor) -> CommentRead:
    """Add a comment (up to 2,000 characters of plain text): anyone who can see the order, viewers too."""
    return await service.add_comment(db=db, actor=actor, order_id=order_id, data=body)
