"""Attach files to work orders, list, download and delete them: who may, and what is kept.

Whoever can see an order can download its files; whoever can change it or comment on it (anyone but a
viewer) can attach; the uploader, the order's owner and admins can delete. Anyone else is told the
order (or the file) does not exist, as for the order itself.
"""

import asyncio
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass
from functools import partial
from typing import Any, BinaryIO

from bson import ObjectId
from pymongo.asynchronous.database import AsyncDatabase

from desk import state
from desk.actors import Actor
from desk.attachments import images, sniff
from desk.attachments import repository as repo
from desk.attachments.models import MAX_PER_ORDER, AttachmentRead
from desk.auth import write_limit
from desk.config import get_settings
from desk.errors import Forbidden, NotFound, ValidationFailed
from desk.jobs import queue
from desk.schema import by_id, now
from desk.work_orders import service as orders
from desk.work_orders.models import WorkOrderRead

THUMBNAIL_TASK = "attachments.thumbnail"
STRIPPED = frozenset({sniff.JPEG, sniff.PNG, sniff.WEBP})  # rewritten without metadata before they are kept
MiB = 1024 * 1024


class NotCleanable(ValidationFailed):
    """A photo format whose metadata (a phone's GPS position) the desk cannot take out: 415, nothing kept."""

    @property
    def status(self) -> int:
        return 415


class TooLarge(ValidationFailed):
    """A file over DESK_MAX_ATTACHMENT_MB, or one more than an order holds: 413, nothing kept."""

    @property
    def status(self) -> int:
        return 413


@dataclass(frozen=True)
class Download:
    """A stored file as it is sent: what it is, and its bytes a chunk at a time."""

    file: AttachmentRead
    content_type: str
    size: int
    chunks: AsyncIterator[bytes]


async def upload(
    *, db: AsyncDatabase, actor: Actor, order_id: str, name: str | None, chunks: AsyncIterator[bytes]
) -> AttachmentRead:
    """Attach the file arriving in `chunks` to an order: received to disk, typed by its bytes, a photo stripped of
    its metadata, then stored whole; TooLarge past DESK_MAX_ATTACHMENT_MB or MAX_PER_ORDER files."""
    order = await _order_to_attach(db, actor, order_id)
    await _room_for_one_more(db, order)
    await write_limit.admit(db=db, actor=actor)
    name = sniff.file_name(name)
    with tempfile.TemporaryFile() as received, tempfile.TemporaryFile() as cleaned:
        size = await _receive(chunks, received)
        received.seek(0)
        kind = sniff.content_type(received.read(sniff.HEAD_BYTES))
        received.seek(0)
        kept: BinaryIO = received
        if kind == sniff.HEIC:  # Pillow reads it only with a plugin the desk does not have: refused, not kept as sent
            raise NotCleanable(
                "A HEIC photo cannot be cleaned of its location here, so it was not saved. Send it as a JPEG "
                "(an iPhone does when its camera's format is set to Most Compatible)."
            )
        if kind in STRIPPED:
            await asyncio.to_thread(images.strip, kind, received, cleaned)
            size, kept = cleaned.tell(), cleaned
            cleaned.seek(0)
        doc = {
            "workOrderId": ObjectId(order.id),
            "name": name,
            "contentType": kind,
            "size": size,
            "fileId": ObjectId(),
            "thumbnailId": None,
            "uploadedBy": ObjectId(actor.id),
            "createdAt": now(),
            # the Desk's clock, which the worker's sweep reads (repo.sweep_pending): a test moves it past the hour
            "pendingSince": state.current().clock.now(),
        }
        # the record before the bytes: should the process die between them, the sweep finds the bytes by it
        stored = await repo.insert(db, doc)
        try:
            if await repo.count(db, stored["workOrderId"]) > MAX_PER_ORDER:  # two uploads raced for the last place
                raise _full()
            await repo.store(db, kept, name, stored["fileId"])
            if not await repo.confirm(db, stored["_id"]):  # pending for over an hour, and swept
                raise NotFound("This upload took too long and was given up; nothing was saved.")
        except BaseException:
            await repo.delete(db, stored["_id"])
            raise
    del stored["pendingSince"]
    if kind in sniff.PICTURES:
        await queue.enqueue(db, THUMBNAIL_TASK, stored["_id"], at=state.current().clock.now())  # the worker's time
    await orders.note_file(db=db, actor=actor, order_id=order.id, action="attached", file=stored)
    return read_model(stored)


async def of_order(*, db: AsyncDatabase, actor: Actor, order_id: str) -> list[AttachmentRead]:
    """The files of an order the actor may see, oldest first."""
    order = await orders.get_or_raise(db=db, actor=actor, order_id=order_id)
    return [read_model(doc) for doc in await repo.of_order(db, ObjectId(order.id))]


async def download(*, db: AsyncDatabase, actor: Actor, attachment_id: str, thumbnail: bool = False) -> Download:
    """A file (or its thumbnail) of an order the actor may see; NotFound otherwise, or while it has no thumbnail."""
    doc, _ = await _visible(db, actor, attachment_id)
    if not thumbnail:
        kind, size, file_id = doc["contentType"], doc["size"], doc["fileId"]
    elif doc.get("thumbnailId") is None:
        raise NotFound("This file has no thumbnail (yet: the desk makes one for each picture, shortly after upload).")
    else:
        kind, size, file_id = images.THUMBNAIL_TYPE, doc.get("thumbnailSize", 0), doc["thumbnailId"]
    chunks = await repo.opened(db, file_id)
    if chunks is None:  # deleted since its record was read
        raise NotFound("No such file.")
    return Download(read_model(doc), kind, size, chunks)


async def delete(*, db: AsyncDatabase, actor: Actor, attachment_id: str) -> None:
    """Delete a file: its uploader, the order's owner or an admin."""
    doc, order = await _visible(db, actor, attachment_id)
    if not may_delete(actor, order, doc):
        raise Forbidden("Only whoever attached this file, the work order's owner or an admin can delete it.")
    await write_limit.admit(db=db, actor=actor)
    gone = await repo.delete(db, doc["_id"])
    if gone is not None:
        await orders.note_file(db=db, actor=actor, order_id=order.id, action="detached", file=gone)


def may_attach(actor: Actor) -> bool:
    """Whether the actor may attach files to an order they can see: anyone who can change or comment on it,
    not a viewer (viewers read only)."""
    return actor.is_human and actor.can_write


def may_delete(actor: Actor, order: WorkOrderRead, file: dict[str, Any] | AttachmentRead) -> bool:
    """Whether the actor may delete this file of an order they can see (pages ask it what to offer)."""
    uploader = str(file["uploadedBy"]) if isinstance(file, dict) else file.uploaded_by
    return actor.can_write and (actor.is_admin or actor.id in (uploader, order.owner_id))


async def names_and_sizes(*, db: AsyncDatabase, actor: Actor, orders_seen: list[WorkOrderRead]) -> dict[str, list]:
    """The files of orders the actor has seen, by order id, as name and size alone (what the copilot is told)."""
    docs = await repo.of_orders(db, [ObjectId(order.id) for order in orders_seen]) if orders_seen else []
    found: dict[str, list] = {}
    for doc in docs:
        found.setdefault(str(doc["workOrderId"]), []).append({"name": doc["name"], "size": doc["size"]})
    return found


def read_model(doc: dict[str, Any]) -> AttachmentRead:
    return AttachmentRead.model_validate({**doc, "hasThumbnail": doc.get("thumbnailId") is not None})


async def _order_to_attach(db: AsyncDatabase, actor: Actor, order_id: str) -> WorkOrderRead:
    order = await orders.get_or_raise(db=db, actor=actor, order_id=order_id)
    if not may_attach(actor):
        raise Forbidden("Viewers cannot attach files to work orders.")
    return order


async def _room_for_one_more(db: AsyncDatabase, order: WorkOrderRead) -> None:
    if await repo.count(db, ObjectId(order.id)) >= MAX_PER_ORDER:
        raise _full()


def _full() -> TooLarge:
    return TooLarge(f"A work order holds at most {MAX_PER_ORDER} files; delete one to attach another.")


async def _receive(chunks: AsyncIterator[bytes], target: BinaryIO) -> int:
    """Write the arriving file to `target` on disk; its size, TooLarge as soon as it is over the limit."""
    megabytes = get_settings().desk_max_attachment_mb
    size = 0
    async for chunk in chunks:
        size += len(chunk)
        if size > megabytes * MiB:
            raise TooLarge(f"The file is over {megabytes} MB; nothing was saved.")
        target.write(chunk)
    return size


async def _visible(db: AsyncDatabase, actor: Actor, attachment_id: str) -> tuple[dict[str, Any], WorkOrderRead]:
    """A file and its order, when the actor may see the order; NotFound otherwise."""
    doc = await by_id(attachment_id, partial(repo.get, db))
    order = await orders.get(db=db, actor=actor, order_id=str(doc["workOrderId"])) if doc else None
    if doc is None or order is None:
        raise NotFound("No such file.")
    return doc, order
