"""Copilot tools over work orders and the person's profile. They call services, as the person."""

from pydantic import Field
from pydantic_core import to_jsonable_python

from desk.agent.core.tools import MAX_ITEMS, PreImage, Tool, ToolArgs, ToolContext, ToolOutput, clip, derive
from desk.attachments import service as attachments
from desk.users import service as users_service
from desk.work_orders import service
from desk.work_orders.models import (
    EDITABLE,
    Priority,
    Status,
    WorkOrderCreate,
    WorkOrderQuery,
    WorkOrderRead,
    WorkOrderUpdate,
)

EVERYONE = frozenset({"admin", "user", "viewer"})
WRITERS = frozenset({"admin", "user"})
SHOWN = (*EDITABLE, "due_at")  # what a person sees of an order is what they may edit on it


def order_view(order: WorkOrderRead) -> dict:
    """A work order as the model sees it: no version, no requester or owner id."""
    return {
        "id": order.id,
        **{f: getattr(order, f) for f in EDITABLE},
        "dueAt": order.due_at.isoformat() if order.due_at else None,
        "createdAt": order.created_at.isoformat(),
        "updatedAt": order.updated_at.isoformat(),
    }


async def listing(ctx: ToolContext, orders: list[WorkOrderRead], total: int) -> ToolOutput:
    """The orders shown, each with its files' names and sizes: the model never reads a file's contents."""
    shown = orders[:MAX_ITEMS]
    files = await attachments.names_and_sizes(db=ctx.db, actor=ctx.actor, orders_seen=shown)
    views = [order_view(o) | ({"files": files[o.id]} if o.id in files else {}) for o in shown]
    result = {"total": total, "shown": len(shown), "workOrders": views}
    return ToolOutput(clip(result), seen={o.id: o.version for o in shown})


class ListArgs(ToolArgs):
    status: Status | None = None
    priority: Priority | None = None


class SearchArgs(ToolArgs):
    q: str = Field(min_length=1, max_length=200, description="Words that must all appear in title or description")
    status: Status | None = None


class NoArgs(ToolArgs):
    pass


async def list_mine(ctx: ToolContext, args: ListArgs) -> ToolOutput:
    query = WorkOrderQuery(status=args.status, priority=args.priority, limit=MAX_ITEMS)
    page = await service.list_orders(db=ctx.db, actor=ctx.actor, query=query, mine=True)
    return await listing(ctx, page.items, page.total)


async def search_mine(ctx: ToolContext, args: SearchArgs) -> ToolOutput:
    query = WorkOrderQuery(q=args.q, status=args.status, limit=MAX_ITEMS)
    page = await service.list_orders(db=ctx.db, actor=ctx.actor, query=query, mine=True)
    return await listing(ctx, page.items, page.total)


async def profile(ctx: ToolContext, _: NoArgs) -> ToolOutput:
    user = await users_service.get_user_or_raise(db=ctx.db, actor=ctx.actor, user_id=ctx.actor.id)
    return ToolOutput({"name": user.name, "email": user.email, "role": user.role, "aiEnabled": user.ai_enabled})


CreateArgs = derive("CreateWorkOrderArgs", WorkOrderCreate, drop={"owner_id"})
UpdateArgs = derive(
    "UpdateWorkOrderArgs", WorkOrderUpdate, drop={"owner_id", "version"}, with_id=True, clearable=frozenset({"due_at"})
)


class DeleteArgs(ToolArgs):
    id: str = Field(pattern=r"^[0-9a-f]{24}$", description="A work-order id from an earlier tool result")


async def create(ctx: ToolContext, args: ToolArgs, version: int | None = None) -> ToolOutput:
    data = WorkOrderCreate.model_validate(args.model_dump())
    order = await service.create(db=ctx.db, actor=ctx.actor, data=data, run_id=ctx.run_id)
    return ToolOutput({"created": order_view(order)}, seen={order.id: order.version})


async def update(ctx: ToolContext, args: ToolArgs, version: int) -> ToolOutput:
    fields = args.model_dump(exclude={"id"}, exclude_none=True)
    fields |= {key: None for key in args.clearable & args.model_fields_set if getattr(args, key) is None}  # emptied
    data = WorkOrderUpdate.model_validate({"version": version, **fields})
    order = await service.update(db=ctx.db, actor=ctx.actor, order_id=args.id, data=data, run_id=ctx.run_id)
    return ToolOutput({"updated": order_view(order)}, seen={order.id: order.version})


async def delete(ctx: ToolContext, args: DeleteArgs, version: int) -> ToolOutput:
    await service.delete(db=ctx.db, actor=ctx.actor, order_id=args.id, version=version, run_id=ctx.run_id)
    return ToolOutput({"deleted": args.id})


async def preimage(ctx: ToolContext, args: ToolArgs) -> PreImage | None:
    order = await service.get(db=ctx.db, actor=ctx.actor, order_id=args.id)
    if order is None:
        return None
    shown = {f: to_jsonable_python(getattr(order, f)) for f in SHOWN}  # as the frozen args hold them (JSON)
    return PreImage({f: v for f, v in shown.items() if f != "due_at" or v is not None}, order.version)  # none: unsaid


def _count(output: ToolOutput) -> str:
    return f"Looked up {output.result.get('shown', 0)} of your work orders"  # "1 of your work orders" reads right


TOOLS = [
    Tool(
        "list_my_work_orders",
        "List the person's own work orders (requested or worked on), newest first; optional status/priority filter.",
        ListArgs,
        "read",
        EVERYONE,
        "copilot",
        list_mine,
        _count,
    ),
    Tool(
        "search_my_work_orders",
        "Search the person's own work orders (requested or worked on) for words in title or description.",
        SearchArgs,
        "read",
        EVERYONE,
        "copilot",
        search_mine,
        _count,
    ),
    Tool(
        "get_profile",
        "The person's name, email, role and AI setting.",
        NoArgs,
        "read",
        EVERYONE,
        "copilot",
        profile,
        lambda _: "Looked up your profile",
    ),
    Tool(
        "create_work_order",
        "Propose a new work order requested by the person, who also works on it. The person must approve it.",
        CreateArgs,
        "write",
        WRITERS,
        "copilot",
        create,
        lambda _: "Created a work order",
    ),
    Tool(
        "update_work_order",
        "Propose changes to one of the person's work orders (id from an earlier result). The person must approve it.",
        UpdateArgs,
        "write",
        WRITERS,
        "copilot",
        update,
        lambda _: "Updated a work order",
        target=lambda a: a.id,
        preimage=preimage,
    ),
    Tool(
        "delete_work_order",
        "Propose deleting one of the person's work orders (id from an earlier result). The person must approve it.",
        DeleteArgs,
        "write",
        WRITERS,
        "copilot",
        delete,
        lambda _: "Deleted a work order",
        target=lambda a: a.id,
        preimage=preimage,
    ),
]
