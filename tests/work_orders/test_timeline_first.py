"""A screen told of a change reads the order's timeline at once: the entry must already be stored.

Open screens learn of a change from the change feed and then read the order and its timeline
(components/live.py). When the feed entry was written first, a screen could read the timeline in
between and show the order changed without the line saying so ("Priority: Medium → High"), until
the next change. The order of the writes is watched at the driver, on every path that writes both.
"""

from collections.abc import Awaitable, Callable

import pytest
from pymongo import AsyncMongoClient, monitoring
from pymongo.asynchronous.database import AsyncDatabase

from desk.actors import SYSTEM_TRIAGE
from desk.work_orders import service as work_orders
from desk.work_orders import triage as triage_door
from desk.work_orders.models import CommentCreate, WorkOrderCreate, WorkOrderUpdate
from tests.conftest import TEST_DB
from tests.helpers import actor


class Inserts(monitoring.CommandListener):
    def __init__(self) -> None:
        self.into: list[str] = []

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        if event.command_name == "insert":
            self.into.append(event.command["insert"])

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        pass

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        pass


def create(person, order_id):
    return lambda db: work_orders.create(db=db, actor=actor(person), data=WorkOrderCreate(title="Leak"))


def update(person, order_id):
    data = WorkOrderUpdate(version=1, priority="high")
    return lambda db: work_orders.update(db=db, actor=actor(person), order_id=order_id, data=data)


def triage(person, order_id):
    changes, allowed = {"priority": "urgent"}, frozenset({"priority"})
    return lambda db: triage_door.triage_patch(
        db=db, actor=SYSTEM_TRIAGE, order_id=order_id, changes=changes, allowed=allowed, run_id="run1"
    )


def delete(person, order_id):
    return lambda db: work_orders.delete(db=db, actor=actor(person), order_id=order_id, version=1)


def comment(person, order_id):
    data = CommentCreate(text="On it.")
    return lambda db: work_orders.add_comment(db=db, actor=actor(person), order_id=order_id, data=data)


@pytest.mark.parametrize("write", [create, update, triage, delete, comment])
async def test_the_timeline_entry_is_stored_before_open_screens_are_told(
    mongo_uri, make_user, make_order, write: Callable[..., Callable[[AsyncDatabase], Awaitable[object]]]
):
    sam = await make_user()
    order = await make_order(sam, "Back door will not lock")
    inserts = Inserts()
    client = AsyncMongoClient(mongo_uri, tz_aware=True, event_listeners=[inserts])
    try:
        await write(sam, order.id)(client[TEST_DB])
    finally:
        await client.close()

    assert "activity" in inserts.into and "changes" in inserts.into, inserts.into
    assert inserts.into.index("activity") < inserts.into.index("changes"), inserts.into
