"""Keeping open screens current: one poller per web process reads the change feed and tells pages.

A change made in this process, in another web process or by the worker lands in the feed
(desk/work_orders/changes.py); the poller reads it every half second with one indexed query and
publishes each batch on the Desk's bus (topic "order"), where the pages subscribed: the cost does
not grow with the number of screens.
"""

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from nicegui import Client, background_tasks, ui
from pymongo.errors import PyMongoError

from desk import state
from desk.db.client import get_db
from desk.logs import failure
from desk.work_orders import changes

log = logging.getLogger(__name__)
INTERVAL = 0.5

Change = dict
Listener = Callable[[list[Change]], Awaitable[None] | None]
T = TypeVar("T")


def start() -> None:
    """Start the poller (called once when the web process starts)."""
    background_tasks.create(_poll(), name="live-feed")


def on_change(listener: Listener) -> None:
    """Call `listener` with each batch of changes while the current page is open."""
    client = ui.context.client

    def deliver(batch: list[Change]) -> None:
        if client.is_deleted:  # a page left behind; its on_delete may not have run yet
            unsubscribe()
            return
        with client:  # the page's own context, so that what it draws or runs knows where it goes
            result = listener(batch)
        if inspect.isawaitable(result):  # in a task of its own: one slow page never holds up the others
            background_tasks.create(_in_page(client, result), name="live-update")

    unsubscribe = state.current().bus.subscribe("order", None, deliver)
    client.on_delete(unsubscribe)


def on_bell(user_id: str, listener: Callable[[], Awaitable[None]]) -> None:
    """Call `listener` whenever this person's notifications change (in any process), while the current page is open."""
    client = ui.context.client

    def deliver(_: object) -> None:
        if client.is_deleted:
            unsubscribe()
            return
        background_tasks.create(_in_page(client, listener()), name="bell-update")

    unsubscribe = state.current().bus.subscribe("bell", user_id, deliver)
    client.on_delete(unsubscribe)


async def shared_read(change_seq: int, view: tuple[Any, ...], read: Callable[[], Awaitable[T]]) -> T:
    """Run `read`, or join the same read already in flight: screens redrawing for the same change share one.

    `view` must hold everything the answer depends on (who is looking, as far as it matters, and the
    filters), so that screens with equal views would read the same thing. Only a redraw answering a
    change may share: a read started before the change (opening a page, a new filter) may miss it.
    """
    key, in_flight = (change_seq, *view), state.current().shared_reads  # (change seq, view...) -> the read
    pending = in_flight.get(key)
    if pending is None:
        pending = asyncio.ensure_future(read())
        in_flight[key] = pending
        pending.add_done_callback(lambda _: in_flight.pop(key, None))
    return await asyncio.shield(pending)  # one screen closing must not cancel the others' read


class Redraws:
    """Redraws of one part of a page, which may overlap: one started earlier can answer last, and only the
    newest started may draw (it read after the others)."""

    def __init__(self) -> None:
        self.started = 0

    def start(self) -> Callable[[], bool]:
        """Note a redraw starting; gives whether it is still the newest (ask after the reads, before drawing)."""
        self.started += 1
        mine = self.started
        return lambda: mine == self.started


async def _poll() -> None:
    db = get_db()
    cursor = changes.Cursor(await changes.latest(db))
    while True:
        await asyncio.sleep(INTERVAL)
        try:
            batch = await cursor.read(db)
        except PyMongoError as error:
            log.warning("live feed: cannot read changes (%s); retrying", failure(error))
            continue
        if not batch:
            continue
        bus = state.current().bus
        rung = {person for change in batch if change["kind"] == changes.NOTIFIED for person in change["owners"]}
        orders = [change for change in batch if change["kind"] != changes.NOTIFIED]
        if orders:
            await bus.publish("order", None, orders)  # a failing page is logged there, never its words
        for person in rung:
            await bus.publish("bell", person)


async def _in_page(client: Client, update: Awaitable[None]) -> None:
    """Await a listener's update inside its page: a task of its own starts with no slot to draw in."""
    with client:
        await update
