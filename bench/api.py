"""API benchmark: does listing and searching stay flat as the desk grows? (DESIGN §4)

Seeds work orders through the real repository into a fresh embedded MongoDB, runs `desk run` as
a separate process on loopback and times, over HTTP, a page of 25 in the default sort, a
one-word search and searches as people type (prefixes of 1, 2, 3 and 5 letters), as a user (the
orders they asked for or own, and the queue) and as an admin (everyone's), the list and a search
filtered by who asked (the user's own requests, `requesterId`), plus list requests/s at concurrency 8.
Run by hand, never in CI:

    .venv/bin/python -m bench.api [--sizes 1000,100000] [--requests 200] [--data-dir DIR] [--counts-only]

At each size it also prints the database commands of a list, a search, a create and an update, counted as
tests/work_orders/test_commands.py counts (and pins) them, through tests/commands.py (--counts-only: only those).

Seeding 100,000 orders takes 17 to 25 minutes. With --data-dir, each size is kept as it was just
after seeding (DIR/orders-<size>: the database files and what the script knows about them), and a
later run starts from the snapshot it can use instead of seeding again. Measuring always works on a
copy, so the snapshots stay as seeded.
"""

import argparse
import asyncio
import os
import pickle
import random
import secrets
import shutil
import statistics
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import httpx
from bson import ObjectId

from bench.harness import desk_running
from desk.actors import Actor, Role
from desk.app import ensure_indexes
from desk.auth import write_limit
from desk.auth.service import create_token
from desk.config import Settings
from desk.db.client import connect
from desk.db.embedded import EmbeddedMongo
from desk.schema import now
from desk.seed import _order
from desk.users.models import UserCreate
from desk.users.service import register
from desk.work_orders import repository, search
from tests.commands import api, api_watched, of_requests

DB_NAME = "desk"
ADMIN_EMAIL = "admin@bench.local"
OWNERS = 20  # people who own work orders; the measured user is one of them
BATCH = 50  # inserts in flight at once while seeding
WARMUP = 20
WRITES = 10  # timed creates over HTTP per size (each pays the full write path)
THROUGHPUT_REQUESTS = 2000
CONCURRENCY = 8
REQUEST_SECONDS = 120
MEDIUM_WORD, COMMON_WORD = "kitchen", "the"  # a place (~1 order in 12) and a word in every order
PREFIXES = ("k", "ki", "kit", "kitch")  # "kitchen" as it is typed; 1-3 letters are terms, longer ones a range
TALLIED_PREFIX = max(len(p) for p in PREFIXES)


@dataclass
class Desk:
    """What was seeded, tallied on our side so the frequencies and totals in the report are exact."""

    owners: list[ObjectId]
    password: str  # everyone's, so a kept database can be logged into again
    rng: random.Random = field(default_factory=lambda: random.Random(2026))
    moment: datetime = field(default_factory=now)
    count: int = 0
    mine: int = 0  # orders owners[0], the measured user, sees: asked for, owned, or in the queue
    words: Counter = field(default_factory=Counter)
    my_words: Counter = field(default_factory=Counter)
    rare_word: str | None = None  # the asset tag of the measured user's first order


async def main(sizes: list[int], requests: int, data_dir: Path | None, *, counts_only: bool = False) -> None:
    with tempfile.TemporaryDirectory(prefix="desk-bench-") as tmp:
        mongo = EmbeddedMongo(Path(tmp) / "mongo")
        desk: Desk | None = None
        rows: list[tuple] = []
        try:
            for size in sizes:
                if data_dir is not None and (kept := _usable_snapshot(data_dir, desk, size)):
                    desk = _restore(kept, mongo)
                    print(f"starting from {kept} ({desk.count:,} work orders)", flush=True)
                db = connect(mongo.start(), DB_NAME)
                try:
                    desk = desk or await _new_desk(db)
                    seeded = desk.count
                    seconds = await _seed(db, desk, size)
                    print(f"seeded {desk.count:,} work orders; this step took {seconds:.0f} s", flush=True)
                finally:
                    await db.client.close()
                if data_dir is not None and desk.count > seeded:
                    _keep(data_dir / f"orders-{size}", mongo, desk)
                if not counts_only:
                    rows += await _measure(size, mongo.start(), Path(tmp), desk, requests)
                await _counts(size, mongo.start(), desk)
            if not counts_only:
                _report(rows, sizes)
        finally:
            mongo.stop()


async def _new_desk(db) -> Desk:
    """An empty desk: indexes, an admin and the people who will own work orders."""
    await ensure_indexes(db)
    password = "bench-" + secrets.token_urlsafe(12)
    await register(db=db, data=UserCreate(email=ADMIN_EMAIL, name="Admin", role="admin", password=password))
    return Desk(owners=[await _person(db, i, password) for i in range(OWNERS)], password=password)


async def _person(db, i: int, password: str) -> ObjectId:
    user = await register(db=db, data=UserCreate(email=f"user{i}@bench.local", name=f"User {i}", password=password))
    return ObjectId(user.id)


async def _seed(db, desk: Desk, size: int) -> float:
    """Grow the desk to `size` orders through repository.insert, so counters and postings are real."""
    started = last_print = time.perf_counter()
    while desk.count < size:
        batch = [_next_order(desk) for _ in range(min(BATCH, size - desk.count))]
        await asyncio.gather(*(repository.insert(db, doc) for doc in batch))
        if time.perf_counter() - last_print > 30:
            last_print = time.perf_counter()
            print(f"  seeding: {desk.count:,}/{size:,} after {last_print - started:.0f} s", flush=True)
    return time.perf_counter() - started


# Snapshots (--data-dir): the server's files, copied while it is stopped, and the Desk's fields.
SNAPSHOT_STATE = "desk.pickle"


def _usable_snapshot(data_dir: Path, desk: Desk | None, size: int) -> Path | None:
    """The largest kept size up to `size` that is ahead of where this run already is."""
    have = desk.count if desk else -1
    kept = {
        int(path.name.removeprefix("orders-")): path
        for path in data_dir.glob("orders-*")
        if (path / SNAPSHOT_STATE).is_file() and path.name.removeprefix("orders-").isdigit()
    }
    best = max((n for n in kept if have < n <= size), default=None)
    return kept[best] if best is not None else None


def _keep(snapshot: Path, mongo: EmbeddedMongo, desk: Desk) -> None:
    mongo.stop()  # a stopped server's files (with its WAL) are a consistent copy
    shutil.rmtree(snapshot, ignore_errors=True)
    shutil.copytree(mongo.data_dir, snapshot / "mongo", ignore=shutil.ignore_patterns("*.pid", "*.sock"))
    (snapshot / SNAPSHOT_STATE).write_bytes(pickle.dumps(vars(desk)))  # fields only: loads however this runs
    print(f"kept the seeded database in {snapshot}", flush=True)


def _restore(snapshot: Path, mongo: EmbeddedMongo) -> Desk:
    mongo.stop()
    shutil.rmtree(mongo.data_dir, ignore_errors=True)
    shutil.copytree(snapshot / "mongo", mongo.data_dir)
    for path in mongo.data_dir.iterdir():  # else the first checkpoint waits for the whole copy to reach the disk
        with path.open("rb") as copied:
            os.fsync(copied.fileno())
    return Desk(**pickle.loads((snapshot / SNAPSHOT_STATE).read_bytes()))  # noqa: S301 - a file this script wrote


def _next_order(desk: Desk) -> dict:
    doc = _order(desk.rng, desk.owners, desk.moment)
    # Asset tags make rare words, as real descriptions have (a tag is shared by ~1 order in 100,000).
    tag = f"a{desk.rng.randrange(100_000):05d}"
    doc["description"] += f" Asset {tag}."
    doc.setdefault("requesterId", doc["ownerId"])  # the owner asked, unless the seed says who did
    me = desk.owners[0]
    _tally(desk, doc, mine=me in (doc["ownerId"], doc["requesterId"]) or doc["ownerId"] is None)
    if doc["ownerId"] == desk.owners[0]:
        desk.rare_word = desk.rare_word or tag
    return doc


def _tally(desk: Desk, doc: dict, *, mine: bool) -> None:
    found = search.words(f"{doc['title']} {doc['description']}")
    found += list({word[:size] + "*" for word in found for size in range(1, TALLIED_PREFIX + 1)})
    desk.count += 1
    desk.words.update(found)
    if mine:
        desk.mine += 1
        desk.my_words.update(found)


def desk_settings(uri: str) -> dict[str, str]:
    """The environment of the `desk run` a bench measures: its seeded database, AI off, logins not limited."""
    return {
        "MONGODB_URI": uri,
        "MONGODB_DB": DB_NAME,
        "DESK_SECRET": secrets.token_urlsafe(32),
        "DESK_LOGIN_ATTEMPTS_PER_MINUTE": "100",
        "AI_ENABLED": "false",
    }


async def _measure(size: int, uri: str, tmp: Path, desk: Desk, requests: int) -> list[tuple]:
    """Time list and search for a user and an admin against a fresh `desk run`."""
    rows = []
    # blocks the loop while it starts: nothing else runs
    with desk_running(tmp / f"web-{size}", **desk_settings(uri)) as server:
        base = server.url
        load_before = os.getloadavg()[0]
        searches = [("search rare", desk.rare_word), ("search medium", MEDIUM_WORD), ("search common", COMMON_WORD)]
        searches += [(f"prefix {len(p)}", p) for p in PREFIXES]
        for who, email in [("user", "user0@bench.local"), ("admin", ADMIN_EMAIL)]:
            cookie = await _login(base, email, desk.password)
            async with _client(base, cookie) as client:
                if who == "user":  # first, so both list and search see the new orders
                    rows.append((size, who, "create", "", f"{WRITES} orders", *await _creates(client, desk)))
                seen, tally = (desk.mine, desk.my_words) if who == "user" else (desk.count, desk.words)
                for kind, q in [("list", None), *searches]:
                    times, total = await _latencies(client, {"q": q} if q else {}, requests)
                    n = tally[q + "*" if kind.startswith("prefix") else q] if q else seen
                    expected = min(n, search.CAP) if q else seen  # searches stop counting at the cap
                    # a longer prefix reads at most search.SCAN postings: past that its count is a floor
                    if not (kind == f"prefix {len(q or '')}" and len(q) > search.PREFIX_LETTERS and n > search.SCAN):
                        assert total == expected, (
                            f"{who} {kind}: the API said {total} matches, the seed made {expected}"
                        )
                    share = f"{n / seen:.2%} of {seen:,}" if q else f"{seen:,}"
                    rows.append((size, who, kind, q or "", share, *_percentiles(times)))
                rows += await _by_requester(client, size, who, desk, requests)
            rate = await _throughput(base, cookie)
            rows.append((size, who, f"list x{CONCURRENCY}", "", f"{THROUGHPUT_REQUESTS} req", None, None, rate))
        # Other work on the machine skews every number here; say how busy it was.
        load_after = os.getloadavg()[0]
        print(f"load average (1 min) while measuring at {size:,}: {load_before:.1f} before, {load_after:.1f} after")
    return rows


async def _counts(size: int, uri: str, desk: Desk) -> None:
    """The database commands of each kind of request, as tests/work_orders/test_commands.py counts (and pins) them:
    one request each, with a token, through the desk's API in this process, for the user and for an admin."""
    app = api(Settings(mongodb_uri=uri, mongodb_db=DB_NAME, ai_enabled=False, desk_writes_per_minute=1000))
    db = connect(uri, DB_NAME)
    try:
        for who, email in [("user", "user0@bench.local"), ("admin", ADMIN_EMAIL)]:
            person = await db["users"].find_one({"email": email})
            me = Actor(id=str(person["_id"]), role=Role(person["role"]))
            token = (await create_token(db=db, actor=me, name="bench counts")).secret
            # a person who has written in the last two minutes, as the test's has: their first write after that
            # starts their write-limit document (one more command; tests/work_orders/test_commands.py)
            await write_limit.admit(db=db, actor=me)
            async with api_watched(app, uri, DB_NAME, token) as (client, commands):
                sent = await of_requests(client, commands, word=MEDIUM_WORD)
            _tally(desk, {"title": "Door will not latch", "description": ""}, mine=who == "user")  # the create
            line = ", ".join(f"{kind} {sum(counted.values())}" for kind, counted in sent.items())
            print(f"database commands per request at {size:,} orders, as {who}: {line}", flush=True)
    finally:
        await db.client.close()


async def _by_requester(client: httpx.AsyncClient, size: int, who: str, desk: Desk, requests: int) -> list[tuple]:
    """The list and a search filtered by who asked: what the measured user asked for (the seed's requesters
    are its owners, so that is what they own). No counter keeps requesters: the server counts to the cap."""
    rows = []
    for kind, q in [("requested by", None), ("search by requester", MEDIUM_WORD)]:
        params = {"requesterId": str(desk.owners[0]), **({"q": q} if q else {})}
        times, total = await _latencies(client, params, requests)
        n = desk.my_words[q] if q else desk.mine
        assert total == min(n, search.CAP), f"{who} {kind}: the API said {total} matches, the seed made {n}"
        rows.append((size, who, kind, q or "", f"{n:,} asked by user0", *_percentiles(times)))
    return rows


async def _creates(client: httpx.AsyncClient, desk: Desk) -> tuple[float, float, None]:
    """Time POSTs of new orders: the write path also keeps counters and postings up to date."""
    times = []
    for _ in range(WRITES):
        doc = _order(desk.rng, desk.owners, desk.moment)
        body = {key: doc[key] for key in ("title", "description", "priority")}
        started = time.perf_counter()
        response = await client.post("/api/v1/work-orders", json=body, headers={"X-Desk-CSRF": "1"})
        times.append(time.perf_counter() - started)
        response.raise_for_status()
        _tally(desk, doc, mine=True)
    return _percentiles(times)


def _client(base: str, cookie: str) -> httpx.AsyncClient:
    # Generous but bounded: a slow answer is measured, a stuck one ends the run.
    return httpx.AsyncClient(base_url=base, headers={"Cookie": f"desk_session={cookie}"}, timeout=REQUEST_SECONDS)


async def _latencies(client: httpx.AsyncClient, params: dict[str, str], requests: int) -> tuple[list[float], int]:
    """Seconds per request, after a warm-up (first requests pay for imports, caches, connections)."""
    for _ in range(WARMUP):
        (await client.get("/api/v1/work-orders", params=params)).raise_for_status()
    times = []
    for _ in range(requests):
        started = time.perf_counter()
        response = await client.get("/api/v1/work-orders", params=params)
        times.append(time.perf_counter() - started)
        response.raise_for_status()
    return times, response.json()["total"]


async def _throughput(base: str, cookie: str) -> float:
    """List requests/s with CONCURRENCY clients, each sending its next request as soon as one returns."""
    clients = [_client(base, cookie) for _ in range(CONCURRENCY)]
    remaining = iter(range(THROUGHPUT_REQUESTS))  # shared: workers take requests until all are sent

    async def worker(client: httpx.AsyncClient) -> None:
        for _ in remaining:
            (await client.get("/api/v1/work-orders")).raise_for_status()

    try:
        for client in clients:  # open every connection before the clock starts
            (await client.get("/api/v1/work-orders")).raise_for_status()
        started = time.perf_counter()
        await asyncio.gather(*(worker(client) for client in clients))
        return THROUGHPUT_REQUESTS / (time.perf_counter() - started)
    finally:
        for client in clients:
            await client.aclose()


def _percentiles(times: list[float]) -> tuple[float, float, None]:
    return statistics.median(times) * 1000, statistics.quantiles(times, n=100)[94] * 1000, None


async def _login(base: str, email: str, password: str) -> str:
    async with httpx.AsyncClient(base_url=base, timeout=30) as client:
        response = await client.post(
            "/api/v1/auth/login", json={"email": email, "password": password}, headers={"X-Desk-CSRF": "1"}
        )
        response.raise_for_status()
        return response.cookies["desk_session"]


def _report(rows: list[tuple], sizes: list[int]) -> None:
    """The table, then each target against the smallest and largest sizes."""
    print(f"\n| orders | as | request | q | matches | p50 ms | p95 ms | req/s |\n|{'---|' * 8}")
    for size, who, kind, q, share, p50, p95, rate in rows:
        cells = [f"{size:,}", who, kind, f"`{q}`" if q else "", share]
        cells += [
            f"{p50:.1f}" if p50 is not None else "",
            f"{p95:.1f}" if p95 is not None else "",
            f"{rate:.0f}" if rate is not None else "",
        ]
        print("| " + " | ".join(cells) + " |")
    small, large = sizes[0], sizes[-1]
    p95 = {(size, who, kind): p for size, who, kind, _, _, _, p, _ in rows if p is not None}
    rate = {(size, who): r for size, who, _, _, _, _, _, r in rows if r is not None}
    print()
    for who in ("user", "admin"):
        kinds = ("list", "search rare", "search medium", "search common", *(f"prefix {len(p)}" for p in PREFIXES))
        for kind in (*kinds, "requested by", "search by requester"):
            growth = p95[large, who, kind] / p95[small, who, kind]
            _target(growth <= 3, f"{who} {kind}: p95 at {large:,} is {growth:.2f}x p95 at {small:,} (<= 3x)")
        list_p95 = p95[large, who, "list"]
        _target(list_p95 <= 50, f"{who} list p95 at {large:,}: {list_p95:.1f} ms (<= 50 ms)")
        _target(
            rate[large, who] >= 300, f"{who} list x{CONCURRENCY} at {large:,}: {rate[large, who]:.0f} req/s (>= 300)"
        )
    growth = p95[large, "user", "create"] / p95[small, "user", "create"]
    print(f"(no target) create: p95 at {large:,} is {growth:.2f}x p95 at {small:,}")


def _target(met: bool, text: str) -> None:
    print(f"{'met   ' if met else 'MISSED'} {text}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m bench.api", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes", default="1000,100000", help="desk sizes to measure at, ascending (default 1000,100000)"
    )
    parser.add_argument("--requests", type=int, default=200, help="timed requests per measurement (default 200)")
    parser.add_argument("--data-dir", type=Path, help="keep each seeded size here and reuse it in later runs")
    parser.add_argument("--counts-only", action="store_true", help="print the database commands per request, untimed")
    args = parser.parse_args()
    sizes = sorted(int(size) for size in args.sizes.split(","))
    data_dir = args.data_dir.resolve() if args.data_dir else None
    asyncio.run(main(sizes, max(args.requests, 20), data_dir, counts_only=args.counts_only))
