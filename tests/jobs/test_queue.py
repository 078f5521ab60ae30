"""The queue's store (desk/jobs/queue.py): one job per task and key, and a claim only one worker wins."""

import asyncio
from datetime import timedelta

from bson import ObjectId

from desk.jobs import queue
from tests.jobs.conftest import LEASE, TASK


async def test_enqueueing_the_same_task_and_key_again_makes_no_second_job(db, clock):
    key = ObjectId()

    first = await queue.enqueue(db, TASK, key, at=clock.now())
    again = await queue.enqueue(db, TASK, key, at=clock.now())
    other_task = await queue.enqueue(db, "test.other", key, at=clock.now())

    assert (first, again, other_task) == (True, False, True)
    assert await db["outbox_events"].count_documents({"type": TASK, "payloadRef": key}) == 1
    job = await queue.find(db, TASK, key)
    assert (job["status"], job["attempts"], job["fence"], job["availableAt"]) == ("pending", 0, 0, clock.now())


async def test_a_job_enqueued_skipped_keeps_its_reason_and_is_never_claimed(db, clock):
    key = ObjectId()

    await queue.enqueue(db, TASK, key, skip="not_wanted", at=clock.now())

    assert await queue.claim(db, owner="w1", lease=LEASE, at=clock.now()) is None
    job = await queue.find(db, TASK, key)
    assert (job["status"], job["lastError"]) == ("skipped", "not_wanted")


async def test_workers_claiming_at_once_get_the_job_once_between_them(db, clock, enqueue):
    await enqueue()

    claims = await asyncio.gather(*(queue.claim(db, owner=f"w{n}", lease=LEASE, at=clock.now()) for n in range(4)))

    won = [claim for claim in claims if claim is not None]
    assert len(won) == 1
    assert (won[0]["status"], won[0]["attempts"], won[0]["fence"]) == ("processing", 1, 1)
    assert won[0]["leasedUntil"] == clock.now() + LEASE


async def test_a_claim_takes_only_the_tasks_it_names(db, clock, enqueue):
    await enqueue("test.other")

    assert await queue.claim(db, owner="w1", lease=LEASE, tasks=[TASK], at=clock.now()) is None
    assert (await queue.claim(db, owner="w1", lease=LEASE, tasks=["test.other"], at=clock.now()))[
        "type"
    ] == "test.other"


async def test_a_fresh_job_is_claimed_before_a_backlog_of_older_ones(db, clock, enqueue):
    backlog = [await enqueue(born=clock.now() - timedelta(hours=hours)) for hours in range(1, 201)]
    # the reconcile pass's job for an old order, enqueued just now: it stays in the backlog
    late = await enqueue(born=clock.now() - timedelta(days=3))
    fresh = await enqueue()

    first, second = [await queue.claim(db, owner="w1", lease=LEASE, tasks=[TASK], at=clock.now()) for _ in range(2)]

    assert first["payloadRef"] == fresh
    assert second["payloadRef"] == backlog[0]  # then the newest of the backlog
    assert (await queue.find(db, TASK, late))["status"] == "pending"


async def test_a_job_whose_lease_lapsed_is_claimed_again_once_revived(db, clock, enqueue):
    key = await enqueue()
    held = await enqueue()
    await queue.claim(db, owner="dead", lease=LEASE, at=clock.now())  # the newest, `held`
    await queue.claim(db, owner="alive", lease=LEASE * 2, at=clock.now())
    clock.move(LEASE + timedelta(milliseconds=1))

    missed = await queue.claim(db, owner="w2", lease=LEASE, at=clock.now())
    revived = await queue.revive(db, at=clock.now())
    again = await queue.claim(db, owner="w2", lease=LEASE, at=clock.now())

    assert (missed, revived) == (None, 1)  # the live lease stays
    assert (again["payloadRef"], again["leaseOwner"], again["attempts"], again["fence"]) == (held, "w2", 2, 2)
    assert (await queue.find(db, TASK, key))["leaseOwner"] == "alive"


async def test_putting_back_every_claimed_job_of_a_task_leaves_its_holders_nothing_to_settle(db, clock, enqueue):
    """What a kill switch does: the claimed jobs wait again at once, their attempts not counted, and the workers
    that held them can neither renew nor settle them; other tasks' jobs, and jobs not claimed, are left alone."""
    waiting_key, held_key, other_key = await enqueue(), await enqueue(), await enqueue("test.other")  # newest claimed
    held = await queue.claim(db, owner="w1", lease=LEASE, tasks=[TASK], at=clock.now())
    other = await queue.claim(db, owner="w2", lease=LEASE, tasks=["test.other"], at=clock.now())
    assert held["payloadRef"] == held_key

    assert await queue.put_back_all(db, TASK, at=clock.now()) == 1

    job = await queue.find(db, TASK, held_key)
    assert (job["status"], job["attempts"], job["fence"], job["leaseOwner"]) == ("pending", 0, 2, None)
    assert await queue.renew(db, held, LEASE, at=clock.now()) is False
    assert await queue.settle(db, held, "done", at=clock.now()) is False
    assert (await queue.find(db, TASK, waiting_key))["status"] == "pending"
    assert (await queue.find(db, "test.other", other_key))["status"] == "processing"
    assert await queue.settle(db, other, "done", at=clock.now()) is True


async def test_a_job_taken_from_a_dead_worker_and_handed_back_is_claimed_again(db, clock, enqueue):
    """A manual run takes a job whose worker died mid-pass (processing, its lease lapsed) and hands it back unsettled:
    it waits, pending, for a worker, instead of staying `processing` with no lease that anyone would revive."""
    key = await enqueue()
    await queue.claim(db, owner="dead", lease=LEASE, tasks=[TASK], at=clock.now())
    clock.move(LEASE + timedelta(seconds=1))
    before, job = await queue.take(db, TASK, key, owner="manual:admin", lease=LEASE, at=clock.now())

    assert await queue.hand_back(db, job, before, at=clock.now())

    back = await queue.find(db, TASK, key)
    assert (back["status"], back["leasedUntil"], back["attempts"]) == ("pending", None, 1)
    again = await queue.claim(db, owner="w2", lease=LEASE, tasks=[TASK], at=clock.now())
    assert again["payloadRef"] == key
