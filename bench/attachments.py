"""Attachments benchmark (issue 44): the memory a 10 MB photo's upload adds to the web process.

`desk run` (web only, the embedded database) is started; a small photo is attached first, so Pillow and
the upload's code are loaded before the baseline is read. Then the process's peak resident memory is
reset (/proc/PID/clear_refs) and a 10 MB phone photo (JPEG, EXIF with a GPS position) is attached through
the API; the figure is the peak during the upload over the resident memory before it. The floor is
2 x 10 MB: the upload streams (spooled to disk by Starlette, copied to disk, stripped file to file,
stored a GridFS chunk at a time), so no step holds the file whole twice.
Run by hand, never in CI (the machine is shared: the load average is printed). Linux only:
    .venv/bin/python -m bench.attachments [--runs 3]
"""

import argparse
import io
import os
import tempfile
from pathlib import Path

import httpx
from PIL import Image

from bench.harness import desk_running

ADMIN = {"DESK_ADMIN_EMAIL": "bench@example.com", "DESK_ADMIN_PASSWORD": "a sturdy bench passphrase"}
MB = 1024 * 1024
FLOOR = 2 * 10 * MB


def photo(target_bytes: int) -> bytes:
    """A phone-like JPEG just under `target_bytes`: noise compresses as badly as a detailed photo does."""
    exif = Image.Exif()
    exif[0x010F] = "PhoneMaker"
    exif.get_ifd(0x8825).update({1: "N", 2: (52.0, 31.0, 12.0), 3: "E", 4: (13.0, 24.0, 36.0)})
    scale = 1.0
    per_pixel = len(_jpeg(1000, exif)) / (1000 * 750)
    while True:
        data = _jpeg(int((target_bytes * scale / per_pixel / 0.75) ** 0.5), exif)
        if len(data) <= target_bytes:
            return data
        scale *= 0.97


def _jpeg(width: int, exif: Image.Exif) -> bytes:
    noise = [Image.effect_noise((width, width * 3 // 4), 60) for _ in range(3)]
    out = io.BytesIO()
    Image.merge("RGB", noise).save(out, "JPEG", quality=93, exif=exif)
    return out.getvalue()


def rss(pid: int, field: str) -> int:
    """VmRSS (now) or VmHWM (the peak since the last reset) of a process, in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) * 1024
    raise LookupError(field)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    big = photo(10 * MB - 64 * 1024)
    print(f"photo: {len(big) / MB:.2f} MB JPEG; load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory() as home, desk_running(Path(home), DESK_RUN_WORKER="false", **ADMIN) as desk:
        pid = desk.process.pid
        with httpx.Client(base_url=desk.url, headers={"X-Desk-CSRF": "1"}, timeout=120) as api:
            login = {"email": ADMIN["DESK_ADMIN_EMAIL"], "password": ADMIN["DESK_ADMIN_PASSWORD"]}
            assert api.post("/api/v1/auth/login", json=login).status_code == 200
            order = api.post("/api/v1/work-orders", json={"title": "Broken window"}).json()
            url = f"/api/v1/work-orders/{order['id']}/attachments"
            warm = photo(200 * 1024)
            assert api.post(url, files={"file": ("warm.jpg", warm, "image/jpeg")}).status_code == 201
            added = []
            for run in range(args.runs):
                baseline = rss(pid, "VmRSS")
                Path(f"/proc/{pid}/clear_refs").write_text("5")  # VmHWM starts again from VmRSS
                answer = api.post(url, files={"file": (f"IMG_{run}.jpg", big, "image/jpeg")})
                assert answer.status_code == 201, answer.text
                added.append(rss(pid, "VmHWM") - baseline)
                print(f"run {run + 1}: +{added[-1] / MB:.1f} MB at the peak (baseline {baseline / MB:.0f} MB RSS)")
    worst = max(added)
    verdict = "within" if worst <= FLOOR else "OVER"
    print(f"worst: +{worst / MB:.1f} MB for a {len(big) / MB:.1f} MB photo; floor {FLOOR / MB:.0f} MB: {verdict}")
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
