"""deploy/nginx.conf, run by Debian's nginx (bench/nginx.py) in front of two `desk run` on one database.

One of the two runs the worker, as in production. Each test module that asks for `stack` gets its own:
the login throttle counts every login from 127.0.0.1, and one module's logins must not use up another's.
"""

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass

import httpx
import pytest

from bench.harness import Desk, desk_running
from bench.nginx import Nginx, nginx_running
from desk.db.embedded import EmbeddedMongo
from tests.fake_provider import _shared_fake

ADMIN = {"email": "ops@example.com", "password": "a sturdy passphrase"}
CSRF = {"X-Desk-CSRF": "1"}
LOGIN_LIMIT = 8


@dataclass(frozen=True)
class Stack:
    nginx: Nginx
    desks: tuple[Desk, Desk]  # the first runs the worker

    @property
    def url(self) -> str:
        return self.nginx.url

    @property
    def routes(self) -> dict[int, str]:
        """Upstream port -> a desk_route cookie value nginx sends there."""
        return self.nginx.routes


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
        "FORWARDED_ALLOW_IPS": "127.0.0.1",  # nginx's address, as compose names its own
    }
    # The database outlives the desks: stopped first, it left each desk's client waiting 5 s (its server
    # selection) to end its sessions as it stopped, 5 to 13 s of this module's teardown.
    with EmbeddedMongo(tmp / "mongo") as uri, ExitStack() as stack:
        web = stack.enter_context(desk_running(tmp / "a", MONGODB_URI=uri, **settings))  # runs the worker
        other = stack.enter_context(desk_running(tmp / "b", MONGODB_URI=uri, DESK_RUN_WORKER="false", **settings))
        nginx = stack.enter_context(nginx_running(tmp / "nginx", [web.port, other.port]))
        running = Stack(nginx=nginx, desks=(web, other))
        # The worker's triage agent would call the scripted provider for each order made here: these
        # tests are about the proxy, so the admin turns it off first (its own switch, in the policy: the
        # desk-wide kill switch would stop the copilot these tests stream from too).
        with logged_in(running, next(iter(running.routes.values()))) as admin:
            version = admin.get("/api/v1/admin/agents/triage/config").json()["version"]
            off = {"version": version, "enabled": False}
            assert admin.patch("/api/v1/admin/agents/triage/config", json=off, headers=CSRF).json()["enabled"] is False
        yield running


@pytest.fixture(scope="module")
def fake_provider_url() -> str:
    return _shared_fake().url  # the suite's one loopback fake; `fake_provider` empties it per test


@contextmanager
def logged_in(stack: Stack, route: str) -> Iterator[httpx.Client]:
    """A client logged in as the admin through nginx, routed to the process `route` hashes to."""
    with httpx.Client(base_url=stack.url, cookies={"desk_route": route}, timeout=30) as client:
        assert client.post("/api/v1/auth/login", json=ADMIN, headers=CSRF).status_code == 200
        yield client
