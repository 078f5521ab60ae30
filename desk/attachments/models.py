"""What the API says about an attached file."""

from datetime import datetime

from pydantic import Field

from desk.schema import IdStr, ReadModel

MAX_PER_ORDER = 20


class AttachmentRead(ReadModel):
    """A file on a work order. `contentType` is what the desk found the file to be, not what its sender said;
    `hasThumbnail` turns true once the worker has made one (pictures only)."""

    id: IdStr = Field(validation_alias="_id")
    name: str
    content_type: str
    size: int
    created_at: datetime
    uploaded_by: IdStr
    has_thumbnail: bool = False
