"""The triage's days are the desk's (the policy's time zone), not UTC's: decisions, the daily chart, the gauge.

The Desk's clock stands at 23:30 in Dubai (UTC+4, no DST), 19:30 UTC, and then moves an hour: past Dubai's
midnight while UTC's date stays the same.
"""

from datetime import UTC, date, datetime, time, timedelta

from desk import state
from desk.agent.triage import policy
from desk.agent.triage import service as triage_service
from desk.agent.triage.models import AgentConfigUpdate
from tests.clock import ManualClock
from tests.deploy.test_metrics import scrape, value
from tests.helpers import actor
from tests.triage.test_api import triaged_order

ZONE = "Asia/Dubai"


async def test_decisions_count_on_the_day_of_the_policys_time_zone_around_its_midnight(
    app, db, triage_settings, make_user, make_order, client_for, fake_provider, burst
):
    admin = await make_user("admin")
    version = (await policy.current(db, triage_settings))["version"]
    change = AgentConfigUpdate(version=version, timeZone=ZONE)
    await policy.update_config(db=db, settings=triage_settings, actor=actor(admin), data=change)
    owner, first = await triaged_order(make_user, make_order, fake_provider, burst)
    _, second = await triaged_order(make_user, make_order, fake_provider, burst, owner=owner)
    evening = date.today() + timedelta(days=2)  # a day ahead of every suggestion made just now
    clock = ManualClock(datetime.combine(evening, time(19, 30), tzinfo=UTC))  # 23:30 in Dubai
    state.current().clock = clock
    client = await client_for(owner)  # logged in on the Desk's clock, the sessions' (two hours idle at most)

    await decide(client, first.id, accept=True)
    clock.move(timedelta(hours=1))  # 00:30 in Dubai, the next day; still `evening` in UTC
    await decide(client, second.id, accept=False)

    days = await triage_service.per_day(db=db, actor=actor(admin), days=3)
    assert [(d.day, d.accepted, d.dismissed) for d in days[-2:]] == [
        (evening, 1, 0),
        (evening + timedelta(days=1), 0, 1),
    ]
    samples = await scrape(app)  # today, in Dubai: only the dismissal
    assert value(samples, "desk_triage_decisions_today", decision="dismissed") == 1
    assert value(samples, "desk_triage_decisions_today", decision="accepted") == 0
    stored = await db["triage_suggestions"].find({}, {"decidedDay": 1}).sort("decidedAt", 1).to_list()
    assert [doc["decidedDay"] for doc in stored] == [evening.isoformat(), (evening + timedelta(days=1)).isoformat()]


async def decide(client, order_id: str, *, accept: bool) -> None:
    (suggestion,) = (await client.get(f"/api/v1/work-orders/{order_id}/triage")).json()
    response = await client.post(
        f"/api/v1/work-orders/{order_id}/triage/{suggestion['id']}/decide", json={"accept": accept}
    )
    assert response.status_code == 200, response.text
