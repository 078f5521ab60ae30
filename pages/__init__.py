"""The desk's screens; each module holds one NiceGUI router (not_found: the root page main.py gives ui.run)."""

from pages import (
    admin_agents,
    admin_audit,
    admin_metrics,
    admin_runs,
    admin_settings,
    admin_users,
    copilot,
    login,
    notifications,
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
    notifications.router,
    admin_settings.router,
]
