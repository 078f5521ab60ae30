"""Photos kept without what they tell about where and by whom they were taken, and their thumbnails.

JPEG and PNG are rewritten a segment at a time, keeping only what draws the picture (the compressed
image, its tables, its colour profile): no EXIF (GPS position, camera serial), XMP, IPTC or comments.
The picture itself is copied, not decoded: no quality is lost, and a 10 MB photo never needs the
hundred-odd MB its pixels would take. A JPEG's orientation is kept (a minimal EXIF with that one tag),
or a portrait photo would show on its side. WebP is decoded and encoded again by Pillow, without
metadata. Each function works from one file to another, so a file is never held whole in memory.
"""

from typing import BinaryIO

from PIL import Image, ImageOps

from desk.attachments import sniff
from desk.errors import ValidationFailed

THUMBNAIL_PX = 320
THUMBNAIL_TYPE = "image/webp"
# Pillow refuses (DecompressionBombError) an image with more pixels than this: a small file that decodes huge.
Image.MAX_IMAGE_PIXELS = 40_000_000  # refused beyond twice this (80 MP): a phone's photo is 12 to 50
# An animated WebP is decoded frame by frame to be written again: its frames' pixels together are bounded too
# (a 10 MB file of small delta frames on a large canvas would keep a thread busy for minutes).
MAX_ANIMATION_PIXELS = 100_000_000
BLOCK = 64 * 1024
ORIENTATION = 0x0112


class Damaged(ValidationFailed):
    """The file has an image's signature but not its structure."""


class TooManyFrames(ValidationFailed):
    """An animated picture whose frames together are more than the desk decodes to clean it."""


def strip(kind: str, source: BinaryIO, target: BinaryIO) -> None:
    """Copy the image in `source` to `target` without its metadata (`kind`: its sniffed type)."""
    try:
        if kind == sniff.JPEG:
            _strip_jpeg(_Reader(source), target)
        elif kind == sniff.PNG:
            _strip_png(_Reader(source), target)
        elif kind == sniff.WEBP:
            _reencode_webp(source, target)
        else:
            raise AssertionError(kind)
    except (EOFError, ValueError, OSError, Image.DecompressionBombError) as error:
        what = sniff.KINDS[kind]
        raise Damaged(f"This file starts like a {what} but cannot be read as one; nothing was saved.") from error


def thumbnail(source: BinaryIO, target: BinaryIO) -> None:
    """A WebP at most THUMBNAIL_PX on its longer side, upright, of the (first frame of the) image in `source`."""
    with Image.open(source) as image:
        image.draft("RGB", (THUMBNAIL_PX * 2, THUMBNAIL_PX * 2))  # a JPEG decodes at 1/2 to 1/8 scale: less memory
        upright = ImageOps.exif_transpose(image)
        upright.thumbnail((THUMBNAIL_PX, THUMBNAIL_PX))
        mode = "RGBA" if upright.mode in ("RGBA", "LA", "P", "PA") else "RGB"
        upright.convert(mode).save(target, "WEBP", quality=80)


# --- JPEG ---

SOI, EOI, SOS, COM = 0xD8, 0xD9, 0xDA, 0xFE
APP0, APP1, APP2, APP14, APP15 = 0xE0, 0xE1, 0xE2, 0xEE, 0xEF
STANDALONE = {0x01, *range(0xD0, 0xD8)}  # TEM and the restart markers carry no length


def _strip_jpeg(reader: "_Reader", target: BinaryIO) -> None:
    if reader.exactly(2) != b"\xff\xd8":
        raise ValueError("no SOI")
    target.write(b"\xff\xd8")
    while True:
        marker = reader.marker()
        if marker == EOI:
            target.write(b"\xff\xd9")
            return
        if marker in STANDALONE:
            target.write(bytes((0xFF, marker)))
            continue
        length = int.from_bytes(reader.exactly(2), "big")
        if length < 2:
            raise ValueError("bad segment length")
        payload = reader.exactly(length - 2)
        if _keeps(marker, payload):
            target.write(bytes((0xFF, marker)) + length.to_bytes(2, "big") + payload)
        elif marker == APP1 and payload.startswith(b"Exif\x00\x00"):
            target.write(_orientation_only(payload))
        if marker == SOS:
            reader.copy_scan(target)  # the compressed picture, up to the next marker


def _keeps(marker: int, payload: bytes) -> bool:
    """Whether a segment draws the picture: tables, frame and scan headers, JFIF, the colour profile, Adobe's
    colour transform. Not EXIF, XMP, IPTC, comments or any other application's segment."""
    if marker == COM:
        return False
    if APP0 <= marker <= APP15:
        return (
            (marker == APP0 and payload.startswith(b"JFIF\x00"))
            or (marker == APP2 and payload.startswith(b"ICC_PROFILE\x00"))
            or (marker == APP14 and payload.startswith(b"Adobe"))
        )
    return True


def _orientation_only(payload: bytes) -> bytes:
    """An APP1 segment whose EXIF holds the orientation alone, or nothing when the photo is upright already."""
    exif = Image.Exif()
    try:
        exif.load(payload)
        orientation = exif.get(ORIENTATION)
    except Exception:  # metadata that cannot be read is dropped whole, as any other would be
        return b""
    if orientation not in range(2, 9):
        return b""
    kept = Image.Exif()
    kept[ORIENTATION] = orientation
    data = kept.tobytes()  # b"Exif\0\0" and a TIFF header with the one tag
    return b"\xff\xe1" + (len(data) + 2).to_bytes(2, "big") + data


# --- PNG ---

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# What draws the picture (and its animation): text chunks, eXIf, tIME and any private chunk are left out.
PNG_KEPT = {b"IHDR", b"PLTE", b"IDAT", b"IEND", b"tRNS", b"cHRM", b"gAMA", b"iCCP", b"sBIT", b"sRGB", b"cICP"}
PNG_KEPT |= {b"pHYs", b"bKGD", b"hIST", b"acTL", b"fcTL", b"fdAT", b"mDCv", b"cLLi"}


def _strip_png(reader: "_Reader", target: BinaryIO) -> None:
    if reader.exactly(8) != PNG_SIGNATURE:
        raise ValueError("no PNG signature")
    target.write(PNG_SIGNATURE)
    while True:
        header = reader.exactly(8)
        length, kind = int.from_bytes(header[:4], "big"), header[4:]
        if kind in PNG_KEPT:
            target.write(header)
            reader.copy(length + 4, target)  # the data and its CRC, in blocks
        else:
            reader.skip(length + 4)
        if kind == b"IEND":
            return


# --- WebP ---


def _reencode_webp(source: BinaryIO, target: BinaryIO) -> None:
    with Image.open(source) as image:
        animated = getattr(image, "is_animated", False)
        if animated and image.n_frames * image.width * image.height > MAX_ANIMATION_PIXELS:
            raise TooManyFrames("This animation has too many frames to be cleaned of its metadata.")
        upright = image if animated else ImageOps.exif_transpose(image)  # its orientation goes with its EXIF
        # no exif, xmp or icc_profile given: Pillow writes none
        upright.save(target, "WEBP", quality=90, save_all=animated, exif=b"", xmp=b"")


class _Reader:
    """Reads a file forwards with a little lookahead, in blocks: the marker search of a JPEG's scan."""

    def __init__(self, source: BinaryIO) -> None:
        self.source, self.buffer = source, b""

    def exactly(self, count: int) -> bytes:
        while len(self.buffer) < count:
            block = self.source.read(max(BLOCK, count - len(self.buffer)))
            if not block:
                raise EOFError("the file ends too soon")
            self.buffer += block
        taken, self.buffer = self.buffer[:count], self.buffer[count:]
        return taken

    def copy(self, count: int, target: BinaryIO) -> None:
        while count:
            part = self.exactly(min(count, BLOCK))
            target.write(part)
            count -= len(part)

    def skip(self, count: int) -> None:
        while count:
            count -= len(self.exactly(min(count, BLOCK)))

    def marker(self) -> int:
        if self.exactly(1) != b"\xff":
            raise ValueError("no marker where one must be")
        while (byte := self.exactly(1)[0]) == 0xFF:  # fill bytes
            pass
        return byte

    def copy_scan(self, target: BinaryIO) -> None:
        """Copy entropy-coded data up to (not including) the next marker: an 0xFF followed by neither a stuffed
        zero nor a restart marker."""
        while True:
            if not self.buffer:
                self.buffer = self.source.read(BLOCK)
                if not self.buffer:
                    raise EOFError("the scan has no end")
            at = self.buffer.find(b"\xff")
            while at != -1 and at + 1 < len(self.buffer) and self.buffer[at + 1] in STUFFED_OR_RESTART:
                at = self.buffer.find(b"\xff", at + 2)
            if at == -1:
                target.write(self.buffer)
                self.buffer = b""
            elif at + 1 == len(self.buffer):  # the byte after 0xFF is in the next block
                target.write(self.buffer[:at])
                self.buffer = self.buffer[at:] + self.source.read(BLOCK)
                if len(self.buffer) == 1:
                    raise EOFError("the scan has no end")
            else:
                target.write(self.buffer[:at])
                self.buffer = self.buffer[at:]
                return


STUFFED_OR_RESTART = frozenset({0x00, *range(0xD0, 0xD8)})
