"""The `attachments` collection (what is known of each file) and the GridFS bucket that holds their bytes.

A file's bytes go in GridFS (`attachment_files.files` / `.chunks`), written whole from a file on disk once every
check has passed, so a refused upload leaves nothing behind. Its record goes in `attachments` before them,
marked `pendingSince`, and loses the mark once they are written: a process that dies between the two leaves a
pending record naming the bytes, which `sweep_pending` deletes (record and bytes) an hour on, rather than bytes
nothing names. A pending record is never listed or served. The bucket is used only through its own operations
(upload with an id, download, delete by id), and ids are kept in the records rather than in GridFS metadata: the
embedded server keeps GridFS in tables of its own, where a query on `.files`/`.chunks` or metadata holding an
ObjectId is refused, and deleting an id it does not hold is an error where MongoDB says "no such file".
"""

from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any, BinaryIO

from bson import ObjectId
from gridfs import AsyncGridFSBucket
from gridfs.asynchronous import grid_file
from gridfs.errors import NoFile
from pymongo import ASCENDING
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import OperationFailure

Doc = dict[str, Any]
KEPT = {"pendingSince": {"$exists": False}}  # a file whose bytes are written: what is listed and served
BUCKET = "attachment_files"
CHUNK_BYTES = 255 * 1024  # GridFS's own default: a download is read and sent a chunk at a time
# pymongo holds an upload's chunks until 48 MB have gathered (fewer round trips), so a 10 MB photo was held whole
# and then once more as the insert's BSON. Sent a megabyte at a time instead.
# Its module's constant, read at each write: the one way to set it, for this process's every GridFS upload.
grid_file._UPLOAD_BUFFER_SIZE = 1024 * 1024


def _attachments(db: AsyncDatabase):
    return db["attachments"]


def _bucket(db: AsyncDatabase) -> AsyncGridFSBucket:
    return AsyncGridFSBucket(db, bucket_name=BUCKET, chunk_size_bytes=CHUNK_BYTES)


async def ensure_indexes(db: AsyncDatabase) -> None:
    await _attachments(db).create_index([("workOrderId", ASCENDING), ("createdAt", ASCENDING)], name="order")


async def store(db: AsyncDatabase, source: BinaryIO, name: str, file_id: ObjectId | None = None) -> ObjectId:
    """Write the bytes of `source` (from where it stands) into GridFS, under `file_id` or a new id; that id."""
    file_id = file_id or ObjectId()
    await _bucket(db).upload_from_stream_with_id(file_id, name, source)
    return file_id


async def opened(db: AsyncDatabase, file_id: ObjectId) -> AsyncIterator[bytes] | None:
    """The stored bytes, opened now and read a GridFS chunk at a time; None when they are gone (deleted since the
    record was read). Opened before an answer's headers go out: a file deleted meanwhile is a 404, not a 200 whose
    body breaks off."""
    try:
        stream = await _bucket(db).open_download_stream(file_id)
    except NoFile:
        return None
    return _read(stream)


async def _read(stream: Any) -> AsyncIterator[bytes]:
    try:
        while chunk := await stream.readchunk():
            yield chunk
    finally:
        await stream.close()


async def discard(db: AsyncDatabase, *file_ids: ObjectId | None) -> None:
    """Delete these stored files' bytes; bytes never written (a pending record's) are no error."""
    for file_id in file_ids:
        if file_id is None:
            continue
        try:
            await _bucket(db).delete(file_id)
        except NoFile:  # MongoDB: its chunks, if any were written, are deleted all the same
            pass
        except OperationFailure as error:  # the embedded server's "File with id ... not found"
            if "not found" not in str(error):
                raise


async def insert(db: AsyncDatabase, doc: Doc) -> Doc:
    doc["_id"] = (await _attachments(db).insert_one(doc)).inserted_id
    return doc


async def confirm(db: AsyncDatabase, attachment_id: ObjectId) -> bool:
    """A pending file's bytes are written: it is listed from now on. False when the sweep deleted it meanwhile."""
    done = await _attachments(db).update_one({"_id": attachment_id}, {"$unset": {"pendingSince": ""}})
    return done.matched_count == 1


async def sweep_pending(db: AsyncDatabase, before: datetime) -> int:
    """Delete the files left pending since before `before` (their upload died with its process), and the bytes of
    thumbnails begun before it and never recorded (the worker died making them); how many."""
    swept = 0
    for doc in await _attachments(db).find({"pendingSince": {"$lt": before}}).to_list():
        # the bytes first: should this stop half-way, the record still names them for the next sweep
        await discard(db, doc["fileId"], (doc.get("pendingThumbnail") or {}).get("id"))
        swept += (await _attachments(db).delete_one({"_id": doc["_id"], "pendingSince": {"$lt": before}})).deleted_count
    for doc in await _attachments(db).find({"pendingThumbnail.since": {"$lt": before}}).to_list():
        died = doc["pendingThumbnail"]
        await discard(db, died["id"])
        gone = await _attachments(db).update_one(
            {"_id": doc["_id"], "pendingThumbnail.id": died["id"]}, {"$unset": {"pendingThumbnail": ""}}
        )
        swept += gone.modified_count
    return swept


async def get(db: AsyncDatabase, attachment_id: ObjectId) -> Doc | None:
    return await _attachments(db).find_one({"_id": attachment_id, **KEPT})


async def of_order(db: AsyncDatabase, order_id: ObjectId) -> list[Doc]:
    """An order's files, oldest first (at most MAX_PER_ORDER)."""
    return await _attachments(db).find({"workOrderId": order_id, **KEPT}).sort("createdAt", ASCENDING).to_list()


async def of_orders(db: AsyncDatabase, order_ids: list[ObjectId]) -> list[Doc]:
    found = _attachments(db).find({"workOrderId": {"$in": order_ids}, **KEPT})
    return await found.sort("createdAt", ASCENDING).to_list()


async def count(db: AsyncDatabase, order_id: ObjectId) -> int:
    """An order's files, pending ones included: an upload under way holds its place."""
    return await _attachments(db).count_documents({"workOrderId": order_id})


async def reserve_thumbnail(db: AsyncDatabase, attachment_id: ObjectId, thumbnail_id: ObjectId, at: datetime) -> bool:
    """Name the thumbnail about to be written (`pendingThumbnail`), so that the sweep finds its bytes should the
    worker die before `set_thumbnail`; a try that died before this one has its bytes deleted. False: the file went,
    or has its thumbnail."""
    before = await _attachments(db).find_one_and_update(
        {"_id": attachment_id, "thumbnailId": None, **KEPT},
        {"$set": {"pendingThumbnail": {"id": thumbnail_id, "since": at}}},
    )
    if before is not None and (died := before.get("pendingThumbnail")):
        await discard(db, died["id"])
    return before is not None


async def set_thumbnail(db: AsyncDatabase, attachment_id: ObjectId, thumbnail_id: ObjectId, size: int) -> Doc | None:
    """Record a made thumbnail; None (and the thumbnail's bytes deleted) when the file went meanwhile."""
    found = await _attachments(db).find_one_and_update(
        {"_id": attachment_id, "thumbnailId": None},
        {"$set": {"thumbnailId": thumbnail_id, "thumbnailSize": size}, "$unset": {"pendingThumbnail": ""}},
    )
    if found is None:
        await discard(db, thumbnail_id)
    return found


async def delete(db: AsyncDatabase, attachment_id: ObjectId) -> Doc | None:
    """Delete a file, record and bytes (its thumbnail's too); what was deleted, None when it was gone already."""
    gone = await _attachments(db).find_one_and_delete({"_id": attachment_id})
    if gone is not None:
        await discard(db, gone["fileId"], gone.get("thumbnailId"), (gone.get("pendingThumbnail") or {}).get("id"))
    return gone


async def delete_of_order(db: AsyncDatabase, order_id: ObjectId) -> list[Doc]:
    """Delete every file of an order (a deleted order's); what was deleted."""
    deleted = []
    for doc in await _attachments(db).find({"workOrderId": order_id}).sort("createdAt", ASCENDING).to_list():
        gone = await delete(db, doc["_id"])  # pending ones too, unnamed: no upload finishes on a deleted order
        if gone is not None and "pendingSince" not in gone:
            deleted.append(gone)
    return deleted
