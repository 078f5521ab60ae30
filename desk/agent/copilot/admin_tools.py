"""Copilot read tools over the whole desk: every work order (admins, and viewers, who read every order and own
nothing, so the person's-own tools find them nothing), the people and the desk's metrics (admins)."""

from pydantic import Field

from desk.agent.copilot.tools import NoArgs, listing
from desk.agent.core.tools import MAX_ITEMS, Tool, ToolArgs, ToolContext, ToolOutput, clip
from desk.metrics import service as metrics_service
from desk.schema import PageQuery
from desk.users import service as users_service
from desk.work_orders import service
from desk.work_orders.models import Priority, Status, WorkOrderQuery

ADMINS = frozenset({"admin"})
VIEWERS = frozenset({"viewer"})  # reads only: a viewer is offered no write (COP-5), this one included


class AdminListArgs(ToolArgs):
    q: str | None = Field(None, max_length=200, description="Words that must all appear, if given")
    status: Status | None = None
    priority: Priority | None = None


async def all_orders(ctx: ToolContext, args: AdminListArgs) -> ToolOutput:
    query = WorkOrderQuery(q=args.q, status=args.status, priority=args.priority, limit=MAX_ITEMS)
    page = await service.list_orders(db=ctx.db, actor=ctx.actor, query=query)
    return await listing(ctx, page.items, page.total)


async def people(ctx: ToolContext, _: NoArgs) -> ToolOutput:
    page = await users_service.list_users(db=ctx.db, actor=ctx.actor, page=PageQuery(limit=MAX_ITEMS))
    shown = [
        {"name": u.name, "email": u.email, "role": u.role, "active": u.active, "aiEnabled": u.ai_enabled}
        for u in page.items
    ]
    return ToolOutput(clip({"total": page.total, "shown": len(shown), "users": shown}))


async def metrics(ctx: ToolContext, _: NoArgs) -> ToolOutput:
    found = await metrics_service.desk_metrics(db=ctx.db, actor=ctx.actor)
    # Overdue orders as one number: by owner they are keyed by ids, which the model is never shown (order_view).
    shown = found.model_dump(mode="json", by_alias=True, exclude={"overdue_by_owner"})
    return ToolOutput(shown | {"overdue": sum(found.overdue_by_owner.values())})


TOOLS = [
    Tool(
        "list_work_orders",
        "List or search every work order on the desk (the person reads them all and changes none).",
        AdminListArgs,
        "read",
        VIEWERS,
        "copilot",
        all_orders,
        lambda o: f"Looked up {_many(o.result['shown'], 'work order', 'work orders')} on the desk",
    ),
    Tool(
        "admin_list_work_orders",
        "Admins: list or search every work order on the desk.",
        AdminListArgs,
        "read",
        ADMINS,
        "copilot",
        all_orders,
        lambda o: f"Looked up {_many(o.result['shown'], 'work order', 'work orders')} on the desk",
    ),
    Tool(
        "admin_list_users",
        "Admins: the people of the desk.",
        NoArgs,
        "read",
        ADMINS,
        "copilot",
        people,
        lambda o: f"Looked up {_many(o.result['shown'], 'person', 'people')}",
    ),
    Tool(
        "admin_metrics",
        "Admins: counts by status and priority, opened/closed per day, mean time to done, open orders overdue now.",
        NoArgs,
        "read",
        ADMINS,
        "copilot",
        metrics,
        lambda _: "Looked up the desk's metrics",
    ),
]


def _many(count: int, one: str, more: str) -> str:
    return f"{count} {one if count == 1 else more}"
