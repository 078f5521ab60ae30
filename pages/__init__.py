"""The desk's screens; each module holds one NiceGUI router."""

from pages import (
    admin_agents,
    admin_audit,
    admin_metrics,
    admin_runs,
    admin_users,
    copilot,
    login,
    not_found,
    profile,
    work_order,
    work_orders,
)

ROUTERS = [
    login.router,
    work_orders.router,
    work_order.router,
    admin_users.router,
    admin_metrics.router,
    admin_agents.router,
    admin_runs.router,
    profile.router,
    copilot.router,
    admin_audit.router,
    not_found.router,  # last: it answers every /app/… address no screen above answers
]
