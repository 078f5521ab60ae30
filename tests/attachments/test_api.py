"""Attaching files to work orders over the API: who may, what is kept of a photo, what is served, the limits."""

import io
import os

import pytest
from bson import ObjectId
from gridfs import AsyncGridFSBucket
from PIL import Image

from desk import state
from desk.attachments import images, repository
from desk.attachments.thumbnails import tasks as thumbnail_tasks
from desk.jobs.table import Context
from desk.jobs.worker import Worker
from desk.work_orders import service as orders
from desk.work_orders.models import WorkOrderUpdate
from tests.attachments.files import GPS_IFD, HTML, MAKE, ORIENTATION, SVG, image, phone_exif, phone_jpeg, png, webp
from tests.helpers import actor, reconfigure

MB = 1024 * 1024


def _files(name: str, data: bytes, content_type: str = "image/png") -> dict:
    return {"file": (name, data, content_type)}


async def _stored_files(db) -> list:
    """What GridFS holds, asked through the bucket (the embedded server answers for its tables there)."""
    return [f async for f in AsyncGridFSBucket(db, bucket_name=repository.BUCKET).find({})]


@pytest.fixture
def run_thumbnails(db, clock):
    """Run every due thumbnail job once, as the worker would."""

    async def run() -> int:
        worker = Worker(functions=thumbnail_tasks(), burst=True, clock=clock, poll_delay=0)
        return await worker.run_due(Context(db=db, settings=state.current().settings))

    return run


async def test_a_phone_photo_is_kept_without_its_gps_position_and_gets_a_thumbnail(
    make_user, make_order, client_for, run_thumbnails
):
    sam = await make_user()
    order = await make_order(sam)
    client = await client_for(sam)
    sent = phone_jpeg()

    answer = await client.post(f"/api/v1/work-orders/{order.id}/attachments", files=_files("IMG_0001.jpg", sent))

    assert answer.status_code == 201, answer.text
    body = answer.json()
    assert set(body) == {"id", "name", "contentType", "size", "createdAt", "uploadedBy", "hasThumbnail"}
    assert (body["name"], body["contentType"], body["uploadedBy"]) == ("IMG_0001.jpg", "image/jpeg", sam["id"])
    assert body["hasThumbnail"] is False
    got = await client.get(f"/api/v1/attachments/{body['id']}")
    assert got.status_code == 200 and got.headers["content-type"] == "image/jpeg"
    assert int(got.headers["content-length"]) == body["size"] == len(got.content)
    photo = image(got.content)
    assert photo.size == (1600, 1200)
    assert photo.getexif().get_ifd(GPS_IFD) == {} and MAKE not in photo.getexif()
    assert photo.getexif()[ORIENTATION] == 6  # still shown upright
    assert b"PhoneMaker" not in got.content and b"taken at home" not in got.content
    assert (await client.get(f"/api/v1/attachments/{body['id']}/thumbnail")).status_code == 404

    assert await run_thumbnails() == 1

    listed = (await client.get(f"/api/v1/work-orders/{order.id}/attachments")).json()
    assert [(f["id"], f["hasThumbnail"]) for f in listed] == [(body["id"], True)]
    small = await client.get(f"/api/v1/attachments/{body['id']}/thumbnail")
    assert small.status_code == 200 and small.headers["content-type"] == "image/webp"
    assert image(small.content).size == (240, 320)  # at most 320 px, and upright
    assert small.headers["cache-control"] == "private, max-age=86400, immutable"  # a gallery's redraw refetches none
    assert got.headers["cache-control"] == "private, no-store"  # the file itself is asked for each time


async def test_a_file_whose_bytes_went_meanwhile_is_not_found(make_user, make_order, client_for, db):
    # found by a review: the bytes were opened only once the answer's headers had gone out, as a 200
    sam = await make_user()
    order = await make_order(sam)
    client = await client_for(sam)
    answer = await client.post(f"/api/v1/work-orders/{order.id}/attachments", files=_files("a.pdf", b"%PDF-1.7 ..."))
    (stored,) = await _stored_files(db)
    await AsyncGridFSBucket(db, bucket_name=repository.BUCKET).delete(stored._id)  # a delete racing the download

    got = await client.get(f"/api/v1/attachments/{answer.json()['id']}")

    assert got.status_code == 404 and got.json()["error"]["code"] == "NOT_FOUND"


async def test_a_png_is_served_as_a_png_download(make_user, make_order, client_for):
    sam = await make_user()
    order = await make_order(sam)
    client = await client_for(sam)

    answer = await client.post(f"/api/v1/work-orders/{order.id}/attachments", files=_files("plan.png", png()))
    got = await client.get(f"/api/v1/attachments/{answer.json()['id']}")

    assert answer.json()["contentType"] == "image/png"
    assert got.headers["content-type"] == "image/png"
    assert got.headers["content-disposition"] == "attachment; filename=\"plan.png\"; filename*=UTF-8''plan.png"
    assert got.headers["x-content-type-options"] == "nosniff"
    assert image(got.content).size == (640, 480)


@pytest.mark.parametrize(
    ("name", "make", "kind", "size"),
    [
        ("plan.png", png, "image/png", (640, 480)),  # copied as it was, but for its metadata
        ("leak.webp", webp, "image/webp", (480, 640)),  # drawn again, upright as its EXIF said it was held
    ],
)
async def test_png_and_webp_are_kept_without_their_metadata(name, make, kind, size, make_user, make_order, client_for):
    sam = await make_user()
    order = await make_order(sam)
    client = await client_for(sam)
    sent = make(tagged=True) if make is png else make()
    assert b"PhoneMaker" in sent

    answer = await client.post(f"/api/v1/work-orders/{order.id}/attachments", files=_files(name, sent))
    got = await client.get(f"/api/v1/attachments/{answer.json()['id']}")

    assert answer.json()["contentType"] == kind and got.headers["content-type"] == kind
    picture = image(got.content)
    assert picture.size == size and picture.getexif().get_ifd(GPS_IFD) == {}
    assert b"PhoneMaker" not in got.content and b"Elm Street" not in got.content


async def test_a_damaged_picture_is_refused_and_nothing_is_stored(make_user, make_order, client_for, db):
    sam = await make_user()
    order = await make_order(sam)
    client = await client_for(sam)
    damaged = phone_jpeg()[:5000]  # cut short: its EXIF is there, its picture is not

    answer = await client.post(f"/api/v1/work-orders/{order.id}/attachments", files=_files("IMG.jpg", damaged))

    assert answer.status_code == 400 and answer.json()["error"]["code"] == "VALIDATION_ERROR"
    assert answer.json()["error"]["message"] == (
        "This file starts like a JPEG image but cannot be read as one; nothing was saved."
    )
    assert await _stored_files(db) == []
    assert (await client.get(f"/api/v1/work-orders/{order.id}/attachments")).json() == []


async def test_a_heic_photo_is_refused_as_its_location_cannot_be_taken_out(make_user, make_order, client_for, db):
    sam = await make_user()
    order = await make_order(sam)
    client = await client_for(sam)
    heic = b"\x00\x00\x00\x18ftypheic\x00\x00\x00\x00mif1heic" + b"Exif\x00\x00GPS 52.31N 13.24E" * 100

    answer = await client.post(f"/api/v1/work-orders/{order.id}/attachments", files=_files("IMG_0002.HEIC", heic))

    assert answer.status_code == 415 and answer.json()["error"]["code"] == "VALIDATION_ERROR"
    assert "Send it as a JPEG" in answer.json()["error"]["message"]
    assert await _stored_files(db) == []
    assert (await client.get(f"/api/v1/work-orders/{order.id}/attachments")).json() == []


async def test_an_animation_too_big_to_clean_is_refused(make_user, make_order, client_for, db, monkeypatch):
    sam = await make_user()
    order = await make_order(sam)
    client = await client_for(sam)
    frames = [Image.new("RGB", (64, 64), (n * 80, 0, 0)) for n in range(3)]
    out = io.BytesIO()
    frames[0].save(out, "WEBP", save_all=True, append_images=frames[1:], exif=phone_exif())
    monkeypatch.setattr(images, "MAX_ANIMATION_PIXELS", 3 * 64 * 64 - 1)  # one pixel short of these three frames

    answer = await client.post(f"/api/v1/work-orders/{order.id}/attachments", files=_files("spin.webp", out.getvalue()))

    assert answer.status_code == 400
    assert answer.json()["error"]["message"] == "This animation has too many frames to be cleaned of its metadata."
    assert await _stored_files(db) == []


async def test_a_name_cannot_hide_its_real_extension_with_invisible_characters(make_user, make_order, client_for):
    sam = await make_user()
    order = await make_order(sam)
    client = await client_for(sam)

    name = "invoice\u202efdp.exe"  # shown right to left from the override on: "invoiceexe.pdf"
    answer = await client.post(f"/api/v1/work-orders/{order.id}/attachments", files=_files(name, b"MZ..."))

    assert answer.json()["name"] == "invoicefdp.exe"


async def test_a_picture_that_cannot_be_drawn_stays_a_file_without_a_thumbnail(
    make_user, make_order, client_for, run_thumbnails, db
):
    sam = await make_user()
    order = await make_order(sam)
    client = await client_for(sam)
    broken = b"GIF89a" + os.urandom(2000)  # a GIF's signature, nothing Pillow can draw

    answer = await client.post(f"/api/v1/work-orders/{order.id}/attachments", files=_files("map.gif", broken))
    assert await run_thumbnails() == 1

    (listed,) = (await client.get(f"/api/v1/work-orders/{order.id}/attachments")).json()
    assert (listed["id"], listed["hasThumbnail"]) == (answer.json()["id"], False)
    job = await db["outbox_events"].find_one({"type": "attachments.thumbnail"})
    assert job["status"] == "skipped"  # not a dead letter an admin is asked to retry for ever


@pytest.mark.parametrize(
    ("name", "data", "claimed"),
    [("cute-cat.png", HTML, "image/png"), ("logo.svg", SVG, "image/svg+xml"), ("page.html", HTML, "text/html")],
)
async def test_markup_is_never_served_as_markup(name, data, claimed, make_user, make_order, client_for):
    sam = await make_user()
    order = await make_order(sam)
    client = await client_for(sam)

    answer = await client.post(f"/api/v1/work-orders/{order.id}/attachments", files=_files(name, data, claimed))
    got = await client.get(f"/api/v1/attachments/{answer.json()['id']}")

    assert answer.status_code == 201 and answer.json()["contentType"] == "application/octet-stream"
    assert got.headers["content-type"] == "application/octet-stream"
    assert got.headers["content-disposition"].startswith("attachment;")
    assert got.headers["x-content-type-options"] == "nosniff"
    assert "sandbox" in got.headers["content-security-policy"]
    assert got.content == data  # kept as sent, only never rendered


async def test_a_name_with_quotes_and_accents_downloads_under_a_safe_name(make_user, make_order, client_for):
    sam = await make_user()
    order = await make_order(sam)
    client = await client_for(sam)

    name = "..\\..\\Bäder; Küche.pdf"  # a path, as an old browser sent it
    answer = await client.post(f"/api/v1/work-orders/{order.id}/attachments", files=_files(name, b"%PDF-1.7 ..."))
    got = await client.get(f"/api/v1/attachments/{answer.json()['id']}")

    assert answer.json()["name"] == "Bäder; Küche.pdf" and answer.json()["contentType"] == "application/pdf"
    assert got.headers["content-disposition"] == (
        "attachment; filename=\"B_der_ K_che.pdf\"; filename*=UTF-8''B%C3%A4der%3B%20K%C3%BCche.pdf"
    )


async def test_a_file_over_the_limit_is_refused_and_nothing_is_stored(make_user, make_order, client_for, db):
    sam = await make_user()
    order = await make_order(sam)
    client = await client_for(sam)

    answer = await client.post(
        f"/api/v1/work-orders/{order.id}/attachments", files=_files("video.mp4", os.urandom(11 * MB), "video/mp4")
    )

    assert answer.status_code == 413
    assert answer.json()["error"] == {
        "code": "VALIDATION_ERROR",
        "message": "The file is over 10 MB; nothing was saved.",
    }
    assert (await client.get(f"/api/v1/work-orders/{order.id}/attachments")).json() == []
    assert await _stored_files(db) == []


async def test_a_file_just_over_the_limit_is_refused_as_it_arrives(make_user, make_order, client_for, db, settings):
    """Within the body's allowance for its multipart framing, but over the file limit: counted as it is read."""
    reconfigure(settings, desk_max_attachment_mb=1)
    sam = await make_user()
    order = await make_order(sam)
    client = await client_for(sam)

    answer = await client.post(f"/api/v1/work-orders/{order.id}/attachments", files=_files("a.bin", b"x" * (MB + 1)))

    assert (
        answer.status_code == 413 and answer.json()["error"]["message"] == "The file is over 1 MB; nothing was saved."
    )
    assert await _stored_files(db) == []
    assert await db["activity"].count_documents({"action": "attached"}) == 0


async def test_an_order_holds_twenty_files(make_user, make_order, client_for, db):
    sam = await make_user()
    order = await make_order(sam)
    client = await client_for(sam)
    for n in range(20):
        sent = await client.post(f"/api/v1/work-orders/{order.id}/attachments", files=_files(f"{n}.txt", b"note"))
        assert sent.status_code == 201

    answer = await client.post(f"/api/v1/work-orders/{order.id}/attachments", files=_files("21.txt", b"note"))

    assert answer.status_code == 413 and answer.json()["error"]["code"] == "VALIDATION_ERROR"
    assert "at most 20 files" in answer.json()["error"]["message"]
    assert len((await client.get(f"/api/v1/work-orders/{order.id}/attachments")).json()) == 20
    assert len(await _stored_files(db)) == 20


async def test_who_may_attach_download_and_delete(make_user, make_order, client_for, db):
    requester, owner, viewer, stranger = (
        await make_user(),
        await make_user(),
        await make_user("viewer"),
        await make_user(),
    )
    admin, colleague = await make_user("admin"), await make_user()
    order = await make_order(requester, ownerId=None)  # in the queue: every colleague sees it
    await orders.update(
        db=db, actor=actor(admin), order_id=order.id, data=WorkOrderUpdate(version=1, ownerId=owner["id"])
    )
    private = await make_order(stranger)
    people = {"requester": requester, "owner": owner, "viewer": viewer, "stranger": stranger, "admin": admin}
    clients = {who: await client_for(person) for who, person in (people | {"colleague": colleague}).items()}
    url = f"/api/v1/work-orders/{order.id}/attachments"

    attached = await clients["requester"].post(url, files=_files("r.txt", b"one"))
    by_viewer = await clients["viewer"].post(url, files=_files("v.txt", b"two"))
    by_stranger = await clients["stranger"].post(url, files=_files("s.txt", b"three"))
    file_id = attached.json()["id"]

    assert attached.status_code == 201
    assert by_viewer.status_code == 403 and by_viewer.json()["error"]["code"] == "FORBIDDEN"
    assert by_stranger.status_code == 404  # as for the order itself
    assert (await clients["viewer"].get(f"/api/v1/attachments/{file_id}")).content == b"one"
    assert (await clients["stranger"].get(f"/api/v1/attachments/{file_id}")).status_code == 404
    assert (await clients["stranger"].get(url)).status_code == 404
    other = await clients["stranger"].post(f"/api/v1/work-orders/{private.id}/attachments", files=_files("p", b"4"))
    assert (await clients["requester"].get(f"/api/v1/attachments/{other.json()['id']}")).status_code == 404
    assert (await clients["viewer"].delete(f"/api/v1/attachments/{file_id}")).status_code == 403
    assert (await clients["stranger"].delete(f"/api/v1/attachments/{file_id}")).status_code == 404
    for uploader, deleter in (("requester", "requester"), ("requester", "owner"), ("owner", "admin")):
        added = await clients[uploader].post(url, files=_files(f"{uploader}.txt", b"x"))
        assert (await clients[deleter].delete(f"/api/v1/attachments/{added.json()['id']}")).status_code == 204
    theirs = await clients["admin"].post(url, files=_files("admin.txt", b"x"))
    assert (await clients["requester"].delete(f"/api/v1/attachments/{theirs.json()['id']}")).status_code == 403
    assert (await clients["colleague"].delete(f"/api/v1/attachments/{file_id}")).status_code == 404  # not theirs to see


async def test_the_timeline_names_files_added_and_removed(make_user, make_order, client_for):
    sam = await make_user()
    order = await make_order(sam)
    client = await client_for(sam)
    added = await client.post(f"/api/v1/work-orders/{order.id}/attachments", files=_files("quote.pdf", b"%PDF-1.4"))

    assert (await client.delete(f"/api/v1/attachments/{added.json()['id']}")).status_code == 204

    timeline = (await client.get(f"/api/v1/work-orders/{order.id}/activity")).json()
    assert [(e["action"], (e["after"] or {}).get("name")) for e in timeline] == [
        ("detached", "quote.pdf"),
        ("attached", "quote.pdf"),
        ("created", None),
    ]
    assert (await client.get(f"/api/v1/attachments/{added.json()['id']}")).status_code == 404


async def test_deleting_an_order_deletes_its_files_and_the_audit_log_names_them(make_user, make_order, client_for, db):
    sam, admin = await make_user(), await make_user("admin")
    order = await make_order(sam)
    client = await client_for(sam)
    for name in ("before.jpg", "after.png"):
        data = phone_jpeg((64, 48)) if name.endswith("jpg") else png((32, 32))
        assert (
            await client.post(f"/api/v1/work-orders/{order.id}/attachments", files=_files(name, data))
        ).status_code == 201

    assert (await client.delete(f"/api/v1/work-orders/{order.id}", params={"version": 1})).status_code == 204

    assert await _stored_files(db) == []
    assert await db["attachments"].count_documents({}) == 0
    log = (await (await client_for(admin)).get("/api/v1/admin/audit")).json()["items"]
    deleted = next(entry for entry in log if entry["action"] == "work_order_deleted")
    assert [f["name"] for f in deleted["details"]["attachments"]] == ["before.jpg", "after.png"]


async def test_an_unknown_or_malformed_file_id_is_not_found(make_user, client_for):
    client = await client_for(await make_user())
    for file_id in (str(ObjectId()), "not-an-id"):
        assert (await client.get(f"/api/v1/attachments/{file_id}")).status_code == 404
        assert (await client.delete(f"/api/v1/attachments/{file_id}")).status_code == 404


async def test_a_stranger_is_refused_before_their_upload_is_read(make_user, make_order, anonymous):
    # found by a review: as a `File()` parameter, the whole body (10 MB of anyone's) was read and spooled to
    # disk before the answer was 401
    order = await make_order(await make_user())
    sent: list[int] = []

    async def body():
        yield b'--b\r\nContent-Disposition: form-data; name="file"; filename="big.bin"\r\n\r\n'
        for _ in range(10):
            sent.append(MB)
            yield os.urandom(MB)
        yield b"\r\n--b--\r\n"

    headers = {"content-type": "multipart/form-data; boundary=b"}
    answer = await anonymous.post(f"/api/v1/work-orders/{order.id}/attachments", content=body(), headers=headers)

    assert answer.status_code == 401 and answer.json()["error"]["code"] == "UNAUTHORIZED"
    assert sum(sent) <= MB  # not read: at most what the transport took before the answer


async def test_a_form_without_its_file_or_with_two_is_told_what_to_send(make_user, make_order, client_for, db):
    sam = await make_user()
    order = await make_order(sam)
    client = await client_for(sam)
    url = f"/api/v1/work-orders/{order.id}/attachments"

    none = await client.post(url, data={"note": "the file is missing"}, files={"other": ("a.txt", b"hi")})
    two = await client.post(url, files=[("file", ("a.pdf", b"%PDF-1")), ("file", ("b.pdf", b"%PDF-2"))])
    extra = await client.post(url, data={"note": "kept aside"}, files=_files("a.pdf", b"%PDF-1.7", "application/pdf"))

    for refused in (none, two):
        assert refused.status_code == 400 and refused.json()["error"]["details"]["fields"][0]["field"] == "file"
        assert "a field named `file`" in refused.json()["error"]["message"]
    assert extra.status_code == 201  # a field beside the file is no harm
    assert len(await _stored_files(db)) == 1
