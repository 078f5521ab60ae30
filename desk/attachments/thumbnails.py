"""The worker's thumbnail job: one per picture attached, a WebP of at most 320 px, made off the web process."""

import asyncio
import tempfile
from datetime import timedelta

from bson import ObjectId
from PIL import Image

from desk import state
from desk.attachments import images
from desk.attachments import repository as repo
from desk.attachments.service import THUMBNAIL_TASK
from desk.jobs.table import Context, Done, Function, Job, Result, Skipped
from desk.work_orders import repository as orders_repo
from desk.work_orders.changes import record
from desk.work_orders.repository import parties

SPOOL_BYTES = 1024 * 1024  # a picture over this is read from the database to disk, not into memory


def tasks() -> list[Function]:
    # A large PNG decodes in seconds on a busy machine: the claim outlasts it. One at a time across the desk: a
    # picture of up to 80 megapixels decodes to hundreds of MB, and twenty attached at once must not all decode
    # together (the worker's pool has room for one beside its triage passes and emails: desk/tasks.py).
    return [Function(THUMBNAIL_TASK, make, lease=timedelta(seconds=60), desk_concurrency=1)]


async def make(ctx: Context, job: Job) -> Result:
    """Make the thumbnail of the attached picture `job.key`, and tell the order's open screens."""
    doc = await repo.get(ctx.db, job.key)
    if doc is None or doc.get("thumbnailId") is not None:
        return Skipped("file_gone" if doc is None else "made_already")
    chunks = await repo.opened(ctx.db, doc["fileId"])
    if chunks is None:
        return Skipped("file_gone")
    with tempfile.SpooledTemporaryFile(SPOOL_BYTES) as picture, tempfile.SpooledTemporaryFile(SPOOL_BYTES) as small:
        async for chunk in chunks:
            picture.write(chunk)
        picture.seek(0)
        try:
            await asyncio.to_thread(images.thumbnail, picture, small)
        except (OSError, ValueError, Image.DecompressionBombError) as error:
            # nothing a retry can mend: the file stays attached, shown by its name and type as any other file
            return Skipped(f"not_drawable ({type(error).__name__})")
        size = small.tell()
        small.seek(0)
        thumbnail_id = ObjectId()
        # named before its bytes are written, as an upload's file is: the sweep finds them should this worker die
        if not await repo.reserve_thumbnail(ctx.db, doc["_id"], thumbnail_id, state.current().clock.now()):
            return Skipped("file_gone")
        await repo.store(ctx.db, small, f"thumbnail of {doc['_id']}", thumbnail_id)
    if await repo.set_thumbnail(ctx.db, doc["_id"], thumbnail_id, size) is None:
        return Skipped("file_gone")
    order = await orders_repo.get(ctx.db, doc["workOrderId"])
    if order is not None:
        await record(ctx.db, order["_id"], "files", parties(order))
    return Done()
