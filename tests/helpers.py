"""Small helpers shared by tests (fixtures live in conftest.py)."""

import asyncio
import contextlib
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

import httpx
import pytest
from bson import ObjectId
from nicegui import background_tasks
from nicegui.testing import User
from pymongo.asynchronous.database import AsyncDatabase

from desk.actors import Actor, Role
from desk.auth import service as auth_service
from desk.auth import throttle
from desk.config import Settings, use_settings
from desk.errors import Unauthorized
from desk.http import CSRF_HEADER, session_cookie_name
from desk.schema import now

PASSWORD = "correct horse battery staple"


def per_process(name: str) -> str:
    """A database name of this test process's own. dev.py runs the suite in two (pytest-xdist): each
    starts its own embedded server, but on a shared MONGODB_URI the two must not empty each other's."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    return f"{name}_{worker}" if worker else name


def actor(user: dict) -> Actor:
    """The Actor a page makes for this test user, in a browser session that has just logged in."""
    return Actor(id=user["id"], role=Role(user["role"]), logged_in_at=now())


def tuned(base: Settings, **changes: object) -> Settings:
    """The AI settings with some values changed, built anew so every field is validated."""
    return Settings(**{**{name: getattr(base, name) for name in Settings.model_fields}, **changes})


def reconfigure(base: Settings, **changes: object) -> Settings:
    """`tuned` settings made the process's own (what the routes read on each request)."""
    changed = tuned(base, **changes)
    use_settings(changed)
    return changed


async def until(check: Callable[[], object], *, what: str, within: float = 5.0) -> float:
    """Poll `check` (sync or async) until truthy; returns the seconds it took, fails the test after `within`."""
    started = time.monotonic()
    while True:
        value = check()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return time.monotonic() - started
        if time.monotonic() - started > within:
            pytest.fail(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


def until_blocking(check: Callable[[], object], *, what: str, within: float = 5.0) -> float:
    """`until` for a test without an event loop, while a thread or another process does the work."""
    started = time.monotonic()
    while not check():
        if time.monotonic() - started > within:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.01)
    return time.monotonic() - started


def error_of(user: User, marker: str) -> str | None:
    """The message a page shows beside the field with this marker."""
    (element,) = user.find(marker=marker).elements
    return element.error


async def lock_out(db, email: str, *, wrong: str = "a wrong password") -> None:
    """Lock an account as only a guesser spread over many addresses can: LOCK_FAILURES wrong passwords, each
    from an address of its own (so no address's own delay stands in the way)."""
    for n in range(throttle.LOCK_FAILURES):
        with pytest.raises(Unauthorized):
            await auth_service.login(db=db, email=email, password=wrong, ip=f"10.66.{n}.1")


@contextlib.asynccontextmanager
async def session_clients(
    db: AsyncDatabase, new_client: Callable[[], httpx.AsyncClient]
) -> AsyncIterator[Callable[[dict], Awaitable[httpx.AsyncClient]]]:
    """`login(user)`: a client with a real session of that person (opened by the auth service) and the CSRF header.

    The clients are closed when the block ends.
    """
    clients: list[httpx.AsyncClient] = []

    async def login(user: dict) -> httpx.AsyncClient:
        secret = await auth_service.open_session(db=db, user_id=ObjectId(user["id"]))
        client = new_client()
        client.headers[CSRF_HEADER] = "1"
        client.cookies.set(session_cookie_name(), secret)
        clients.append(client)
        return client

    try:
        yield login
    finally:
        for client in clients:
            await client.aclose()


@contextlib.contextmanager
def handlers_started() -> Iterator[set[asyncio.Task]]:
    """The tasks the block's clicks started: NiceGUI runs each async event handler as a task of its own.

    Awaiting them is waiting for what the clicks did, a second click that got past a guard included.
    """
    before = set(background_tasks.running_tasks)
    started: set[asyncio.Task] = set()
    yield started
    started.update(background_tasks.running_tasks - before)
