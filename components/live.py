"""Keeping open screens current: one poller per web process reads the change feed and tells pages.

A change made in this process, in another web process or by the worker lands in the feed
(desk/work_orders/changes.py); the poller reads it every half second with one indexed query and
calls the listeners that pages subscribed, so the cost does not grow with the number of screens.
"""

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable

from nicegui import Client, background_tasks, ui
from pymongo.errors import PyMongoError

from desk.db.client import get_db
from desk.work_orders import changes

log = logging.getLogger(__name__)
INTERVAL = 0.5

Change = dict
Listener = Callable[[list[Change]], Awaitable[None] | None]
_listeners: dict[Listener, Client] = {}


def start() -> None:
    """Start the poller (called once when the web process starts)."""
    background_tasks.create(_poll(), name="live-feed")


def on_change(listener: Listener) -> None:
    """Call `listener` with each batch of changes while the current page is open."""
    client = ui.context.client
    _listeners[listener] = client
    client.on_delete(lambda: _listeners.pop(listener, None))


async def _poll() -> None:
    db = get_db()
    seq = await changes.latest(db)
    while True:
        await asyncio.sleep(INTERVAL)
        try:
            batch = await changes.since(db, seq)
        except PyMongoError as error:
            log.warning("live feed: cannot read changes (%s); retrying", type(error).__name__)
            continue
        if not batch:
            continue
        seq = batch[-1]["seq"]
        for listener, client in list(_listeners.items()):
            if client.is_deleted:  # a page left behind; its on_delete may not have run yet
                _listeners.pop(listener, None)
                continue
            try:
                result = listener(batch)
            except Exception:
                log.exception("live feed: a listener failed")
                continue
            if inspect.isawaitable(result):
                background_tasks.create(result, name="live-update")
