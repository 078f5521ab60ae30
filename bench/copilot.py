"""Copilot benchmark: how much latency does the desk add to the model's first token? (issue: M1 engine)

A fake OpenAI-compatible provider on loopback, in its own process, answers at once. Time to first
token is measured straight from the fake, and through `POST /api/v1/ai/sessions/:id/messages` of a
real `desk run` (auth, checks, run bookkeeping, the SSE stream), for sequential turns and for
concurrent streams (one per user: a person has one stream at a time), with the same lean client
(`Stream`) on both paths. Beside each desk turn, the same person takes a turn on the floor app with
the turn's writes (bench/floor_app.py: the stack with no desk on it), paired with the same direct
call, so the desk's addition is also read against the floor's of the same minutes: the last line
of each run gives the two targets of issue 14 (sequential added p50 within 1 ms of the floor's; at
10 concurrent streams, added p95 within 1.25 x the floor's). Run by hand, never in CI:

    .venv/bin/python -m bench.copilot [--turns 200] [--concurrent 10] [--rounds 100] [--repeat 1] [--via-nginx]
                                      [--counts-only]

With --via-nginx, a second `desk run` (DESK_RUN_WORKER=false) joins the first on the same database and
Debian's nginx runs deploy/nginx.conf in front of both (bench/nginx.py); each round then times the one
process without nginx and nginx with its two processes side by side, and what nginx itself adds: a turn
routed through it to the first process, paired with the same person's direct turn to that process
(the floor then stays out).

First it prints the database commands of one turn, counted as tests/agent/test_commands.py counts (and pins)
them, through tests/commands.py; --counts-only stops there.

Both paths read every answer to its end, so both keep their connection to the fake alive, as
the desk's provider client does. Load averages are printed with each run: the machine is shared.
"""

import argparse
import asyncio
import contextlib
import functools
import json
import os
import secrets
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx

from bench.floor_app import floor_running, seed
from bench.harness import desk_running, free_port, running, serve
from bench.nginx import Nginx, nginx_running
from desk.agent.core.client import use_provider
from desk.agent.core.provider import Provider
from desk.config import Settings
from desk.db.embedded import EmbeddedMongo
from tests.commands import api, api_watched, of_turn
from tests.fake_provider import FakeProvider, Turn

ADMIN_EMAIL, PASSWORD = "admin@bench.local", "bench-" + secrets.token_urlsafe(12)
CHUNKS = ["Hello", " there,", " nothing", " is", " open."]
USAGE = {"prompt_tokens": 200, "completion_tokens": 5}


# The tests' fake, streaming a short answer to every call; the first token leaves as soon as the request is read.
fake_provider = FakeProvider(
    always=Turn.chunks(
        *({"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]} for text in CHUNKS),
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], "usage": USAGE},
    ),
    remember=False,
)


def serve_fake(port: int) -> subprocess.Popen:
    """The fake in its own process, as a real provider is.

    As a thread of the bench it shared the load generator's GIL, so the desk's calls to it could
    wait on the bench's own work (measured: within the noise, but nothing the desk should pay for).
    """
    return serve("bench.copilot:fake_provider", port)


class Stream:
    """One kept-alive HTTP/1.1 connection: posts JSON, times the first chunk holding `marker`, reads to the end.

    Both paths use it. httpx cost the bench about 3 ms of CPU per desk turn (this, about 0.5), on
    the same two cores as the desk, its database and the fake, and added about 0.8 ms to the
    fake's own time to first token: the load generator should take as little as it can.
    """

    def __init__(self, base: str, headers: dict[str, str] | None = None) -> None:
        url = httpx.URL(base)
        self.host, self.port, self.prefix = url.host, url.port, url.path.rstrip("/")
        lines = [f"Host: {self.host}:{self.port}", "Content-Type: application/json"]
        self.headers = "".join(f"{line}\r\n" for line in lines + [f"{k}: {v}" for k, v in (headers or {}).items()])
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def first(self, path: str, body: dict, marker: bytes) -> float:
        if self.reader is None or self.reader.at_eof():  # new, or closed by the server after 5 s idle
            await self.close()
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        assert self.reader is not None
        payload = json.dumps(body).encode()
        request = f"POST {self.prefix}{path} HTTP/1.1\r\n{self.headers}Content-Length: {len(payload)}\r\n\r\n"
        started = time.perf_counter()
        self.writer.write(request.encode() + payload)
        head = await self.reader.readuntil(b"\r\n\r\n")
        if not head.startswith(b"HTTP/1.1 200") or b"transfer-encoding: chunked" not in head.lower():
            raise RuntimeError(f"unexpected answer: {head + await self.reader.read(2000)!r}")
        first = None
        while True:  # chunked body, to its last chunk: the connection is reused, as the desk's provider client does
            size = int((await self.reader.readuntil(b"\r\n")).split(b";")[0], 16)
            chunk = await self.reader.readexactly(size + 2)
            if first is None and marker in chunk:
                first = time.perf_counter() - started
            if size == 0:
                break
        if first is None:
            raise RuntimeError(f"no {marker!r} in the answer")
        return first

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            with contextlib.suppress(OSError):
                await self.writer.wait_closed()


DIRECT = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}


async def ttft_direct(fake: Stream) -> float:
    return await fake.first("/chat/completions", DIRECT, b"data: {")


async def ttft_desk(desk: Stream, session_id: str) -> float:
    path = f"/api/v1/ai/sessions/{session_id}/messages"
    return await desk.first(path, {"content": "Anything open?"}, b"event: token")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def ttft_floor(stream: Stream, person: int) -> float:
    return await stream.first(f"/turns/{person}", {"content": "Anything open?"}, b"event: token")


def report(title: str, direct: list[float], turns: list[float]) -> tuple[float, float]:
    added = [d - f for d, f in zip(turns, direct, strict=True)]
    p50, p95 = percentile(added, 0.5) * 1000, percentile(added, 0.95) * 1000
    print(
        f"{title:<28} n={len(turns):>4}  fake p50 {percentile(direct, 0.5) * 1000:6.1f} ms  "
        f"turn p50 {percentile(turns, 0.5) * 1000:6.1f} ms  p95 {percentile(turns, 0.95) * 1000:6.1f} ms  "
        f"added p50 {p50:5.1f} ms  p95 {p95:5.1f} ms"
    )
    return p50, p95


async def login_tokens(base: str, count: int) -> list[str]:
    """Bearer tokens for `count` people (the admin creates them), each with a copilot session."""
    async with httpx.AsyncClient(base_url=base, headers={"X-Desk-CSRF": "1"}, timeout=30) as admin:
        # the harness waits for the first admin (made by the desk's start-up after /readyz answers)
        login = await admin.post("/api/v1/auth/login", json={"email": ADMIN_EMAIL, "password": PASSWORD})
        login.raise_for_status()
        tokens = []
        for n in range(count):
            email = f"person{n}@bench.local"
            body = {"email": email, "name": f"Person {n}", "role": "user", "password": PASSWORD}
            (await admin.post("/api/v1/admin/users", json=body)).raise_for_status()
            async with httpx.AsyncClient(base_url=base, headers={"X-Desk-CSRF": "1"}, timeout=30) as person:
                await person.post("/api/v1/auth/login", json={"email": email, "password": PASSWORD})
                token = (await person.post("/api/v1/auth/tokens", json={"name": "bench"})).json()["secret"]
            tokens.append(token)
        return tokens


async def floor(client: httpx.AsyncClient, path: str, pids: dict[str, int], times: int = 400) -> str:
    """p50 / p95 and CPU of a plain GET, for reading the figures above it (not part of the targets).

    Through httpx, which costs about 0.8 ms more per request than `Stream`: compare these with each other.
    """
    took, before = [], cpu(pids)
    for _ in range(times):
        started = time.perf_counter()
        (await client.get(path)).raise_for_status()
        took.append(time.perf_counter() - started)
    timing = f"p50 {percentile(took, 0.5) * 1000:5.1f} ms  p95 {percentile(took, 0.95) * 1000:5.1f} ms"
    return f"{timing}  CPU per request: {per_turn(before, cpu(pids), times)}"


async def floor_paired(direct: httpx.AsyncClient, front: httpx.AsyncClient, path: str, times: int = 400) -> str:
    """p50s of a plain GET straight and through nginx, alternated so that drift in the machine's load hits both."""
    straight, through = [], []
    for _ in range(times):
        for client, took in ((direct, straight), (front, through)):
            started = time.perf_counter()
            (await client.get(path)).raise_for_status()
            took.append(time.perf_counter() - started)
    added = [t - s for t, s in zip(through, straight, strict=True)]
    return (
        f"straight p50 {percentile(straight, 0.5) * 1000:5.2f} ms  through nginx p50 "
        f"{percentile(through, 0.5) * 1000:5.2f} ms  nginx added p50 {percentile(added, 0.5) * 1000:5.2f} ms"
    )


async def measure(
    base: str,
    fake_url: str,
    *,
    turns: int,
    concurrent: int,
    rounds: int,
    repeat: int,
    pids: dict[str, int],
    nginx: Nginx | None = None,
    floor_url: str | None = None,
    counted: Settings | None = None,
    counts_only: bool = False,
) -> None:
    tokens = await login_tokens(base, concurrent)
    if counted is not None:
        await turn_commands(counted, tokens[0])
    if counts_only:
        return
    clients = [httpx.AsyncClient(base_url=base, headers={"Authorization": f"Bearer {t}"}, timeout=60) for t in tokens]
    sessions = [(await c.post("/api/v1/ai/sessions")).json()["id"] for c in clients]
    desks = [Stream(base, {"Authorization": f"Bearer {t}"}) for t in tokens]
    people = [functools.partial(ttft_desk, d, s) for d, s in zip(desks, sessions, strict=True)]
    fakes = [Stream(fake_url) for _ in tokens]
    proxied: list[Stream] = []
    floors = [Stream(floor_url) for _ in tokens] if floor_url else []
    if nginx is None:
        beside = [functools.partial(ttft_floor, stream, person) for person, stream in enumerate(floors)]
        await compare(fakes, people, turns=turns, rounds=rounds, repeat=repeat, pids=pids, floors=beside)
    else:
        # person i goes to upstream i mod 2, the first to the process `base` is, so pairs compare
        port = httpx.URL(base).port
        routes = [nginx.routes[port], *(route for upstream, route in nginx.routes.items() if upstream != port)]
        proxied = [
            Stream(nginx.url, {"Authorization": f"Bearer {t}", "Cookie": f"desk_route={routes[n % len(routes)]}"})
            for n, t in enumerate(tokens)
        ]
        through = [functools.partial(ttft_desk, p, s) for p, s in zip(proxied, sessions, strict=True)]
        await compare_via_nginx(fakes, people, through, turns=turns, rounds=rounds, repeat=repeat, pids=pids)
    print("\nfor reference, plain requests to the same desk through httpx (not the turns' lean client; no target):")
    print(f"  GET /healthz (no database)          {await floor(clients[0], '/healthz', pids)}")
    print(f"  GET /api/v1/auth/me (bearer token)  {await floor(clients[0], '/api/v1/auth/me', pids)}")
    if nginx is not None:
        cookie = {"desk_route": routes[0]}
        async with httpx.AsyncClient(base_url=nginx.url, headers=clients[0].headers, cookies=cookie) as front:
            print("  alternating one straight to the first process, one through nginx to it (paired):")
            print(f"    GET /healthz          {await floor_paired(clients[0], front, '/healthz')}")
            print(f"    GET /api/v1/auth/me   {await floor_paired(clients[0], front, '/api/v1/auth/me')}")
    for client in clients:
        await client.aclose()
    for stream in desks + fakes + proxied + floors:
        await stream.close()


async def turn_commands(settings: Settings, token: str) -> None:
    """The database commands of one turn, as tests/agent/test_commands.py counts (and pins) them: a person's turn
    with their token, through the desk's API in this process, on the same database, fake and settings."""
    app = api(settings)
    provider = Provider.from_settings(settings)
    use_provider(provider)
    uri = settings.mongodb_uri.get_secret_value() if settings.mongodb_uri else ""
    try:
        async with api_watched(app, uri, settings.mongodb_db, token) as (client, commands):
            sent = await of_turn(client, commands)
    finally:
        use_provider(None)
        await provider.aclose()
    print(f"database commands per copilot turn: {sum(sent.values())}", flush=True)


async def compare(
    fakes: list[Stream],
    people: list[Callable[[], Awaitable[float]]],
    *,
    turns: int,
    rounds: int,
    repeat: int,
    pids: dict[str, int],
    floors: list[Callable[[], Awaitable[float]]] | None = None,
) -> None:
    """Time to first token straight from the fake and through `people` (one turn each), sequential and concurrent.

    `fakes[i]` is person i's own connection to the fake; the added time pairs each person's turn with
    their direct call of the same round. `floors[i]`, when given, is person i's turn on the floor
    app (bench/floor_app.py), taken beside their turn on the desk and paired with the same direct
    call: the machine's speed drifts by half within an hour here, and a drift moves both alike, so
    the desk's figures are read against the floor's of the same minutes.
    """
    floors = floors or []
    for _ in range(10):  # warm up every path
        await ttft_direct(fakes[0])
        await people[0]()
        if floors:
            await floors[0]()
    for attempt in range(1, repeat + 1):
        print(f"\nrun {attempt} of {repeat}, load average before: {load()}")
        direct, desk, floor = [], [], []
        before = cpu(pids)
        for _ in range(turns):
            direct.append(await ttft_direct(fakes[0]))
            desk.append(await people[0]())
            if floors:
                floor.append(await floors[0]())
        sequential = report("sequential", direct, desk)
        if floors:
            sequential_floor = report("  floor, beside it", direct, floor)
        print(f"{'':28} CPU per turn, each process: {per_turn(before, cpu(pids), turns)}")
        direct, desk, floor = [], [], []
        before = cpu(pids)
        for round_ in range(rounds):
            direct += await asyncio.gather(*(ttft_direct(f) for f in fakes))
            # the desk's and the floor's rounds alternate which goes first, so neither always follows the other
            for side in (people, floors) if round_ % 2 == 0 else (floors, people):
                took = await asyncio.gather(*(turn() for turn in side))
                (desk if side is people else floor).extend(took)
        loaded = report(f"{len(people)} concurrent streams", direct, desk)
        if floors:
            loaded_floor = report("  floor, beside it", direct, floor)
        print(f"{'':28} CPU per turn, each process: {per_turn(before, cpu(pids), rounds * len(people))}")
        print(
            f"targets: added p50 <= 5 ms ({sequential[0]:.1f}), p95 <= 15 ms sequential ({sequential[1]:.1f}), "
            f"p95 <= 30 ms at {len(people)} concurrent ({loaded[1]:.1f}); load average after: {load()}"
        )
        if floors:
            print(
                f"against the floor with the turn's writes, same run: sequential added p50 "
                f"{sequential[0] - sequential_floor[0]:+.1f} ms (target <= +1 ms); at {len(people)} concurrent, "
                f"added p95 {loaded[1] / loaded_floor[1]:.2f} x (target <= 1.25 x)"
            )


async def compare_via_nginx(
    fakes: list[Stream],
    direct: list[Callable[[], Awaitable[float]]],
    through: list[Callable[[], Awaitable[float]]],
    *,
    turns: int,
    rounds: int,
    repeat: int,
    pids: dict[str, int],
) -> None:
    """`compare` for one process without nginx (`direct`) and nginx with two (`through`), in the same rounds.

    `through[0]` reaches the process `direct[0]` calls, so their paired difference is nginx's own addition.
    """
    for _ in range(10):  # warm up every path
        await ttft_direct(fakes[0])
        await direct[0]()
        await through[0]()
        await through[1]()
    for attempt in range(1, repeat + 1):
        print(f"\nrun {attempt} of {repeat}, load average before: {load()}")
        fake, one, proxied = [], [], []
        for _ in range(turns):
            fake.append(await ttft_direct(fakes[0]))
            one.append(await direct[0]())
            proxied.append(await through[0]())
        report("sequential, one process", fake, one)
        report("sequential, through nginx", fake, proxied)
        own = [p - d for p, d in zip(proxied, one, strict=True)]
        nginx_p50, nginx_p95 = percentile(own, 0.5) * 1000, percentile(own, 0.95) * 1000
        print(f"{'nginx itself (paired)':<28} n={len(own):>4}  added p50 {nginx_p50:5.2f} ms  p95 {nginx_p95:5.2f} ms")
        fake, one, proxied, fake_proxied = [], [], [], []
        before = cpu(pids)
        for _ in range(rounds):
            fake += await asyncio.gather(*(ttft_direct(f) for f in fakes))
            one += await asyncio.gather(*(turn() for turn in direct))
            fake_proxied += await asyncio.gather(*(ttft_direct(f) for f in fakes))
            proxied += await asyncio.gather(*(turn() for turn in through))
        alone = report(f"{len(direct)} concurrent, one process", fake, one)
        behind = report(f"{len(through)} concurrent, nginx + two", fake_proxied, proxied)
        print(f"{'':28} CPU per turn (both paths): {per_turn(before, cpu(pids), rounds * len(direct) * 2)}")
        print(
            f"at {len(direct)} concurrent, added p95: one process {alone[1]:.1f} ms, nginx + two processes "
            f"{behind[1]:.1f} ms; nginx's own added p50 {nginx_p50:.2f} ms (target <= 1 ms); "
            f"load average after: {load()}"
        )


def cpu(pids: dict[str, int]) -> dict[str, float]:
    """CPU seconds used so far by each process (Linux /proc; empty elsewhere)."""
    used = {}
    for name, pid in pids.items():
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        used[name] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime
    return used


def per_turn(before: dict[str, float], after: dict[str, float], turns: int) -> str:
    # 10 ms clock ticks: meaningful over hundreds of turns, not over a few
    return ", ".join(f"{name} {(after[name] - before[name]) / turns * 1000:.1f} ms" for name in after) or "n/a"


def load() -> str:
    """The 1, 5 and 15 minute load averages: the machine is shared, so read every figure beside them."""
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def arguments(description: str, *, via_nginx: bool = False) -> argparse.Namespace:
    """The options `compare` takes, for this bench and the floor's (`via_nginx`: this bench's own option)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--concurrent", type=int, default=10)
    # 100 rounds: a p95 over 1,000 turns; over 200 (20 rounds) the desk-to-floor ratio swung 0.9-1.9 x
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=1, help="measure this many times against the same server")
    if via_nginx:
        parser.add_argument("--via-nginx", action="store_true", help="also through nginx in front of two processes")
        parser.add_argument("--counts-only", action="store_true", help="print the commands of a turn, untimed")
    return parser.parse_args()


def main() -> None:
    args = arguments(__doc__.splitlines()[0], via_nginx=True)
    fake_port = free_port()
    fake_url = f"http://127.0.0.1:{fake_port}/v1"
    settings = {
        "DESK_SECRET": "b" * 40,
        "DESK_ADMIN_EMAIL": ADMIN_EMAIL,
        "DESK_ADMIN_PASSWORD": PASSWORD,
        "AI_ENABLED": "true",
        "AI_BASE_URL": fake_url,
        "AI_API_KEY": "bench-key",
        "AI_ALLOW_PRIVATE_BASE_URL": "true",
        "AI_RATE_LIMIT_MAX": "100000",
        "AI_DAILY_SPEND_USD": "1000",
        "AGENT_DAILY_SPEND_USD": "1000",
        "AI_GLOBAL_DAILY_SPEND_USD": "1000",
        "DESK_LOGIN_ATTEMPTS_PER_MINUTE": "1000",
    }
    with (
        tempfile.TemporaryDirectory(prefix="desk-copilot-bench-") as tmp,
        (database := EmbeddedMongo(Path(tmp) / "mongo")) as uri,
        running(serve_fake(fake_port)) as fake,
        desk_running(Path(tmp) / "web", MONGODB_URI=uri, **settings) as desk,
        contextlib.ExitStack() as more,
    ):
        pids = {"desk": desk.process.pid, "database": database.pid, "fake": fake.pid, "bench": os.getpid()}
        nginx, floor_url = None, None
        if args.counts_only:  # untimed: neither the floor nor nginx
            pass
        elif not args.via_nginx:  # the floor with the turn's writes, on a database of its own, beside the desk
            floor_database = EmbeddedMongo(Path(tmp) / "floor-mongo")
            floor_uri = more.enter_context(floor_database)
            seed(floor_uri, args.concurrent)
            floor_url, floor_pid = more.enter_context(floor_running(floor_uri, fake_url, writes=True))
            pids |= {"floor": floor_pid, "floor database": floor_database.pid}
        else:
            other = more.enter_context(
                desk_running(Path(tmp) / "web2", MONGODB_URI=uri, DESK_RUN_WORKER="false", **settings)
            )
            nginx = more.enter_context(nginx_running(Path(tmp) / "nginx", [desk.port, other.port]))
            pids |= {"second desk": other.process.pid, "nginx": nginx.worker_pid}
        asyncio.run(
            measure(
                desk.url,
                fake_url,
                turns=args.turns,
                concurrent=args.concurrent,
                rounds=args.rounds,
                repeat=args.repeat,
                pids=pids,
                nginx=nginx,
                floor_url=floor_url,
                counted=Settings(**{key.lower(): value for key, value in settings.items()}, mongodb_uri=uri),
                counts_only=args.counts_only,
            )
        )


if __name__ == "__main__":
    main()
