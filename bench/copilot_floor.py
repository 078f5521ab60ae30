"""Copilot floor: what this stack adds to the first token with no desk on it (for reading bench/copilot.py).

Measures the floor app of bench/floor_app.py alone, twice: once doing only what any service in
front of the model must do on this stack ("checks and call"), once also storing what the desk
stores for a turn ("and the turn's writes"). The clients, the fake and the pairing of each turn with
a direct call are bench/copilot.py's, so the figures compare; bench/copilot.py also runs the second
one turn by turn beside the desk, for the ratios. Run by hand, never in CI:

    .venv/bin/python -m bench.copilot_floor [--turns 200] [--concurrent 10] [--rounds 100] [--repeat 1]
"""

import asyncio
import functools
import os
import tempfile
from pathlib import Path

from bench.copilot import Stream, arguments, compare, serve_fake, ttft_floor
from bench.floor_app import floor_running, seed
from bench.harness import free_port, running
from desk.db.embedded import EmbeddedMongo


async def measure(base: str, fake_url: str, *, concurrent: int, pids: dict[str, int], **runs: int) -> None:
    floors = [Stream(base) for _ in range(concurrent)]
    fakes = [Stream(fake_url) for _ in range(concurrent)]
    people = [functools.partial(ttft_floor, stream, person) for person, stream in enumerate(floors)]
    await compare(fakes, people, pids=pids, **runs)
    for stream in floors + fakes:
        await stream.close()


def main() -> None:
    args = arguments(__doc__.splitlines()[0])
    fake_port = free_port()
    fake_url = f"http://127.0.0.1:{fake_port}/v1"
    with (
        tempfile.TemporaryDirectory(prefix="desk-copilot-floor-") as tmp,
        (database := EmbeddedMongo(Path(tmp) / "mongo")) as uri,
        running(serve_fake(fake_port)) as fake,
    ):
        seed(uri, args.concurrent)
        for writes, title in ((False, "checks and call"), (True, "and the turn's writes")):
            with floor_running(uri, fake_url, writes=writes) as (base, pid):
                print(f"\n== floor: {title}")
                pids = {"floor": pid, "database": database.pid, "fake": fake.pid, "bench": os.getpid()}
                runs = {"turns": args.turns, "rounds": args.rounds, "repeat": args.repeat}
                asyncio.run(measure(base, fake_url, concurrent=args.concurrent, pids=pids, **runs))


if __name__ == "__main__":
    main()
