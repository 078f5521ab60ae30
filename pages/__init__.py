"""The desk's screens; each module holds one NiceGUI router."""

from pages import login, work_order, work_orders

ROUTERS = [login.router, work_orders.router, work_order.router]
