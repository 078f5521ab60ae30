"""The live acceptance of suggestions by week (accepted, dismissed, overtaken by a person), for admins and /metrics."""

import httpx
import pytest
from bson import ObjectId

from desk.agent.triage import acceptance
from desk.agent.triage import service as triage
from desk.errors import Forbidden
from desk.schema import now
from desk.work_orders import service as work_orders
from desk.work_orders.models import WorkOrderUpdate
from tests.helpers import actor
from tests.triage.conftest import proposal


async def four_suggestions(db, make_user, make_order, fake_provider, burst):
    """Four orders triaged "high": one accepted, one dismissed, one whose priority a person set, one left waiting."""
    owner = await make_user()
    orders = [await make_order(owner, f"Order {n}") for n in range(4)]
    fake_provider.script(*[proposal("high") for _ in orders])
    await burst()
    found = {doc["workOrderId"]: doc for doc in await db["triage_suggestions"].find().to_list()}
    suggestion = [str(found[ObjectId(order.id)]["_id"]) for order in orders]
    who = actor(owner)
    await triage.decide(db=db, actor=who, order_id=orders[0].id, suggestion_id=suggestion[0], accept=True)
    await triage.decide(db=db, actor=who, order_id=orders[1].id, suggestion_id=suggestion[1], accept=False)
    change = WorkOrderUpdate(version=orders[2].version, priority="low")  # a person chose otherwise
    await work_orders.update(db=db, actor=who, order_id=orders[2].id, data=change)
    return owner


async def test_this_weeks_suggestions_accepted_dismissed_and_overtaken(db, make_user, make_order, fake_provider, burst):
    await four_suggestions(db, make_user, make_order, fake_provider, burst)
    admin = await make_user("admin")

    weeks = await acceptance.by_week(db=db, actor=actor(admin), weeks=4)

    assert len(weeks) == 4 and weeks[-1].start.weekday() == 0 and weeks[-1].start <= now().date()
    this = weeks[-1]
    assert (this.accepted, this.dismissed, this.overtaken) == (1, 1, 1)  # the waiting one is nobody's answer yet
    assert this.rate == 1 / 3
    assert all(week.rate is None for week in weeks[:-1])


async def test_only_admins_read_the_acceptance(db, make_user):
    person = await make_user()
    with pytest.raises(Forbidden):
        await acceptance.by_week(db=db, actor=actor(person))


async def test_metrics_carry_the_last_seven_days_acceptance(app, db, make_user, make_order, fake_provider, burst):
    await four_suggestions(db, make_user, make_order, fake_provider, burst)

    async with httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://desk.test") as client:
        text = (await client.get("/metrics")).text

    assert 'desk_triage_suggestions_answered_7d{outcome="accepted"} 1.0' in text
    assert 'desk_triage_suggestions_answered_7d{outcome="dismissed"} 1.0' in text
    assert 'desk_triage_suggestions_answered_7d{outcome="overtaken"} 1.0' in text
    assert "desk_triage_acceptance_ratio_7d 0.3333333333333333" in text
