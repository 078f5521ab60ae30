"""UI benchmark: how soon does a change reach every open /app screen, and does the web process keep
its memory while screens come and go? (DESIGN §7)

A fresh embedded MongoDB and `desk run` on loopback, work orders seeded through the API, one login in
headless Chromium for that browser's cookies. Each screen then does at the protocol level what a tab
of that browser does: GET /app (the HTML names the page's NiceGUI client and its socket.io query),
open NiceGUI's socket.io websocket with that query (implicit handshake, a new tab id), ack every 3 s
and read the `update` messages. The newest order is renamed through the API once a second; latency
runs from just before the PATCH until a screen shows that title or a newer one. Then screens churn
and the web process's RSS after a warm-up is compared with the end. Run by hand, never in CI:

    .venv/bin/python -m bench.ui [--clients 100] [--changes 60] [--churn-minutes 30]
    .venv/bin/python -m bench.ui --clients 10 --changes 10 --churn-minutes 1   # a quick try
"""

import argparse
import ast
import asyncio
import json
import math
import os
import re
import secrets
import statistics
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlencode, urlsplit

import httpx
import socketio
from selenium.webdriver import Chrome, ChromeOptions, ChromeService
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import WebDriverWait

from bench.harness import desk_running
from desk.db.embedded import EmbeddedMongo

ADMIN_EMAIL = "admin@bench.local"
PASSWORD = "bench-" + secrets.token_urlsafe(12)
ORDERS = 50
OPENING, OPEN_ATTEMPTS = 5, 3  # pages built at once (each GET runs the whole page function); tries each
RECONNECT_SECONDS = 1.0  # socket.io's reconnection delay in the browser
WARMUP_CHANGES = 3  # not counted: the first refreshes pay for imports and caches
SETTLE_SECONDS = 60.0  # at most this long after the last change for every screen to show it
ACK_SECONDS = 3.0  # as nicegui.js does, so the server can prune its message history
CHURN_EVERY, CHURN_SHARE = 3.0, 0.1  # every 3 s a tenth of the screens leave and as many arrive
CHURN_RENAME_EVERY = 60.0  # renames go on while churning, so refreshes meet clients being deleted
SAMPLE_EVERY = 10.0  # seconds between RSS readings
WARMUP_SHARE, WINDOW_SHARE = 1 / 6, 1 / 10  # of the churn: 30 min -> a 5-min warm-up, 3-min windows
CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
CHROME_FLAGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"]
CHROME_FLAGS += ["--disable-background-networking", "--disable-component-update", "--disable-sync"]
SOCKET_QUERY = re.compile(r"^\s*query: (\{.*\}),$", re.MULTILINE)  # createApp's options in index.html


class Screen:
    """One /app tab: a NiceGUI client on the server and the websocket that keeps it current.

    Like nicegui.js, a tab whose socket drops reconnects to the same client after a second (the server
    keeps it 3 s and replays what was missed), and reloads the page when the server refuses that."""

    def __init__(self, base: str, http: httpx.AsyncClient, sent: dict[str, float]) -> None:
        self.base, self.http, self.sent = base, http, sent  # sent: title -> time just before its PATCH
        self.seen: dict[str, float] = {}  # title -> when it first reached this tab
        self.client_id, self.next_id, self.query = "", 0, {}
        self.sio: socketio.AsyncClient | None = None
        self.drops: Counter = Counter()  # why the socket ended while the tab was open
        self.closing = self.recovering = self.gone = False  # gone: recovering failed, a person would give up
        self.tasks: set[asyncio.Task] = set()

    async def load(self) -> None:
        """Load the page, trying OPEN_ATTEMPTS times: NiceGUI answers 500 when building a page takes
        over 3 s on a busy desk, and a person reloads."""
        for attempt in range(1, OPEN_ATTEMPTS + 1):
            try:
                return await self._load()
            except Exception as error:
                print(f"  a page did not load (try {attempt}): {type(error).__name__}: {error}", flush=True)
                await asyncio.sleep(RECONNECT_SECONDS)
        await self.close()
        raise RuntimeError(f"/app did not load in {OPEN_ATTEMPTS} tries")

    async def _load(self) -> None:
        page = await self.http.get("/app")
        if page.status_code != 200:
            raise RuntimeError(f"GET /app answered {page.status_code}")
        self._saw([title for title in self.sent if title in page.text])  # a reloaded page shows the latest
        match = SOCKET_QUERY.search(page.text)
        if match is None:
            raise RuntimeError("no socket.io query in the /app HTML: has NiceGUI's index.html changed?")
        query = ast.literal_eval(match.group(1))  # rendered as a Python dict literal (True, not true)
        self.client_id, self.next_id = query["client_id"], int(query["next_message_id"])
        # nicegui.js adds these two: a new document per page load and, for a new tab, a new tab id.
        self.query = query | {"document_id": str(uuid.uuid4()), "tab_id": self.query.get("tab_id", str(uuid.uuid4()))}
        await self._connect()

    async def _connect(self) -> None:
        old, self.sio = self.sio, socketio.AsyncClient(reconnection=False)  # reconnecting is ours to do
        if old is not None:
            await old.disconnect()
        sio = self.sio
        sio.on("*", self._message)
        sio.on("disconnect", lambda reason="?": sio is self.sio and self._dropped(str(reason)))
        # As nicegui.js, reconnect with the next message id expected, so the server replays the rest.
        query = {key: str(value).lower() if isinstance(value, bool) else value for key, value in self.query.items()}
        await sio.connect(
            f"{self.base}/?{urlencode(query | {'next_message_id': self.next_id})}",
            headers={"Cookie": "; ".join(f"{c.name}={c.value}" for c in self.http.cookies.jar)},
            transports=["websocket"],
            socketio_path="/_nicegui_ws/socket.io",
            wait_timeout=30,
        )
        self._spawn(self._ack(sio))

    async def close(self) -> None:
        self.closing = True
        for task in self.tasks:
            task.cancel()
        if self.sio is not None:
            await self.sio.disconnect()

    async def _message(self, event: str, data: object = None) -> None:
        if isinstance(data, dict) and "_id" in data:  # numbered as nicegui.js counts them, for the acks
            self.next_id = data.pop("_id") + 1
        if event == "run_javascript" and "location.reload" in str(data):  # e.g. the replay was too old
            self._spawn(self._recover(reconnect=False))
        elif event == "update" and isinstance(data, dict):  # element id -> its new state (None: removed)
            self._saw([element.get("text") for element in data.values() if isinstance(element, dict)])

    def _saw(self, texts: list) -> None:
        at = time.monotonic()
        for text in texts:
            if text in self.sent and text not in self.seen:
                self.seen[text] = at

    def _dropped(self, reason: str) -> None:
        if not self.closing:
            self.drops[reason] += 1
            self._spawn(self._recover(reconnect=True))

    async def _recover(self, *, reconnect: bool) -> None:
        if self.recovering:
            return
        self.recovering = True
        try:
            for _ in range(OPEN_ATTEMPTS):
                await asyncio.sleep(RECONNECT_SECONDS)
                try:
                    await (self._connect() if reconnect else self._load())
                except Exception:  # the client is gone ("Implicit handshake failed") or the page failed
                    reconnect = False  # so reload
                    continue
                if self.sio is not None and self.sio.connected:
                    return
            self.gone = True
        finally:
            self.recovering = False

    async def _ack(self, sio: socketio.AsyncClient) -> None:
        while sio.connected:
            await asyncio.sleep(ACK_SECONDS)
            try:
                await sio.emit("ack", {"client_id": self.client_id, "next_message_id": self.next_id})
            except socketio.exceptions.SocketIOError:
                return  # dropped meanwhile

    def _spawn(self, coroutine) -> None:
        if self.closing:
            coroutine.close()
            return
        task = asyncio.create_task(coroutine)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)


@dataclass
class Bench:
    base: str
    api: httpx.AsyncClient  # with an API token: the renames
    http: httpx.AsyncClient  # with the logged-in browser's cookies: the screens
    order: dict  # id and version of the order being renamed
    pid: int  # of `desk run`
    sent: dict[str, float] = field(default_factory=dict)
    nonce: str = field(default_factory=lambda: secrets.token_hex(3))  # in titles nothing else has

    async def run(self, clients: int, changes: int, churn_minutes: float) -> None:
        screens, failed = await self.open(clients)
        try:
            if failed:
                raise RuntimeError(f"{failed} of {clients} screens could not open /app")
            print(f"{clients} screens on /app; web process RSS {_rss_mb(self.pid):.1f} MB", flush=True)
            await self.drive([f"Warm-up {self.nonce} {i:04d}" for i in range(WARMUP_CHANGES)])
            titles = [f"Bench change {self.nonce} {i:04d}" for i in range(changes)]
            cpu, started = _cpu_seconds(self.pid), time.monotonic()
            await self.drive(titles)
            for _ in range(int(SETTLE_SECONDS / 0.2)):  # until every screen shows the last title
                if all(titles[-1] in screen.seen or screen.gone for screen in screens):
                    break
                await asyncio.sleep(0.2)
            cpu, wall = _cpu_seconds(self.pid) - cpu, time.monotonic() - started
            drawn = sum(title in screen.seen for screen in screens for title in titles)
            latency = _latencies(screens, titles, self.sent) | {"busy": cpu / wall, "per_draw": cpu / max(drawn, 1)}
            print(f"latency measured; churning for {churn_minutes:g} min", flush=True)
            for screen in screens:
                screen.drops.clear()  # counted in the latency lines, as are the screens that gave up
            await asyncio.gather(*(screen.close() for screen in screens if screen.gone))
            screens[:] = [screen for screen in screens if not screen.gone]
            memory = await self.churn(screens, clients, churn_minutes)
        finally:
            await asyncio.gather(*(screen.close() for screen in screens), return_exceptions=True)
        _report(clients, titles, latency, memory)

    async def open(self, count: int) -> tuple[list[Screen], int]:
        """`count` new screens, OPENING at a time, and how many could not load."""
        gate = asyncio.Semaphore(OPENING)

        async def one() -> Screen:
            async with gate:
                screen = Screen(self.base, self.http, self.sent)
                await screen.load()
                return screen

        results = await asyncio.gather(*(one() for _ in range(count)), return_exceptions=True)
        return [r for r in results if isinstance(r, Screen)], sum(isinstance(r, Exception) for r in results)

    async def drive(self, titles: list[str], every: float = 1.0) -> None:
        """Rename the order every `every` s on a fixed clock (a slow PATCH does not shift the next one)."""
        started, path = time.monotonic(), f"/api/v1/work-orders/{self.order['id']}"
        for i, title in enumerate(titles):
            await asyncio.sleep(max(0.0, started + i * every - time.monotonic()))
            self.sent[title] = time.monotonic()
            response = await self.api.patch(path, json={"version": self.order["version"], "title": title})
            response.raise_for_status()
            self.order["version"] = response.json()["version"]

    async def churn(self, screens: list[Screen], target: int, minutes: float) -> dict:
        """Every CHURN_EVERY s for `minutes`, close CHURN_SHARE of `target` screens (the oldest, and any
        that gave up recovering) and open new ones up to `target` again, renaming every
        CHURN_RENAME_EVERY s; read the web process's RSS every SAMPLE_EVERY s."""
        total, leaving = minutes * 60, round(target * CHURN_SHARE)
        titles = [f"Churn {self.nonce} {i:04d}" for i in range(int(total / CHURN_RENAME_EVERY) + 1)]
        renames = asyncio.create_task(self.drive(titles, CHURN_RENAME_EVERY))
        samples = [(0.0, _rss_mb(self.pid))]
        started = last_print = time.monotonic()
        opened, failures, gave_up, drops = 0, 0, 0, Counter()
        try:
            while (elapsed := time.monotonic() - started) < total:
                gone = [s for s in screens if s.gone] + [s for s in screens if not s.gone][:leaving]
                screens[:] = [screen for screen in screens if screen not in gone]
                for screen in gone:
                    drops.update(screen.drops)
                gave_up += sum(screen.gone for screen in gone)
                await asyncio.gather(*(screen.close() for screen in gone))
                arrived, failed = await self.open(target - len(screens))
                screens += arrived
                opened, failures = opened + len(arrived), failures + failed
                if elapsed - samples[-1][0] >= SAMPLE_EVERY:
                    samples.append((elapsed, _rss_mb(self.pid)))
                if time.monotonic() - last_print >= 60:
                    last_print = time.monotonic()
                    print(f"  churn {elapsed / 60:.0f} min: {opened} opened, RSS {samples[-1][1]:.1f} MB", flush=True)
                await asyncio.sleep(CHURN_EVERY)
            samples.append((time.monotonic() - started, _rss_mb(self.pid)))
            for screen in screens:
                drops.update(screen.drops)
        finally:
            renames.cancel()
        warmup, window = total * WARMUP_SHARE, max(total * WINDOW_SHARE, SAMPLE_EVERY)  # compare medians
        steady = [rss for at, rss in samples if warmup <= at <= warmup + window] or [samples[0][1]]
        end = statistics.median(rss for at, rss in samples if at >= total - window)
        memory = {"opened": opened, "failures": failures, "drops": drops, "gave_up": gave_up, "end": end}
        return memory | {"first": samples[0][1], "steady": statistics.median(steady), "warmup": warmup}


def _latencies(screens: list[Screen], titles: list[str], sent: dict[str, float]) -> dict:
    """Per screen and change, seconds until the screen showed that title or a newer one (a newer title
    drawn first makes the screen current all the same); and how many titles each screen never drew."""
    times, stale, skipped = [], 0, Counter()
    for screen in screens:
        current = None  # the earliest arrival of this title or a later one, walking back from the last
        for title in reversed(titles):
            if title in screen.seen:
                current = min(current or screen.seen[title], screen.seen[title])
            if current is None:
                stale += 1
            else:
                times.append(current - sent[title])
        skipped[sum(title not in screen.seen for title in titles)] += 1
    drops = sum((screen.drops for screen in screens), Counter())
    return {"times": times, "stale": stale, "skipped": skipped, "drops": drops, "gave_up": sum(s.gone for s in screens)}


def _report(clients: int, titles: list[str], latency: dict, memory: dict) -> None:
    times = sorted(latency["times"]) or [math.inf]
    p50, p95 = times[math.ceil(len(times) * 0.5) - 1], times[math.ceil(len(times) * 0.95) - 1]  # nearest rank
    print(f"\n| clients | changes | p50 s | p95 s | max s | never current | socket drops |\n|{'---|' * 7}")
    cells = [clients, len(titles), f"{p50:.2f}", f"{p95:.2f}", f"{times[-1]:.2f}", latency["stale"]]
    print("| " + " | ".join(map(str, [*cells, latency["drops"].total()])) + " |")
    print("titles never drawn: " + ", ".join(f"{n} by {c} screens" for n, c in sorted(latency["skipped"].items())))
    print(
        f"web process CPU while renaming: {latency['busy']:.0%} of a core, {latency['per_draw'] * 1000:.0f} ms per "
        f"title drawn on a screen; machine load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    )
    for phase, part in [("while renaming", latency), ("while churning", memory)]:
        reasons = ", ".join(f"{n} x {why}" for why, n in part["drops"].items()) or "none"
        print(f"socket drops {phase}: {reasons}; screens that gave up recovering: {part['gave_up']}")
    growth = (memory["end"] - memory["steady"]) / memory["steady"]
    print(
        f"\nweb process RSS while {memory['opened']} screens opened and closed ({memory['failures']} could not "
        f"load): {memory['first']:.1f} MB at the start of churn, {memory['steady']:.1f} MB after a "
        f"{memory['warmup'] / 60:.1f}-min warm-up, {memory['end']:.1f} MB at the end (medians over "
        f"{WINDOW_SHARE:.0%} of the churn)\n"
    )
    print(f"{'met   ' if p95 <= 2.5 else 'MISSED'} p95 with {clients} clients: {p95:.2f} s (<= 2.5 s)")
    print(f"{'met   ' if growth < 0.05 else 'MISSED'} RSS growth after warm-up: {growth:+.1%} (< 5 %)")


async def main(clients: int, changes: int, churn_minutes: float) -> None:
    # python-engineio leaves a timed-out websocket to the garbage collector, and aiohttp then complains.
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda _, ctx: "Unclosed" in ctx["message"] or loop.default_exception_handler(ctx))
    with (
        tempfile.TemporaryDirectory(prefix="desk-bench-ui-") as tmp,
        EmbeddedMongo(Path(tmp) / "mongo") as uri,
    ):
        settings = {
            "MONGODB_URI": uri,
            "DESK_SECRET": secrets.token_urlsafe(32),
            "DESK_ADMIN_EMAIL": ADMIN_EMAIL,
            "DESK_ADMIN_PASSWORD": PASSWORD,
            "AI_ENABLED": "false",
        }
        home = Path(tmp) / "web"
        try:
            with desk_running(home, **settings) as desk:  # blocks the loop while it starts: nothing else runs yet
                async with httpx.AsyncClient(base_url=desk.url, headers=await _bearer(desk.url), timeout=60) as api:
                    order = await _seed(api)
                    cookies = await asyncio.to_thread(_browser_cookies, desk.url, Path(tmp) / "chromium")
                    async with httpx.AsyncClient(base_url=desk.url, cookies=cookies, timeout=60) as http:
                        await Bench(desk.url, api, http, order, desk.process.pid).run(clients, changes, churn_minutes)
        finally:
            _log_summary(home / "desk.log")


async def _bearer(base: str) -> dict[str, str]:
    """An API token for the admin: the renames go through the public API, as an integration's would."""
    async with httpx.AsyncClient(base_url=base, headers={"X-Desk-CSRF": "1"}, timeout=30) as client:
        login = await client.post("/api/v1/auth/login", json={"email": ADMIN_EMAIL, "password": PASSWORD})
        login.raise_for_status()
        token = await client.post("/api/v1/auth/tokens", json={"name": "bench.ui"})
        token.raise_for_status()
        return {"Authorization": f"Bearer {token.json()['secret']}"}


async def _seed(api: httpx.AsyncClient) -> dict:
    """ORDERS orders; the newest is on the first page of every screen (the list sorts newest first)."""
    for i in range(ORDERS):
        body = {"title": f"Seeded order {i:02d}", "description": "Made by bench.ui.", "priority": "medium"}
        (await api.post("/api/v1/work-orders", json=body)).raise_for_status()
    newest = (await api.get("/api/v1/work-orders")).json()["items"][0]
    return {"id": newest["id"], "version": newest["version"]}


def _browser_cookies(base: str, profile: Path) -> dict[str, str]:
    """Log in on the login page in headless Chromium. The desk session lives in NiceGUI's user storage,
    keyed by the browser's signed session cookie, so that cookie is what every screen presents."""
    options = ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in [*CHROME_FLAGS, f"--user-data-dir={profile}"]:
        options.add_argument(flag)
    driver = Chrome(options=options, service=ChromeService(CHROMEDRIVER))
    try:
        wait = WebDriverWait(driver, 30)
        driver.get(base + "/login")
        wait.until(lambda d: d.find_element(By.CSS_SELECTOR, "input[aria-label=Email]")).send_keys(ADMIN_EMAIL)
        driver.find_element(By.CSS_SELECTOR, "input[aria-label=Password]").send_keys(PASSWORD, Keys.ENTER)
        wait.until(lambda d: urlsplit(d.current_url).path == "/app")
        return {cookie["name"]: cookie["value"] for cookie in driver.get_cookies()}
    finally:
        driver.quit()


def _log_summary(log: Path) -> None:
    """The web process's warnings and errors, counted (the log goes with the temp dir)."""
    found = Counter()
    for line in log.read_text(errors="replace").splitlines() if log.exists() else []:
        entry = json.loads(line) if line.startswith("{") else {}
        if entry.get("level") in ("warning", "error"):
            found[f"{entry['level']}: {entry.get('message', '')[:100]}"] += 1
    for text, count in found.most_common(8):
        print(f"web log: {count} x {text}")


def _rss_mb(pid: int) -> float:
    """Resident memory from /proc (psutil is not a dependency): the VmRSS line, in kB."""
    return int(re.search(r"VmRSS:\s+(\d+)", Path(f"/proc/{pid}/status").read_text()).group(1)) / 1024


def _cpu_seconds(pid: int) -> float:
    """User plus system CPU time of the process so far (fields 14 and 15 of /proc/<pid>/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m bench.ui", description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=100, help="screens kept open on /app (default 100)")
    parser.add_argument("--changes", type=int, default=60, help="timed renames, one a second (default 60)")
    parser.add_argument("--churn-minutes", type=float, default=30, help="screens coming and going (default 30)")
    args = parser.parse_args()
    asyncio.run(main(max(args.clients, 1), max(args.changes, 2), max(args.churn_minutes, 0.5)))
