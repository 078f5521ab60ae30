"""What a file is, from its first bytes: never from the name or the Content-Type its sender gave.

An allowlist: the kinds below are named for what they are; everything else (HTML, SVG, scripts, text
that a browser might sniff as markup) is `application/octet-stream`, which no browser renders.
"""

import re
import unicodedata

HEAD_BYTES = 32  # enough for every signature below
OCTET_STREAM = "application/octet-stream"
JPEG, PNG, WEBP, GIF, HEIC = "image/jpeg", "image/png", "image/webp", "image/gif", "image/heic"
PDF, ZIP = "application/pdf", "application/zip"
# what the worker makes a thumbnail of (HEIC is refused at upload: see service.upload)
PICTURES = frozenset({JPEG, PNG, WEBP, GIF})
HEIF_BRANDS = (b"heic", b"heix", b"hevc", b"heim", b"heis", b"mif1", b"msf1")

KINDS = {JPEG: "JPEG image", PNG: "PNG image", WEBP: "WebP image", GIF: "GIF image", HEIC: "HEIC image"}
KINDS |= {PDF: "PDF document", ZIP: "ZIP archive (or an office document)", OCTET_STREAM: "File"}


SIGNATURES = (  # (what the file is, whether its first bytes say so)
    (JPEG, lambda head: head.startswith(b"\xff\xd8\xff")),
    (PNG, lambda head: head.startswith(b"\x89PNG\r\n\x1a\n")),
    (WEBP, lambda head: head[:4] == b"RIFF" and head[8:12] == b"WEBP"),
    (GIF, lambda head: head[:6] in (b"GIF87a", b"GIF89a")),
    (HEIC, lambda head: head[4:8] == b"ftyp" and head[8:12] in HEIF_BRANDS),
    (PDF, lambda head: head.startswith(b"%PDF-")),
    (ZIP, lambda head: head.startswith(b"PK\x03\x04")),
)


def content_type(head: bytes) -> str:
    """The type the desk stores and serves a file as, from its first HEAD_BYTES bytes."""
    return next((kind for kind, says_so in SIGNATURES if says_so(head)), OCTET_STREAM)


MAX_NAME = 200
_UNSAFE = re.compile(r"[\x00-\x1f\x7f/\\]")


def file_name(given: str | None) -> str:
    """The name a file is listed and downloaded under: its last path part, no control characters, not too long."""
    name = unicodedata.normalize("NFC", given or "").replace("\\", "/").rsplit("/", 1)[-1]
    name = _UNSAFE.sub("_", name)
    # no invisible formatting (category Cf: a right-to-left override shows "invoice\u202efdp.exe" as
    # "invoiceexe.pdf"), nor line or paragraph separators (Zl, Zp)
    name = "".join(char for char in name if unicodedata.category(char) not in ("Cf", "Zl", "Zp"))
    name = name.strip().lstrip(".") or "file"
    if len(name) > MAX_NAME:
        stem, dot, ext = name.rpartition(".")
        name = (stem[: MAX_NAME - len(ext) - 1] + dot + ext) if dot and len(ext) <= 10 else name[:MAX_NAME]
    return name
