"""Session fixtures: one MongoDB for each test process (MONGODB_URI, else an embedded server of its own)."""

import gc
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

import httpx
import pytest
from argon2 import PasswordHasher
from fastapi import FastAPI
from pymongo import AsyncMongoClient
from pymongo.asynchronous.database import AsyncDatabase

from desk import state
from desk.agent.core.client import use_provider
from desk.agent.core.provider import Provider
from desk.app import ensure_indexes, install_api, wire
from desk.auth import passwords
from desk.config import Settings, use_settings
from desk.db.client import Database, use_database
from desk.db.embedded import EmbeddedMongo
from desk.http import CSRF_HEADER
from desk.users import service as users_service
from desk.users.models import UserAdminUpdate, UserCreate
from desk.work_orders import service as work_orders_service
from desk.work_orders.models import WorkOrderCreate, WorkOrderRead
from tests.clock import ManualClock
from tests.fake_provider import fake_provider  # noqa: F401 - the fixture, for every test directory
from tests.helpers import PASSWORD, actor, per_process, session_clients

TEST_DB = per_process("desk_test")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The fuzz test first: the longest file by minutes; handed out late, it ran alone at the end while the other
    worker had nothing left to do."""
    items.sort(key=lambda item: item.path.name != "test_fuzz.py")  # stable: every other test keeps its order


def pytest_collection_finish(session: pytest.Session) -> None:
    """What collection imported (the desk, NiceGUI, every test module) lives as long as the run: the collector stops
    walking it. NiceGUI's reset between UI tests collects twice, and each walk of that heap cost about half a second."""
    gc.freeze()


@pytest.fixture(scope="session")
def mongo_uri(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """MONGODB_URI when set (a real MongoDB), else an embedded server started once for this test process."""
    if uri := os.environ.get("MONGODB_URI"):
        yield uri
        return
    server = EmbeddedMongo(tmp_path_factory.mktemp("mongo"))  # untraced by coverage (its launcher sees to it)
    uri = server.start()
    try:
        yield uri
    finally:
        server.stop()


@pytest.fixture(scope="session")
async def db(mongo_uri: str) -> AsyncIterator[AsyncDatabase]:
    """The `desk_test` database through one client shared by the run."""
    client: AsyncMongoClient = AsyncMongoClient(mongo_uri, tz_aware=True)
    database = Database(client, TEST_DB)  # the desk's own handle, as `desk run` opens it
    try:
        await ensure_indexes(database)
        yield database
    finally:
        await client.close()


@pytest.fixture(autouse=True)
async def clean_db(request: pytest.FixtureRequest) -> AsyncIterator[None]:
    """Empty every collection after a test that used the database (emptied, not dropped:
    re-creating a dropped collection breaks some indexes on the embedded engine)."""
    yield
    if "db" not in request.fixturenames:
        return
    database: AsyncDatabase = request.getfixturevalue("db")
    for name in await database.list_collection_names():
        if not name.startswith("system."):
            await database[name].delete_many({})


# Argon2id at its lowest cost: the desk's own (OWASP's) is meant to slow a guesser down, and every person a
# test makes is hashed, every login verified. Hashes keep their parameters, so either kind verifies.
QUICK_HASHER = PasswordHasher(time_cost=1, memory_cost=8, parallelism=1)
QUICK_DUMMY_HASH = QUICK_HASHER.hash("not a real password, only for equal timing")


@pytest.fixture(autouse=True)
def quick_password_hashing(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Passwords hashed at argon2id's lowest cost in this process, unless the test asks for `owasp_hashing`."""
    if "owasp_hashing" not in request.fixturenames:
        monkeypatch.setattr(passwords, "_hasher", QUICK_HASHER)
        # a wrong email is checked against this one: it costs what a wrong password does
        monkeypatch.setattr(passwords, "_DUMMY_HASH", QUICK_DUMMY_HASH)


@pytest.fixture
def owasp_hashing() -> None:
    """The desk's own argon2id parameters for this test (`quick_password_hashing` stands aside)."""


# --- the desk's own fixtures: real services, real database, a client per person ---


@pytest.fixture
def settings() -> Iterator[Settings]:
    """Test settings (no environment file); tests that need other values build their own and `use_settings`."""
    test_settings = Settings(desk_login_attempts_per_minute=1000, desk_writes_per_minute=1000)
    use_settings(test_settings)  # a fresh Desk for each test (desk/state.py)...
    wire(state.current())  # ...with the listeners main.py wires on its bus
    yield test_settings
    use_settings(None)


@pytest.fixture
def clock(settings: Settings) -> ManualClock:
    """The Desk's clock for this test, what limits count time in: it stands still until the test moves it."""
    stopped = ManualClock()
    state.current().clock = stopped
    return stopped


@pytest.fixture
def app(db: AsyncDatabase, settings: Settings, clock: ManualClock) -> FastAPI:
    """The desk's API (the same routers and error handlers `desk run` mounts) on the test database."""
    api_app = FastAPI()
    install_api(api_app)
    use_database(db)
    return api_app


@pytest.fixture
async def anonymous(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    """A client with no session; sends the CSRF header like the desk's own pages would."""
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://desk.test") as client:
        client.headers[CSRF_HEADER] = "1"
        yield client


@pytest.fixture
def make_user(db: AsyncDatabase, settings: Settings) -> Callable[..., Awaitable[dict]]:
    """Create a person through the real service; returns their stored user with the plain password."""
    made = 0

    async def make(role: str = "user", *, email: str | None = None, name: str | None = None) -> dict:
        nonlocal made
        made += 1
        email = email or f"{role}{made}@example.com"
        data = UserCreate(email=email, name=name or f"{role.title()} {made}", role=role, password=PASSWORD)
        user = await users_service.register(db=db, data=data)
        return {**user.model_dump(by_alias=True), "password": PASSWORD}

    return make


@pytest.fixture
async def client_for(app: FastAPI, db: AsyncDatabase) -> AsyncIterator[Callable[[dict], Awaitable[httpx.AsyncClient]]]:
    """A logged-in client for a user, talking to the app in process."""
    in_process = httpx.ASGITransport(app)
    async with session_clients(
        db, lambda: httpx.AsyncClient(transport=in_process, base_url="http://desk.test")
    ) as login:
        yield login


@pytest.fixture
def change_user(db: AsyncDatabase, make_user) -> Callable[..., Awaitable[dict]]:
    """Change a person as an admin would (`role`, `active`), through the real users service.

    Orders can no longer be given to a viewer or a deactivated person, so a test that needs one
    owning an order gives it to them first and changes them afterwards, as happens on a real desk.
    """

    async def change(user: dict, **fields: object) -> dict:
        admin = await make_user("admin")
        data = UserAdminUpdate(**fields)
        changed = await users_service.update_user(db=db, actor=actor(admin), user_id=user["id"], data=data)
        return {**user, **changed.model_dump(by_alias=True)}

    return change


@pytest.fixture
def make_order(db: AsyncDatabase) -> Callable[..., Awaitable[WorkOrderRead]]:
    """Create a work order as `user` through the real service."""

    async def make(user: dict, title: str = "Leaking tap in kitchen", **fields: object) -> WorkOrderRead:
        return await work_orders_service.create(db=db, actor=actor(user), data=WorkOrderCreate(title=title, **fields))

    return make


# --- AI: the scripted fake provider on loopback is the only fake in the suite ---

API_KEY = "sk-test-key-never-logged"


@pytest.fixture
def ai_settings(settings: Settings, fake_provider) -> Settings:  # noqa: F811
    """AI on, pointed at the fake provider on loopback (a private address, so explicitly allowed)."""
    enabled = Settings(
        desk_login_attempts_per_minute=settings.desk_login_attempts_per_minute,
        ai_enabled=True,
        ai_base_url=fake_provider.url,
        ai_api_key=API_KEY,
        ai_allow_private_base_url=True,
    )
    use_settings(enabled)
    return enabled


@pytest.fixture
async def provider(ai_settings: Settings):
    """The real provider adapter talking to the fake over HTTP; also what the API routes use."""
    adapter = Provider.from_settings(ai_settings)
    use_provider(adapter)
    yield adapter
    use_provider(None)
    await adapter.aclose()
