"""`triage_patch` losing a race (AGT-7): someone saves between its read and its write.

The race is real: a person's update through the service, written to the database right after
`triage_patch` has read the order (the repository's `get` is wrapped to let it in at that point,
and only there). One lost race: it reads again and its change lands beside the person's. Two: the
change is logged and dropped, nothing of it written, no error for the pass.
"""

import logging

import pytest
from bson import ObjectId

from desk.actors import SYSTEM_TRIAGE
from desk.work_orders import repository as repo
from desk.work_orders import service as work_orders
from desk.work_orders import triage_door
from desk.work_orders.models import WorkOrderUpdate
from tests.helpers import actor


@pytest.fixture
def racing(monkeypatch, db):
    """`racing(owner, titles)`: each of triage_patch's reads is followed by the owner saving the next title."""

    def arm(owner: dict, titles: list[str], field: str = "title") -> list[int]:
        real_get = repo.get
        versions: list[int] = []  # the version each raced read saw

        async def get_then_race(database, order_id):
            doc = await real_get(database, order_id)
            if titles and doc is not None:
                title = titles.pop(0)
                change = WorkOrderUpdate.model_validate({"version": doc["version"], field: title})
                monkeypatch.setattr(repo, "get", real_get)  # the person's own update reads unhindered
                try:
                    await work_orders.update(db=database, actor=actor(owner), order_id=str(order_id), data=change)
                finally:
                    monkeypatch.setattr(repo, "get", get_then_race)
                versions.append(doc["version"])
            return doc

        monkeypatch.setattr(repo, "get", get_then_race)
        return versions

    return arm


async def patch(db, order_id: str, run_id: str, read: dict | None = None):
    return await triage_door.triage_patch(
        db=db,
        actor=SYSTEM_TRIAGE,
        order_id=order_id,
        changes={"priority": "urgent"},
        allowed=frozenset({"priority"}),
        run_id=run_id,
        read=read,
    )


async def test_one_lost_race_reads_again_and_the_change_lands_beside_the_persons(db, make_user, make_order, racing):
    owner = await make_user()
    order = await make_order(owner, "Leak", priority="low")
    raced = racing(owner, ["Leak under the sink"])
    run_id = str(ObjectId())

    changed = await patch(db, order.id, run_id)

    assert raced == [1]  # its first read saw version 1; the person saved version 2 before its write
    assert (changed.priority, changed.title, changed.version) == ("urgent", "Leak under the sink", 3)
    stored = await work_orders.get(db=db, actor=actor(owner), order_id=order.id)
    assert (stored.priority, stored.title) == ("urgent", "Leak under the sink")
    timeline = await work_orders.activity(db=db, actor=actor(owner), order_id=order.id)
    mine = [entry for entry in timeline if entry.actor_kind == "system"]
    assert [(entry.before, entry.after, entry.run_id) for entry in mine] == [
        ({"priority": "low"}, {"priority": "urgent"}, run_id)
    ]


async def test_a_second_lost_race_logs_and_drops_the_change_without_an_error(db, make_user, make_order, racing, caplog):
    owner = await make_user()
    order = await make_order(owner, "Leak", priority="low")
    raced = racing(owner, ["Leak under the sink", "Leak under the kitchen sink"])
    run_id = str(ObjectId())

    with caplog.at_level(logging.WARNING, logger="desk.work_orders"):
        changed = await patch(db, order.id, run_id)

    assert changed is None
    assert raced == [1, 2]  # it read twice, and lost twice
    stored = await work_orders.get(db=db, actor=actor(owner), order_id=order.id)
    assert (stored.priority, stored.title, stored.version) == ("low", "Leak under the kitchen sink", 3)
    timeline = await work_orders.activity(db=db, actor=actor(owner), order_id=order.id)
    assert [entry.actor_kind for entry in timeline].count("system") == 0
    assert "triage change dropped" in caplog.text and run_id in caplog.text
    assert "Leak" not in caplog.text  # the order's text never reaches a log


async def test_a_persons_priority_saved_between_its_read_and_its_write_wins(db, make_user, make_order, racing):
    owner = await make_user()
    order = await make_order(owner, "Leak", priority="low")
    raced = racing(owner, ["high"], field="priority")  # set by the person right after the triage's read

    changed = await patch(db, order.id, str(ObjectId()), read={"priority": "low"})

    assert isinstance(changed, triage_door.Overtaken) and changed.order.priority == "high"
    assert raced == [1]  # its write at version 1 missed; its second read found the person's priority
    stored = await work_orders.get(db=db, actor=actor(owner), order_id=order.id)
    assert (stored.priority, stored.version) == ("high", 2)
    timeline = await work_orders.activity(db=db, actor=actor(owner), order_id=order.id)
    assert [entry.actor_kind for entry in timeline].count("system") == 0


async def test_a_change_beside_the_read_field_does_not_overtake_it(db, make_user, make_order, racing):
    owner = await make_user()
    order = await make_order(owner, "Leak", priority="low")
    racing(owner, ["Leak under the sink"])  # the title, not the priority the triage read

    changed = await patch(db, order.id, str(ObjectId()), read={"priority": "low"})

    assert (changed.priority, changed.title) == ("urgent", "Leak under the sink")
