"""Due-view benchmark: does the `due=overdue` list stay flat as the desk grows? (issue 44, DESIGN §4)

Seeds work orders as bench/api.py does (through the real repository: counters, postings and the due
keys are real), one in five with a due moment spread over the 30 days before and after the seed's
moment, so about a tenth of the desk is due in the past and most of those are open. Then runs
`desk run` on loopback and times, over HTTP, a page of 25 of the overdue view in the list's default
sort and soonest first (`sort=dueAt`), the "due this week" view, and the plain list beside them (the
floor the views stand on, measured in the same run), as a user (their orders and the queue) and as an
admin (everyone's). Totals are checked against what the seed made. Run by hand, never in CI:

    .venv/bin/python -m bench.due [--sizes 1000,100000] [--requests 200]

Seeding 100,000 orders takes about 20 minutes on a quiet machine (bench/api.py's figure).
"""

import argparse
import asyncio
import os
import tempfile
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from bench.api import (
    ADMIN_EMAIL,
    BATCH,
    DB_NAME,
    Desk,
    _client,
    _latencies,
    _login,
    _new_desk,
    _next_order,
    _percentiles,
    desk_settings,
)
from bench.harness import desk_running
from desk.db.client import connect
from desk.db.embedded import EmbeddedMongo
from desk.work_orders import repository, search
from desk.work_orders.models import CLOSED

DUE_SHARE = 5  # one order in this many has a due moment
DUE_SPREAD_DAYS = 30  # due moments fall this many days either side of the seed's moment
VIEWS = {
    "list": {},
    "overdue": {"due": "overdue"},
    "overdue, soonest": {"due": "overdue", "sort": "dueAt"},
    "due this week": {"due": "week"},
}
TARGET_RATIO = 3.0  # p95 at the largest size over p95 at the smallest, as for the other filters


@dataclass
class Tally:
    """Open orders due in the past, everyone's and those the measured user (owners[0]) sees."""

    overdue: int = 0
    my_overdue: int = 0


async def main(sizes: list[int], requests: int) -> None:
    with tempfile.TemporaryDirectory(prefix="desk-bench-due-") as tmp:
        mongo = EmbeddedMongo(Path(tmp) / "mongo")
        desk: Desk | None = None
        tally, rows = Tally(), []
        try:
            for size in sizes:
                db = connect(mongo.start(), DB_NAME)
                try:
                    desk = desk or await _new_desk(db)
                    seconds = await _seed(db, desk, tally, size)
                    print(f"seeded {desk.count:,} work orders; this step took {seconds:.0f} s", flush=True)
                finally:
                    await db.client.close()
                rows += await _measure(size, mongo.start(), Path(tmp), desk, tally, requests=requests)
            _report(rows, sizes)
        finally:
            mongo.stop()


async def _seed(db, desk: Desk, tally: Tally, size: int) -> float:
    """Grow the desk to `size` orders through repository.insert, one in DUE_SHARE due by some moment."""
    started = last_print = time.perf_counter()
    while desk.count < size:
        mine_before = desk.mine
        batch = []
        for _ in range(min(BATCH, size - desk.count)):
            doc = _next_order(desk)
            mine, mine_before = desk.mine > mine_before, desk.mine
            if desk.rng.randrange(DUE_SHARE) == 0:
                days = desk.rng.uniform(-DUE_SPREAD_DAYS, DUE_SPREAD_DAYS)
                # none falls due while seeding and measuring: what is overdue now is what the tally says
                doc["dueAt"] = desk.moment + timedelta(days=days if days < 0 else days + 1)
                late = doc["dueAt"] < desk.moment and doc["status"] not in CLOSED
                tally.overdue += late
                tally.my_overdue += late and mine
            batch.append(doc)
        await asyncio.gather(*(repository.insert(db, doc) for doc in batch))
        if time.perf_counter() - last_print > 30:
            last_print = time.perf_counter()
            print(f"  seeding: {desk.count:,}/{size:,} after {last_print - started:.0f} s", flush=True)
    return time.perf_counter() - started


async def _measure(size: int, uri: str, tmp: Path, desk: Desk, tally: Tally, *, requests: int) -> list[tuple]:
    """Time each view for a user and an admin against a fresh `desk run`."""
    rows = []
    with desk_running(tmp / f"web-{size}", **desk_settings(uri)) as server:
        load_before = os.getloadavg()[0]
        for who, email in [("user", "user0@bench.local"), ("admin", ADMIN_EMAIL)]:
            cookie = await _login(server.url, email, desk.password)
            async with _client(server.url, cookie) as client:
                for kind, params in VIEWS.items():
                    times, total = await _latencies(client, params, requests)
                    if kind.startswith("overdue"):
                        made = tally.my_overdue if who == "user" else tally.overdue
                        assert total == min(made, search.CAP), (
                            f"{who} {kind}: the API said {total}, the seed made {made}"
                        )
                    p50, p95, _ = _percentiles(times)
                    rows.append((size, who, kind, total, p50, p95))
        # Other work on the machine skews every number here; say how busy it was.
        load_after = os.getloadavg()[0]
        print(f"load average (1 min) while measuring at {size:,}: {load_before:.1f} before, {load_after:.1f} after")
    return rows


def _report(rows: list[tuple], sizes: list[int]) -> None:
    print(f"\n{'orders':>8} {'who':6} {'view':18} {'total':>7} {'p50 ms':>8} {'p95 ms':>8}")
    for size, who, kind, total, p50, p95 in rows:
        print(f"{size:>8,} {who:6} {kind:18} {total:>7,} {p50:>8.1f} {p95:>8.1f}")
    if len(sizes) < 2:
        return
    small, large = min(sizes), max(sizes)
    p95 = {(size, who, kind): value for size, who, kind, _, _, value in rows}
    print(f"\np95 at {large:,} / p95 at {small:,} (target <= {TARGET_RATIO:.0f}x):")
    for who in ("user", "admin"):
        for kind in VIEWS:
            ratio = p95[large, who, kind] / p95[small, who, kind]
            verdict = "met" if ratio <= TARGET_RATIO else "NOT met"
            print(f"  {who:6} {kind:18} {ratio:5.2f}x  {verdict}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,100000", help="desk sizes to measure, comma-separated, ascending")
    parser.add_argument("--requests", type=int, default=200, help="timed requests per view and person")
    arguments = parser.parse_args()
    asyncio.run(main([int(n) for n in arguments.sizes.split(",")], arguments.requests))
