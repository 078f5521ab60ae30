"""A screen told of a change reads the order's timeline at once: the entry must already be stored.

Open screens learn of a change from the change feed and then read the order and its timeline
(components/runtime/live.py). When the feed entry was written first, a screen could read the timeline in
between and show the order changed without the line saying so ("Priority: Medium → High"), until
the next change. Here a second client reads the timeline, as a screen would, at the very moment the
feed entry is sent, on every path that writes both.
"""

from collections.abc import Awaitable, Callable

import pytest
from bson import ObjectId
from pymongo import AsyncMongoClient, MongoClient, monitoring
from pymongo.asynchronous.database import AsyncDatabase

from desk.actors import SYSTEM_TRIAGE
from desk.work_orders import service as work_orders
from desk.work_orders import triage_door
from desk.work_orders.models import CommentCreate, WorkOrderCreate, WorkOrderUpdate
from tests.conftest import TEST_DB
from tests.helpers import actor


class TimelineWhenTold(monitoring.CommandListener):
    """When a change goes out on the feed, the actions on its order's timeline as a screen would read them."""

    def __init__(self, screen: MongoClient) -> None:
        self.screen = screen[TEST_DB]
        self.seen: list[list[str]] = []

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        if event.command_name == "insert" and event.command["insert"] == "changes":
            order_id = ObjectId(event.command["documents"][0]["workOrderId"])
            self.seen.append([entry["action"] for entry in self.screen["activity"].find({"workOrderId": order_id})])

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


@pytest.mark.parametrize(
    ("write", "action"),
    [(create, "created"), (update, "updated"), (triage, "updated"), (delete, "deleted"), (comment, "commented")],
)
async def test_a_screen_told_of_a_change_finds_its_line_on_the_timeline(
    mongo_uri, make_user, make_order, write: Callable[..., Callable[[AsyncDatabase], Awaitable[object]]], action: str
):
    sam = await make_user()
    order = await make_order(sam, "Back door will not lock")
    with MongoClient(mongo_uri, tz_aware=True) as screen:
        told = TimelineWhenTold(screen)
        client = AsyncMongoClient(mongo_uri, tz_aware=True, event_listeners=[told])
        try:
            await write(sam, order.id)(client[TEST_DB])
        finally:
            await client.close()

    (timeline,) = told.seen  # the change went out once
    assert action in timeline
