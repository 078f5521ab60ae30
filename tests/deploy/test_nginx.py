"""deploy/nginx.conf, run by Debian's nginx in front of two `desk run` on one database (one runs the worker).

The shipped server block is used as written; only its upstream servers and listen address are swapped
for this test's, and a main context (pid, logs, temp paths) is wrapped around it. The access log
records which upstream served each request, so a test can tell the two processes apart.
"""

import os
import re
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from httpx_sse import connect_sse

from bench.harness import desk_running, free_port
from desk.db.embedded import EmbeddedMongo
from tests.fake_provider import Turn, _shared_fake

ROOT = Path(__file__).resolve().parents[2]
NGINX = "/usr/sbin/nginx"  # Debian's package, installed by `python3 dev.py test`
ADMIN = {"email": "ops@example.com", "password": "a sturdy passphrase"}
CSRF = {"X-Desk-CSRF": "1"}
LOGIN_LIMIT = 8


@dataclass(frozen=True)
class Stack:
    url: str  # nginx
    access_log: Path
    routes: dict[int, str]  # upstream port -> a desk_route cookie value nginx sends there


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, fake_provider_url: str) -> Iterator[Stack]:
    tmp = tmp_path_factory.mktemp("nginx")
    settings = {
        "DESK_SECRET": "nginx-test-storage-secret-" + "x" * 20,
        "DESK_ADMIN_EMAIL": ADMIN["email"],
        "DESK_ADMIN_PASSWORD": ADMIN["password"],
        "DESK_LOGIN_ATTEMPTS_PER_MINUTE": str(LOGIN_LIMIT),
        "AI_ENABLED": "true",
        "AI_BASE_URL": fake_provider_url,
        "AI_API_KEY": "sk-nginx-test",
        "AI_ALLOW_PRIVATE_BASE_URL": "true",
    }
    with ExitStack() as stack, EmbeddedMongo(tmp / "mongo") as uri:
        web = stack.enter_context(desk_running(tmp / "a", MONGODB_URI=uri, **settings))  # runs the worker
        other = stack.enter_context(desk_running(tmp / "b", MONGODB_URI=uri, DESK_RUN_WORKER="false", **settings))
        port = free_port()
        conf = _render(tmp, port, [web.port, other.port])
        nginx = subprocess.Popen([NGINX, "-e", str(tmp / "error.log"), "-c", str(conf)])  # noqa: S603
        stack.callback(_stop, nginx)
        url = f"http://127.0.0.1:{port}"
        _wait_listening(port, nginx, tmp / "error.log")
        running = Stack(url=url, access_log=tmp / "access.log", routes=_routes(url, tmp / "access.log"))
        # The worker's triage agent would call the scripted provider for each order made here: these
        # tests are about the proxy, so the admin turns it off (the kill switch) first.
        with _session(running, next(iter(running.routes.values()))) as admin:
            assert admin.post("/api/v1/admin/agents/disable", headers=CSRF).json() == {"enabled": False}
        yield running


@pytest.fixture(scope="module")
def fake_provider_url() -> str:
    return _shared_fake().url  # the suite's one loopback fake; `fake_provider` empties it per test


def test_a_page_loads_and_its_websocket_upgrades_through_nginx(stack: Stack):
    page = httpx.get(f"{stack.url}/login")
    cookie = page.cookies.get("desk_route")
    again = httpx.get(f"{stack.url}/login", cookies={"desk_route": cookie})

    assert page.status_code == 200 and "Work Order Desk" in page.text
    assert httpx.get(f"{stack.url}/metrics").status_code == 404  # scraped per process, never from outside
    assert cookie and "desk_route" not in again.headers.get("set-cookie", "")  # set once, then kept
    assert _upstreams(stack, cookie) == {_upstreams(stack, cookie).pop()}  # one browser, one process
    with socket.create_connection(("127.0.0.1", int(stack.url.rsplit(":", 1)[1])), timeout=10) as conn:
        conn.sendall(
            b"GET /_nicegui_ws/socket.io/?EIO=4&transport=websocket HTTP/1.1\r\nHost: desk\r\n"
            b"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
            b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nCookie: desk_route=" + cookie.encode() + b"\r\n\r\n"
        )
        assert conn.recv(4096).startswith(b"HTTP/1.1 101")


def test_a_change_through_one_process_is_read_through_the_other(stack: Stack):
    (one, first), (two, second) = stack.routes.items()
    with _session(stack, first) as a, _session(stack, second) as b:
        made = a.post("/api/v1/work-orders", json={"title": "Door sticks in room 4"}, headers=CSRF)
        seen = b.get(f"/api/v1/work-orders/{made.json()['id']}")
        changed = b.patch(
            f"/api/v1/work-orders/{made.json()['id']}", json={"version": 1, "priority": "high"}, headers=CSRF
        )
        back = a.get(f"/api/v1/work-orders/{made.json()['id']}")

    assert made.status_code == 201 and seen.status_code == 200 and changed.status_code == 200
    assert seen.json()["title"] == "Door sticks in room 4" and back.json()["priority"] == "high"
    assert _upstreams(stack, first) == {one} and _upstreams(stack, second) == {two}


def test_the_copilots_first_token_arrives_before_the_stream_ends(stack: Stack, fake_provider):
    fake_provider.script(Turn.slow("One two three four five six", delay=0.4, chunks=6))
    route = next(iter(stack.routes.values()))
    with _session(stack, route) as client:
        session = client.post("/api/v1/ai/sessions", headers=CSRF).json()
        sent = time.monotonic()
        arrivals = []
        url = f"/api/v1/ai/sessions/{session['id']}/messages"
        with connect_sse(client, "POST", url, json={"content": "Tell me slowly"}, headers=CSRF) as source:
            assert source.response.headers["content-type"].startswith("text/event-stream")
            arrivals = [(sse.event, time.monotonic() - sent) for sse in source.iter_sse()]

    tokens = [at for event, at in arrivals if event == "token"]
    # six frames 0.4 s apart: buffered, every token would arrive together with the end
    assert len(tokens) >= 2 and tokens[-1] - tokens[0] > 1.0
    assert arrivals[-1][1] - tokens[0] > 1.0


def test_a_forged_x_forwarded_for_does_not_escape_the_login_throttle(stack: Stack):
    # The last test here: it uses up this minute's logins from 127.0.0.1.
    answers = []
    for n in range(LOGIN_LIMIT + 3):
        forged = {"X-Forwarded-For": f"198.51.100.{n}", "X-Real-IP": f"198.51.100.{n}", **CSRF}
        wrong = {"email": ADMIN["email"], "password": f"wrong guess {n}"}
        answers.append(httpx.post(f"{stack.url}/api/v1/auth/login", json=wrong, headers=forged).status_code)

    assert 429 in answers[: LOGIN_LIMIT + 1]  # the earlier tests' logins count against the same address
    assert answers[-2:] == [429, 429]  # a fresh forged address each time changes nothing


@contextmanager
def _session(stack: Stack, route: str) -> Iterator[httpx.Client]:
    """A client logged in through nginx, routed to the process `route` hashes to."""
    with httpx.Client(base_url=stack.url, cookies={"desk_route": route}, timeout=30) as client:
        assert client.post("/api/v1/auth/login", json=ADMIN, headers=CSRF).status_code == 200
        yield client


def _render(tmp: Path, port: int, upstreams: list[int]) -> Path:
    site = (ROOT / "deploy" / "nginx.conf").read_text()
    servers = "".join(f"    server 127.0.0.1:{upstream};\n" for upstream in upstreams)
    site, swapped = re.subn(r"^ *server web:8080;.*\n", servers, site, flags=re.MULTILINE)
    site, listened = re.subn(r"listen 80;", f"listen 127.0.0.1:{port};", site)
    assert swapped == listened == 1, "deploy/nginx.conf changed shape: update this test's rendering"
    temp = "\n".join(
        f"    {kind}_temp_path {tmp / kind};" for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    conf = tmp / "nginx.conf"
    conf.write_text(
        f"{'user root;' if os.geteuid() == 0 else ''}\n"
        f"daemon off;\nworker_processes 1;\npid {tmp / 'nginx.pid'};\nerror_log {tmp / 'error.log'} warn;\n"
        "events { worker_connections 256; }\n"
        "http {\n"
        "    log_format upstream '$cookie_desk_route $upstream_addr $request_uri';\n"
        f"    access_log {tmp / 'access.log'} upstream;\n{temp}\n{site}\n}}\n"
    )
    return conf


def _routes(url: str, access_log: Path) -> dict[int, str]:
    """One desk_route value per upstream port, found by probing (the hash decides, not the test)."""
    for n in range(40):
        httpx.get(f"{url}/healthz", cookies={"desk_route": f"probe-{n}"})
    time.sleep(0.2)
    routes: dict[int, str] = {}
    for line in access_log.read_text().splitlines():
        cookie, upstream, _ = line.split(" ", 2)
        routes.setdefault(int(upstream.rsplit(":", 1)[1]), cookie)
    assert len(routes) == 2, routes
    return routes


def _upstreams(stack: Stack, cookie: str) -> set[int]:
    time.sleep(0.1)  # nginx writes the access log line as the answer ends
    lines = [line.split(" ", 2) for line in stack.access_log.read_text().splitlines()]
    return {int(upstream.rsplit(":", 1)[1]) for seen, upstream, _ in lines if seen == cookie and upstream != "-"}


def _wait_listening(port: int, nginx: subprocess.Popen, error_log: Path) -> None:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if nginx.poll() is not None:
            raise RuntimeError(f"nginx exited with {nginx.returncode}: {error_log.read_text(errors='replace')}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("nginx did not listen within 15 s")


def _stop(nginx: subprocess.Popen) -> None:
    nginx.terminate()  # SIGTERM: nginx's fast shutdown
    try:
        nginx.wait(timeout=10)
    except subprocess.TimeoutExpired:
        nginx.kill()
        nginx.wait()
