"""Scale (issue 18): two worker processes on one database triage 200 new orders, each exactly once.

Real `python scheduler.py` processes against the scripted fake provider (instant answers), a 200 ms
poll and the default concurrency of 2 (the whole desk's). The figures (events per second, p95) are the bench's
(bench/triage.py); this asserts what people would notice: no order missed, none triaged twice.
"""

import asyncio
from pathlib import Path

from bson import ObjectId

from bench.workers import worker_settings, workers
from desk.users import service as users_service
from desk.users.models import UserCreate
from desk.work_orders import service as work_orders
from desk.work_orders.models import WorkOrderCreate
from tests.conftest import TEST_DB
from tests.helpers import PASSWORD, actor, until
from tests.triage.conftest import proposal

ORDERS = 200


async def test_two_workers_triage_two_hundred_orders_each_exactly_once(
    db, settings, tmp_path: Path, mongo_uri, fake_provider
):
    # `settings`: the test limits, 1000 writes a minute; 200 orders at once are far past a person's 60,
    # which this test is not about
    user = await users_service.register(
        db=db, data=UserCreate(email="many@example.com", name="Many", role="user", password=PASSWORD)
    )
    owner = actor(user.model_dump(by_alias=True))
    ids = {
        ObjectId((await work_orders.create(db=db, actor=owner, data=WorkOrderCreate(title=f"Order {n}"))).id)
        for n in range(ORDERS)
    }
    fake_provider.script(*[proposal("high") for _ in range(ORDERS)])
    worker_env = worker_settings(
        mongodb_uri=mongo_uri, db_name=TEST_DB, provider_url=fake_provider.url, AGENT_POLL_INTERVAL_MS="200"
    )

    async def done() -> bool:
        return await db["outbox_events"].count_documents({"status": "done"}) == ORDERS

    with workers(tmp_path / "workers", **worker_env) as pool:
        for worker in [pool.start(wait=False), pool.start(wait=False)]:
            worker.wait_started()
        await until(done, what=f"{ORDERS} events done", within=120)
        await asyncio.sleep(0.5)  # a pass that would run twice has the time to show up

    suggestions = await db["triage_suggestions"].find({}, {"workOrderId": 1}).to_list()
    assert sorted(s["workOrderId"] for s in suggestions) == sorted(ids)  # one each, none missing
    runs = await db["agent_runs"].find({"agentName": "triage"}, {"workOrderId": 1, "status": 1}).to_list()
    assert len(runs) == ORDERS and {run["status"] for run in runs} == {"complete"}
    assert len(fake_provider.requests) == ORDERS
    assert await db["outbox_events"].count_documents({"status": {"$ne": "done"}}) == 0
    # AGENT_CONCURRENCY (2) holds across both workers: a claim that finds both desk-wide slots taken goes back
    assert fake_provider.most_in_flight <= 2
