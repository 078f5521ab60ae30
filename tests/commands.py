"""The database work of a piece of the desk's work, counted at the driver (pymongo's command monitoring).

The count tests pin these figures and the benches print them (bench/api.py, bench/copilot.py, bench/triage.py,
bench/notifications.py): both count through this module, so a bench prints what the suite pins (issue 46).
"""

from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta

import httpx
from fastapi import FastAPI
from pymongo import AsyncMongoClient, monitoring

from desk import state
from desk.agent.core.provider import Provider
from desk.agent.triage import policy
from desk.app import install_api, wire
from desk.config import Settings, use_settings
from desk.db.client import Database, use_database
from desk.jobs.table import Context
from desk.schema import now
from tests.clock import ManualClock
from tests.helpers import tuned
from tests.triage.conftest import triage_worker


class Commands(monitoring.CommandListener):
    """Every command a client sends, as (command, collection); `endSessions` (sent as a client closes) left out."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str]] = []

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        if event.command_name == "endSessions":
            return
        collection = event.command.get(event.command_name)
        self.sent.append((event.command_name, collection if isinstance(collection, str) else ""))

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        pass

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        pass

    def counted(self) -> Counter[tuple[str, str]]:
        return Counter(self.sent)

    def clear(self) -> None:
        self.sent.clear()


@asynccontextmanager
async def watched(uri: str, name: str) -> AsyncIterator[tuple[Database, Commands]]:
    """A database handle on a client of its own whose every command is counted, from a connected start (its
    connection's handshake and first `ping` are not counted)."""
    commands = Commands()
    client: AsyncMongoClient = AsyncMongoClient(uri, tz_aware=True, event_listeners=[commands])
    try:
        database = Database(client, name)
        await database.command("ping")
        commands.clear()
        yield database, commands
    finally:
        await client.close()


@asynccontextmanager
async def api_watched(
    app: FastAPI, uri: str, name: str, token: str
) -> AsyncIterator[tuple[httpx.AsyncClient, Commands]]:
    """An API client sending `token` as a script would, to `app` in process, the app's database counted meanwhile.

    The process's database is the counted one until the block ends (then the one before it again).
    """
    before = state.current().db
    async with watched(uri, name) as (database, commands):
        use_database(database)
        headers = {"Authorization": f"Bearer {token}"}
        transport = httpx.ASGITransport(app)
        try:
            async with httpx.AsyncClient(transport=transport, base_url="http://desk.test", headers=headers) as client:
                yield client, commands
        finally:
            use_database(before)


async def of_request(client: httpx.AsyncClient, commands: Commands, method: str, path: str, **kwargs) -> Counter:
    """The commands of one request (its answer read to the end), counted."""
    return (await _counted(client, commands, method, path, **kwargs))[0]


async def _counted(
    client: httpx.AsyncClient, commands: Commands, method: str, path: str, **kwargs
) -> tuple[Counter, httpx.Response]:
    commands.clear()
    async with client.stream(method, path, **kwargs) as response:
        await response.aread()
    assert response.is_success, response.text
    return commands.counted(), response


async def of_requests(client: httpx.AsyncClient, commands: Commands, *, word: str) -> dict[str, Counter]:
    """The commands of each kind of work-order request, as the count tests pin them and bench/api.py prints them:
    a page of the list, a one-word search for `word`, a create, and an update of the order just created."""
    orders = "/api/v1/work-orders"
    await client.get("/api/v1/auth/me")  # the token's first use stores when (then at most once a minute): not counted
    listed = await of_request(client, commands, "GET", orders)
    found = await of_request(client, commands, "GET", orders, params={"q": word})
    created, response = await _counted(client, commands, "POST", orders, json={"title": "Door will not latch"})
    change = {"version": response.json()["version"], "priority": "high"}
    updated = await of_request(client, commands, "PATCH", f"{orders}/{response.json()['id']}", json=change)
    return {"list": listed, "search": found, "create": created, "update": updated}


async def of_turn(client: httpx.AsyncClient, commands: Commands) -> Counter:
    """The commands of one copilot turn answered with text (its stream read to the end), the first of a conversation
    opened for it (not counted), as the count test pins them and bench/copilot.py prints them."""
    await client.get("/api/v1/auth/me")  # the token's first use: not counted (see `of_requests`)
    session = (await client.post("/api/v1/ai/sessions")).json()["id"]
    # A process reads the kill switch at most once a second by the wall clock (switch.FRESH_SECONDS): what a read
    # kept from the requests above saves depends on how fast they ran. Counted as the first turn of its second.
    state.current().ai_switch = None
    return await of_request(client, commands, "POST", f"/api/v1/ai/sessions/{session}/messages", json={"content": "hi"})


def api(settings: Settings) -> FastAPI:
    """The desk's API as `desk run` mounts it, in this process, on `settings` (a bench counting what a request to its
    `desk run` sends; the tests have their `app` fixture)."""
    use_settings(settings)
    wire(state.current())
    app = FastAPI()
    install_api(app)
    return app


async def of_one_poll(uri: str, name: str, settings: Settings, provider: Provider, *, orders: int) -> list:
    """The commands of one poll of a fresh triage worker over `orders` due orders, each triaged once (one pass at a
    time, on a clock that stands still: the breaker's and the look's kept reads do not lapse midway), as
    tests/triage/test_commands.py pins them and bench/triage.py prints them. The desk's policy is stored already,
    as on any desk after its first pass."""
    async with watched(uri, name) as (database, commands):
        await policy.current(database, settings)
        one_at_a_time = tuned(settings, agent_concurrency=1)
        worker = triage_worker(one_at_a_time, provider, clock=ManualClock(now() + timedelta(seconds=1)))
        commands.clear()
        assert await worker.run_due(Context(db=database, settings=one_at_a_time)) == orders
    return list(commands.sent)
