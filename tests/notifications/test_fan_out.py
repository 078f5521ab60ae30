"""A write's fan-out is a job on the desk's queue: a failing fan-out never fails the saved write and is retried; a
process that dies after the write loses no notification; a fan-out run twice tells no one twice."""

from datetime import timedelta

from bson import ObjectId

from desk import state
from desk.jobs.table import Context
from desk.jobs.worker import Worker
from desk.notifications import events, mail_queue, outbox, service
from desk.notifications.models import NotificationQuery
from desk.work_orders import service as orders
from desk.work_orders.models import CommentCreate
from tests.helpers import actor


async def bell(db, user) -> list[str]:
    page = await service.page(db=db, actor=actor(user), query=NotificationQuery())
    return [item.text for item in page.items]


async def run_worker(db, clock) -> int:
    """Every due job of the notifications (fan-outs and emails) once, as the worker runs them, at the test's clock."""
    worker = Worker(functions=[*outbox.tasks(), *mail_queue.tasks()], burst=True, clock=clock, poll_delay=0)
    return await worker.run_due(Context(db=db, settings=state.current().settings))


async def fan_out_job(db) -> dict:
    (job,) = await db["outbox_events"].find({"type": outbox.TASK}).to_list()
    return job


async def test_a_write_whose_fan_out_fails_is_saved_and_its_notification_comes_with_the_retry(
    db, make_user, client_for, clock
):
    admin, lee = await make_user("admin", name="Ada"), await make_user(name="Lee")
    # Lee's stored preferences are broken (a hand edit, a bad migration): reading them fails every fan-out to Lee
    await db["notification_prefs"].insert_one({"_id": lee["id"], "inApp": "everything"})
    client = await client_for(admin)

    made = await client.post("/api/v1/work-orders", json={"title": "Leaking tap", "ownerId": lee["id"]})

    assert made.status_code == 201  # saved, and said so
    assert (await client.get(f"/api/v1/work-orders/{made.json()['id']}")).status_code == 200
    assert await bell(db, lee) == []
    job = await fan_out_job(db)
    assert (job["status"], job["attempts"], job["lastError"]) == ("pending", 1, "internal")

    await db["notification_prefs"].delete_one({"_id": lee["id"]})  # mended
    clock.move(timedelta(seconds=2))  # the first retry's backoff
    assert await run_worker(db, clock) == 1
    assert await bell(db, lee) == ["Ada gave you “Leaking tap”."]
    assert (await fan_out_job(db))["status"] == "done"


async def test_a_process_that_dies_after_the_write_loses_no_notification(db, make_user, make_order, clock, monkeypatch):
    admin, lee = await make_user("admin", name="Ada"), await make_user(name="Lee")
    order = await make_order(admin, "Leaking tap", owner_id=lee["id"])

    async def dies(db, held) -> None:  # the process is gone between the write and its fan-out
        return None

    monkeypatch.setattr(outbox, "deliver", dies)
    await orders.add_comment(db=db, actor=actor(admin), order_id=order.id, data=CommentCreate(text="Parts ordered"))
    assert await bell(db, lee) == ["Ada gave you “Leaking tap”."]

    assert await run_worker(db, clock) == 0  # the writer's claim holds until its lease lapses
    clock.move(outbox.LEASE + timedelta(seconds=1))
    assert await run_worker(db, clock) == 1
    assert await bell(db, lee) == ["Ada commented on “Leaking tap”: Parts ordered", "Ada gave you “Leaking tap”."]


async def test_a_fan_out_job_that_never_saw_its_write_tells_no_one(db, make_user, make_order, clock):
    admin, lee = await make_user("admin"), await make_user()
    order = await make_order(admin, "Leaking tap", owner_id=lee["id"])
    await db["notifications"].delete_many({})
    # stored before a comment whose process died before writing it
    stored = await db["work_orders"].find_one({"_id": ObjectId(order.id)})
    news = events.commented(actor=actor(admin), order=stored, entry=ObjectId(), text="Never said")
    await outbox.announce(db, news)

    clock.move(outbox.LEASE + timedelta(seconds=1))
    await run_worker(db, clock)
    job = await db["outbox_events"].find_one({"type": outbox.TASK, "payloadRef": news["entry"]})
    assert (job["status"], job["lastError"]) == ("skipped", "not_written")
    assert await bell(db, lee) == []


async def test_a_fan_out_run_again_tells_and_mails_each_person_once(db, make_user, make_order, inbox, clock):
    admin, lee = await make_user("admin", name="Ada"), await make_user(name="Lee", email="lee@example.com")
    order = await make_order(admin, "Leaking tap", owner_id=lee["id"])
    job = await fan_out_job(db)
    # as if the writer died after its fan-out stored the notifications and opened the mail window, before it gave
    # the window its jobs and settled its own: a worker runs the fan-out again once the lease lapses
    await db["outbox_events"].delete_many({"type": mail_queue.TASK})
    held = {"status": "processing", "leasedUntil": job["createdAt"] + outbox.LEASE}
    await db["outbox_events"].update_one({"_id": job["_id"]}, {"$set": held})

    clock.move(outbox.LEASE + timedelta(seconds=1))
    await run_worker(db, clock)

    assert await bell(db, lee) == ["Ada gave you “Leaking tap”."]
    assert await db["notifications"].count_documents({"workOrderId": ObjectId(order.id)}) == 1
    assert [mail["Subject"] for mail in inbox.mails] == ["Ada gave you “Leaking tap”."]
    clock.move(timedelta(seconds=300))  # the window's digest finds nothing more to send
    await run_worker(db, clock)
    assert len(inbox.mails) == 1
