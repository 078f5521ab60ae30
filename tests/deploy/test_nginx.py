"""deploy/nginx.conf, run by Debian's nginx in front of two `desk run` on one database (one runs the worker).

The stack (tests/deploy/conftest.py, rendered by bench/nginx.py) uses the shipped server block as written,
with only its upstream servers and listen address swapped for the test's; the access log records which
upstream served each request, so a test can tell the two processes apart.
"""

import json
import socket
import time

import httpx
from httpx_sse import connect_sse

from tests.deploy.conftest import ADMIN, CSRF, LOGIN_LIMIT, Stack, logged_in
from tests.fake_provider import Turn


def test_a_page_loads_and_its_websocket_upgrades_through_nginx(stack: Stack):
    page = httpx.get(f"{stack.url}/login")
    cookie = page.cookies.get("desk_route")
    again = httpx.get(f"{stack.url}/login", cookies={"desk_route": cookie})

    assert page.status_code == 200 and "Work Order Desk" in page.text
    assert httpx.get(f"{stack.url}/metrics").status_code == 404  # scraped per process, never from outside
    assert cookie and "desk_route" not in again.headers.get("set-cookie", "")  # set once, then kept
    assert stack.nginx.upstreams(cookie) == {stack.nginx.upstreams(cookie).pop()}  # one browser, one process
    with socket.create_connection(("127.0.0.1", int(stack.url.rsplit(":", 1)[1])), timeout=10) as conn:
        conn.sendall(
            b"GET /_nicegui_ws/socket.io/?EIO=4&transport=websocket HTTP/1.1\r\nHost: desk\r\n"
            b"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
            b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nCookie: desk_route=" + cookie.encode() + b"\r\n\r\n"
        )
        assert conn.recv(4096).startswith(b"HTTP/1.1 101")


def test_a_change_through_one_process_is_read_through_the_other(stack: Stack):
    (one, first), (two, second) = stack.routes.items()
    with logged_in(stack, first) as a, logged_in(stack, second) as b:
        made = a.post("/api/v1/work-orders", json={"title": "Door sticks in room 4"}, headers=CSRF)
        seen = b.get(f"/api/v1/work-orders/{made.json()['id']}")
        changed = b.patch(
            f"/api/v1/work-orders/{made.json()['id']}", json={"version": 1, "priority": "high"}, headers=CSRF
        )
        back = a.get(f"/api/v1/work-orders/{made.json()['id']}")

    assert made.status_code == 201 and seen.status_code == 200 and changed.status_code == 200
    assert seen.json()["title"] == "Door sticks in room 4" and back.json()["priority"] == "high"
    assert stack.nginx.upstreams(first) == {one} and stack.nginx.upstreams(second) == {two}


def test_the_copilots_first_token_arrives_before_the_stream_ends(stack: Stack, fake_provider):
    fake_provider.script(Turn.slow("One two three four five six", delay=0.4, chunks=6))
    route = next(iter(stack.routes.values()))
    with logged_in(stack, route) as client:
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


def test_the_desk_knows_the_browsers_address_nginx_saw_not_nginxs_nor_a_forged_one(stack: Stack):
    # The browser connects from 127.0.0.2, nginx from 127.0.0.1: the desk believes nginx alone (FORWARDED_ALLOW_IPS).
    before = [len(desk.log.read_bytes()) for desk in stack.desks]
    forged = {"X-Forwarded-For": "198.51.100.9", "X-Real-IP": "198.51.100.9", **CSRF}
    wrong = {"email": ADMIN["email"], "password": "a wrong guess from afar"}
    with httpx.Client(transport=httpx.HTTPTransport(local_address="127.0.0.2"), timeout=30) as browser:
        answer = browser.post(f"{stack.url}/api/v1/auth/login", json=wrong, headers=forged)
    addresses = _failed_login_addresses(stack, skip=before)

    assert answer.status_code == 401
    assert addresses == ["127.0.0.2"]


def _failed_login_addresses(stack: Stack, *, skip: list[int], timeout: float = 10.0) -> list[str]:
    """The addresses of failed logins the desks logged past the first `skip` bytes of each one's log."""
    deadline = time.monotonic() + timeout
    while True:
        lines = [
            line for desk, n in zip(stack.desks, skip, strict=True) for line in desk.log.read_bytes()[n:].splitlines()
        ]
        events = [json.loads(line) for line in lines if line.startswith(b"{")]
        found = [event["address"] for event in events if event.get("event") == "login_failed"]
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


def test_a_forged_x_forwarded_for_does_not_escape_the_login_throttle(stack: Stack):
    # The last test here: it uses up this minute's logins from 127.0.0.1. The throttle counts per clock
    # minute (the desks' own: no test moves it): a burst that straddled two would start counting again
    # halfway, so one that did is sent again, all in the minute it ended in.
    for _ in range(2):
        minute, answers = time.time() // 60, []
        for n in range(LOGIN_LIMIT + 3):
            forged = {"X-Forwarded-For": f"198.51.100.{n}", "X-Real-IP": f"198.51.100.{n}", **CSRF}
            wrong = {"email": ADMIN["email"], "password": f"wrong guess {n}"}
            answers.append(httpx.post(f"{stack.url}/api/v1/auth/login", json=wrong, headers=forged).status_code)
        if time.time() // 60 == minute:
            break

    assert 429 in answers[: LOGIN_LIMIT + 1]  # the earlier tests' logins count against the same address
    assert answers[-2:] == [429, 429]  # a fresh forged address each time changes nothing
