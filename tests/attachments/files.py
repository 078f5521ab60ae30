"""Real files for the attachment tests, made with Pillow as a phone or a browser would send them."""

import io

from PIL import Image, PngImagePlugin

GPS_IFD = 0x8825
ORIENTATION = 0x0112
MAKE = 0x010F


def phone_exif() -> Image.Exif:
    """EXIF as a phone writes it: the camera, the GPS position and a sideways orientation."""
    exif = Image.Exif()
    exif[MAKE] = "PhoneMaker"
    exif[ORIENTATION] = 6  # held upright: the pixels lie on their side
    gps = exif.get_ifd(GPS_IFD)
    gps.update({1: "N", 2: (52.0, 31.0, 12.0), 3: "E", 4: (13.0, 24.0, 36.0)})
    return exif


def phone_jpeg(size: tuple[int, int] = (1600, 1200)) -> bytes:
    """A photo as a phone takes it, with a comment too."""
    out = io.BytesIO()
    Image.new("RGB", size, (180, 90, 40)).save(out, "JPEG", exif=phone_exif(), quality=90, comment=b"taken at home")
    return out.getvalue()


def png(size: tuple[int, int] = (640, 480), *, tagged: bool = False) -> bytes:
    """A PNG; `tagged`: with EXIF (eXIf) and a text chunk naming where it was made."""
    out = io.BytesIO()
    info = PngImagePlugin.PngInfo()
    if tagged:
        info.add_text("Location", "Kitchen, 12 Elm Street")
    extra = {"exif": phone_exif()} if tagged else {}
    Image.new("RGBA", size, (20, 120, 220, 200)).save(out, "PNG", pnginfo=info, **extra)
    return out.getvalue()


def webp(size: tuple[int, int] = (640, 480)) -> bytes:
    """A WebP with a phone's EXIF."""
    out = io.BytesIO()
    Image.new("RGB", size, (40, 160, 90)).save(out, "WEBP", exif=phone_exif())
    return out.getvalue()


HTML = b"<!doctype html><html><body><script>alert(document.cookie)</script></body></html>"
SVG = b'<svg xmlns="http://www.w3.org/2000/svg"><script>alert(document.cookie)</script><circle r="4"/></svg>'


def image(data: bytes) -> Image.Image:
    picture = Image.open(io.BytesIO(data))
    picture.load()
    return picture
