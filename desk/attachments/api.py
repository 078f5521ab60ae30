"""/api/v1/work-orders/{id}/attachments and /api/v1/attachments/{id}: thin routes over the attachments service."""

from collections.abc import AsyncIterator
from urllib.parse import quote

from fastapi import APIRouter, Request, Response, status
from fastapi.responses import StreamingResponse
from starlette.datastructures import UploadFile  # what a parsed form holds (FastAPI's is a subclass)
from starlette.exceptions import HTTPException  # what a form that cannot be parsed raises (FastAPI's is a subclass)
from starlette.formparsers import MultiPartException

from desk.attachments import images, service, sniff
from desk.attachments.models import AttachmentRead
from desk.errors import ErrorCode, ValidationFailed
from desk.http import AUTHED, CurrentActor, Db, errors

orders_router = APIRouter(prefix="/api/v1/work-orders", tags=["attachments"])
router = APIRouter(prefix="/api/v1/attachments", tags=["attachments"])
MISSING = (*AUTHED, ErrorCode.NOT_FOUND)
TOO_LARGE = {413: {"description": "VALIDATION_ERROR: the file is over DESK_MAX_ATTACHMENT_MB, or the order is full"}}
READ_BYTES = 1024 * 1024
FILE = {200: {"content": {kind: {} for kind in sniff.KINDS}, "description": "The file's bytes, as an attachment"}}
THUMBNAIL = {200: {"content": {images.THUMBNAIL_TYPE: {}}, "description": "A WebP of at most 320 px"}}
NOT_CLEANABLE = {415: {"description": "VALIDATION_ERROR: a HEIC photo, whose location the desk cannot take out"}}
FORM = {
    "type": "object",
    "required": ["file"],
    "properties": {"file": {"type": "string", "format": "binary"}},
    "additionalProperties": False,
}
NO_FILE = "Send the file as multipart form data, in a field named `file` (one file)."


@orders_router.post(
    "/{order_id}/attachments",
    status_code=201,
    response_model=AttachmentRead,
    responses=errors(*MISSING, ErrorCode.RATE_LIMITED) | TOO_LARGE | NOT_CLEANABLE,
    openapi_extra={"requestBody": {"required": True, "content": {"multipart/form-data": {"schema": FORM}}}},
)
async def attach(order_id: str, request: Request, db: Db, actor: CurrentActor) -> AttachmentRead:
    """Attach a file (multipart, field `file`; at most DESK_MAX_ATTACHMENT_MB, 20 per order): anyone who can
    change or comment on the order, not viewers. Its type is found from its bytes; JPEG, PNG and WebP are kept
    without their metadata (no GPS position), a HEIC photo is refused (415); a picture's thumbnail follows
    shortly (`hasThumbnail`)."""
    # The form is read here, once the caller is known: as a `File()` parameter, FastAPI read (and spooled to
    # disk) a whole body of anyone's, 10 MB, before it answered 401.
    try:
        async with request.form(max_files=1, max_fields=10) as form:  # its spooled file is closed on the way out
            file = form.get("file")
            if not isinstance(file, UploadFile):
                raise ValidationFailed(NO_FILE, details={"field": "file"})
            return await service.upload(db=db, actor=actor, order_id=order_id, name=file.filename, chunks=_chunks(file))
    except HTTPException as error:
        if error.status_code != 400:  # the body over its limit (413) stays what it is
            raise
        raise ValidationFailed(NO_FILE, details={"field": "file"}) from error  # malformed, or more than one file
    except (MultiPartException, ValueError) as error:
        raise ValidationFailed(NO_FILE, details={"field": "file"}) from error


@orders_router.get("/{order_id}/attachments", response_model=list[AttachmentRead], responses=errors(*MISSING))
async def of_order(order_id: str, db: Db, actor: CurrentActor) -> list[AttachmentRead]:
    """The order's files, oldest first."""
    return await service.of_order(db=db, actor=actor, order_id=order_id)


@router.get("/{attachment_id}", response_class=StreamingResponse, responses=FILE | errors(*MISSING))
async def download(attachment_id: str, db: Db, actor: CurrentActor) -> StreamingResponse:
    """The file, always as a download (`Content-Disposition: attachment`); HTML, SVG and anything else the desk
    does not know as a safe type come as application/octet-stream."""
    return _sent(await service.download(db=db, actor=actor, attachment_id=attachment_id))


@router.get("/{attachment_id}/thumbnail", response_class=StreamingResponse, responses=THUMBNAIL | errors(*MISSING))
async def thumbnail(attachment_id: str, db: Db, actor: CurrentActor) -> StreamingResponse:
    """A picture's thumbnail (WebP, at most 320 px); 404 until the worker has made it."""
    found = await service.download(db=db, actor=actor, attachment_id=attachment_id, thumbnail=True)
    # a thumbnail never changes (a file's id is its content's): kept by the browser, every redraw of a page's
    # gallery or timeline does not fetch each again
    return _sent(found, name=f"thumbnail-{found.file.name}.webp", cache="private, max-age=86400, immutable")


@router.delete(
    "/{attachment_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    response_class=Response,
    responses=errors(*MISSING, ErrorCode.RATE_LIMITED),
)
async def delete(attachment_id: str, db: Db, actor: CurrentActor) -> None:
    """Delete a file: whoever attached it, the order's owner or an admin."""
    await service.delete(db=db, actor=actor, attachment_id=attachment_id)


async def _chunks(file: UploadFile) -> AsyncIterator[bytes]:
    while chunk := await file.read(READ_BYTES):  # Starlette spooled it to disk: read a block at a time
        yield chunk


def _sent(found: service.Download, *, name: str | None = None, cache: str = "private, no-store") -> StreamingResponse:
    headers = {
        "Content-Length": str(found.size),
        "Content-Disposition": disposition(name or found.file.name),
        "X-Content-Type-Options": "nosniff",
        # should a browser render it anyway, nothing in it runs, loads or reaches the desk's origin
        "Content-Security-Policy": "default-src 'none'; sandbox",
        "Cache-Control": cache,
    }
    return StreamingResponse(found.chunks, media_type=found.content_type, headers=headers)


def disposition(name: str) -> str:
    """`attachment`, with an ASCII name for old clients and the real one in RFC 5987's `filename*`."""
    plain = "".join(c if c.isascii() and c.isprintable() and c not in '"\\;%' else "_" for c in name)
    return f"attachment; filename=\"{plain}\"; filename*=UTF-8''{quote(name, safe='')}"
