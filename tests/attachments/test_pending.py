"""An upload whose process died between writing a file's record and confirming its bytes: swept an hour on.

"Died" is played by writing what the upload writes before its confirmation, and never confirming: the
record, pending since the Desk's clock's now, and (for one of them) the bytes it names.
"""

import io
from datetime import timedelta

from bson import ObjectId
from gridfs import AsyncGridFSBucket

from desk import state, tasks
from desk.attachments import pending, repository
from desk.attachments.thumbnails import tasks as thumbnail_tasks
from desk.jobs.table import Context
from desk.jobs.worker import Worker
from desk.schema import now
from tests.attachments.files import png


async def _stored_files(db) -> list[str]:
    return sorted([f.filename async for f in AsyncGridFSBucket(db, bucket_name=repository.BUCKET).find({})])


async def _died(db, order_id: str, user_id: str, name: str, *, bytes_written: bool) -> ObjectId:
    """What an upload left when its process died before confirming it; the record's id."""
    doc = {
        "workOrderId": ObjectId(order_id),
        "name": name,
        "contentType": "image/png",
        "size": 10,
        "fileId": ObjectId(),
        "thumbnailId": None,
        "uploadedBy": ObjectId(user_id),
        "createdAt": now(),
        "pendingSince": state.current().clock.now(),
    }
    stored = await repository.insert(db, doc)
    if bytes_written:
        await repository.store(db, io.BytesIO(b"half a photo"), name, doc["fileId"])
    return stored["_id"]


async def test_a_dead_uploads_bytes_and_record_are_swept_after_an_hour(make_user, make_order, client_for, db, clock):
    sam = await make_user()
    order = await make_order(sam)
    client = await client_for(sam)
    kept = await client.post(f"/api/v1/work-orders/{order.id}/attachments", files={"file": ("kept.png", png())})
    assert kept.status_code == 201, kept.text
    with_bytes = await _died(db, order.id, sam["id"], "died-after-bytes.png", bytes_written=True)
    await _died(db, order.id, sam["id"], "died-before-bytes.png", bytes_written=False)
    sweep = Context(db=db, settings=state.current().settings)

    listed = (await client.get(f"/api/v1/work-orders/{order.id}/attachments")).json()
    assert [f["name"] for f in listed] == ["kept.png"]  # a pending file is neither listed nor served
    assert (await client.get(f"/api/v1/attachments/{with_bytes}")).status_code == 404
    clock.move(timedelta(minutes=59))
    await pending.sweep(sweep)
    assert await _stored_files(db) == ["died-after-bytes.png", "kept.png"]  # it might still be under way

    clock.move(timedelta(minutes=2))
    await pending.sweep(sweep)

    assert await _stored_files(db) == ["kept.png"]
    assert await db["attachments"].count_documents({}) == 1
    got = await client.get(f"/api/v1/attachments/{kept.json()['id']}")
    assert got.status_code == 200 and got.content[:4] == b"\x89PNG"
    assert "attachments_pending" in {job.name for job in tasks.worker(state.current().settings).cron_jobs}


async def test_dead_uploads_hold_their_places_until_swept_and_never_reach_the_timeline(
    make_user, make_order, client_for, db, clock
):
    sam = await make_user()
    order = await make_order(sam)
    client = await client_for(sam)
    for n in range(20):
        await _died(db, order.id, sam["id"], f"{n}.png", bytes_written=n % 2 == 0)

    full = await client.post(f"/api/v1/work-orders/{order.id}/attachments", files={"file": ("one.png", png())})
    assert full.status_code == 413
    clock.move(timedelta(hours=1, seconds=1))
    await pending.sweep(Context(db=db, settings=state.current().settings))
    attached = await client.post(f"/api/v1/work-orders/{order.id}/attachments", files={"file": ("one.png", png())})

    assert attached.status_code == 201, attached.text
    assert await _stored_files(db) == ["one.png"]
    assert await db["activity"].count_documents({"action": "attached"}) == 1  # the dead ones never reached it


async def _thumbnail_died(db, attachment_id: str) -> None:
    """What the thumbnail job wrote before its worker died: the thumbnail named on the file, and its bytes."""
    thumbnail_id, attachment = ObjectId(), ObjectId(attachment_id)
    assert await repository.reserve_thumbnail(db, attachment, thumbnail_id, state.current().clock.now())
    await repository.store(db, io.BytesIO(b"half a thumbnail"), f"thumbnail of {attachment}", thumbnail_id)


async def test_a_thumbnail_whose_worker_died_is_swept_or_replaced_by_the_retry(
    make_user, make_order, client_for, db, clock
):
    sam = await make_user()
    order = await make_order(sam)
    client = await client_for(sam)
    ids = []
    for name in ("swept.png", "retried.png"):
        sent = await client.post(f"/api/v1/work-orders/{order.id}/attachments", files={"file": (name, png())})
        ids.append(sent.json()["id"])
        await _thumbnail_died(db, ids[-1])
    await db["outbox_events"].delete_many({"payloadRef": ObjectId(ids[0])})  # its job: given up, say
    context = Context(db=db, settings=state.current().settings)
    assert len(await _stored_files(db)) == 4  # two pictures, two thumbnails nothing records

    assert await Worker(functions=thumbnail_tasks(), burst=True, clock=clock, poll_delay=0).run_due(context) == 1
    clock.move(timedelta(hours=1, seconds=1))
    await pending.sweep(context)

    assert await _stored_files(db) == ["retried.png", "swept.png", f"thumbnail of {ids[1]}"]
    listed = (await client.get(f"/api/v1/work-orders/{order.id}/attachments")).json()
    assert [(f["name"], f["hasThumbnail"]) for f in listed] == [("swept.png", False), ("retried.png", True)]
    small = await client.get(f"/api/v1/attachments/{ids[1]}/thumbnail")
    assert small.status_code == 200 and small.content[:4] == b"RIFF"  # the retry's WebP, not the dead try's bytes
