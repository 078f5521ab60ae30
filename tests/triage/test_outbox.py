"""The outbox (AGT-1, AGT-2): one event per new order, claimed atomically, settled only by its fence holder."""

import asyncio
from datetime import timedelta

from bson import ObjectId

from desk.jobs import queue as outbox
from desk.seed import seed_demo
from desk.work_orders.outbox import CREATED

LEASE = timedelta(seconds=15)


async def test_a_new_work_order_emits_one_pending_event(db, make_user, make_order):
    owner = await make_user()
    order = await make_order(owner)

    event = await outbox.find(db, CREATED, ObjectId(order.id))

    assert event["status"] == "pending"
    assert event["type"] == "work_order.created"
    assert event["attempts"] == 0


async def test_emitting_again_never_doubles_the_event(db, make_user, make_order):
    order = await make_order(await make_user())

    again = await outbox.enqueue(db, CREATED, ObjectId(order.id))

    assert again is False
    assert await db["outbox_events"].count_documents({"payloadRef": ObjectId(order.id)}) == 1


async def test_an_order_for_someone_with_ai_turned_off_is_skipped_at_emission(db, make_user, make_order, change_user):
    owner = await change_user(await make_user(), ai_enabled=False)

    order = await make_order(owner)

    event = await outbox.find(db, CREATED, ObjectId(order.id))
    assert (event["status"], event["lastError"]) == ("skipped", "ai_disabled_for_owner")


async def test_the_demo_seeds_history_has_its_events_stored_skipped_so_a_first_start_triages_none_of_it(
    db, settings, fake_provider, burst
):
    await seed_demo(db, count=5)

    statuses = {(e["status"], e["lastError"]) for e in await db["outbox_events"].find({}).to_list()}
    assert await db["outbox_events"].count_documents({}) == await db["work_orders"].count_documents({}) == 5
    assert statuses == {("skipped", "seeded")}
    assert await burst() == 0  # a first start: nothing to claim, no model call, no bill
    assert fake_provider.requests == []
    assert await db["triage_suggestions"].count_documents({}) == 0


async def test_two_workers_claiming_at_once_get_one_event_between_them(db, make_user, make_order):
    await make_order(await make_user())

    claims = await asyncio.gather(*(outbox.claim(db, owner=f"w{n}", lease=LEASE) for n in range(4)))

    won = [claim for claim in claims if claim is not None]
    assert len(won) == 1
    assert (won[0]["status"], won[0]["attempts"], won[0]["fence"]) == ("processing", 1, 1)


async def test_a_lapsed_lease_is_claimed_again_and_the_first_holder_can_no_longer_settle(db, make_user, make_order):
    await make_order(await make_user())
    first = await outbox.claim(db, owner="paused", lease=timedelta(milliseconds=1))
    await asyncio.sleep(0.01)  # the point: the lease lapses (the queue reads the system's clock, no test's)

    revived = await outbox.revive(db)  # as the next worker's poll does
    second = await outbox.claim(db, owner="awake", lease=LEASE)

    assert revived == 1 and second["_id"] == first["_id"] and second["fence"] == first["fence"] + 1
    assert await outbox.renew(db, first, LEASE) is False
    assert await outbox.settle(db, first, "done") is False
    assert await outbox.settle(db, second, "done") is True
    assert (await outbox.get(db, first["_id"]))["leaseOwner"] is None


async def test_a_held_lease_is_not_claimed_twice(db, make_user, make_order):
    await make_order(await make_user())
    await outbox.claim(db, owner="w1", lease=LEASE)

    assert await outbox.claim(db, owner="w2", lease=LEASE) is None


async def test_putting_an_event_back_does_not_count_the_attempt(db, make_user, make_order):
    await make_order(await make_user())
    claimed = await outbox.claim(db, owner="w1", lease=LEASE)

    assert await outbox.put_back(db, claimed)

    event = await outbox.get(db, claimed["_id"])
    assert (event["status"], event["attempts"]) == ("pending", 0)
