"""The real desk in a subprocess, its own database, and a Chromium per person.

One `desk run` serves the whole session on the test run's MongoDB, in the `desk_e2e` database
(the autouse clean-up of `desk_test` never touches it); this file empties `desk_e2e` around
every test instead. People and work orders are made through the real services. Chromium
processes are started once and wiped between tests, which keeps the suite fast.
"""

import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import asynccontextmanager, contextmanager, suppress
from pathlib import Path

import pytest
from pymongo import AsyncMongoClient
from pymongo.asynchronous.database import AsyncDatabase
from selenium.common.exceptions import WebDriverException
from selenium.webdriver import Chrome, ChromeOptions
from selenium.webdriver.chrome.service import Service

from bench.harness import Desk, desk_running
from desk.users import service as users_service
from desk.users.models import UserCreate
from desk.work_orders import service as work_orders_service
from desk.work_orders.models import WorkOrderCreate, WorkOrderRead
from tests.e2e.browser import Browser, Screenshots
from tests.fake_provider import _shared_fake
from tests.helpers import PASSWORD, actor, per_process

E2E_DB = per_process("desk_e2e")
ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = ROOT / "screenshots"
CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
WINDOW = (1366, 900)  # every browser's size when it is handed to a test (a test may make it a phone's)
CHROME_ARGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    f"--window-size={WINDOW[0]},{WINDOW[1]}",
)
PEOPLE_AT_ONCE = 2
ADMIN_EMAIL, ADMIN_PASSWORD = "first.admin@example.com", "first admin passphrase 2026"


@pytest.fixture(scope="session")
def desk(chromes: "Chromes", mongo_uri: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Desk]:
    """`desk run` on a free port, ready (its /readyz answers) before the first test.

    `chromes` comes first so that the first browser starts while the database and the desk boot.
    """
    # No worker: its triage agent would take the turns a test scripts for the copilot. The worker's
    # jobs are tested in tests/triage, tests/agent/test_sweeper.py and tests/test_cli.py.
    with e2e_desk(tmp_path_factory.mktemp("desk"), mongo_uri, E2E_DB, DESK_RUN_WORKER="false") as running:
        yield running


@contextmanager
def e2e_desk(home: Path, mongo_uri: str, database: str, **more: str) -> Iterator[Desk]:
    """`desk run` serving `database`, with the first admin and AI on against this process's scripted fake."""
    with desk_running(
        home,
        MONGODB_URI=mongo_uri,
        MONGODB_DB=database,
        DESK_SECRET="e2e-storage-secret-" + "x" * 21,
        DESK_ADMIN_EMAIL=ADMIN_EMAIL,
        DESK_ADMIN_PASSWORD=ADMIN_PASSWORD,
        DESK_LOGIN_ATTEMPTS_PER_MINUTE="1000",  # every browser logs in from 127.0.0.1
        # The copilot talks to the scripted fake provider that runs in this test process, on loopback.
        AI_ENABLED="true",
        AI_BASE_URL=_shared_fake().url,
        AI_API_KEY="sk-e2e-key",
        AI_ALLOW_PRIVATE_BASE_URL="true",
        NICEGUI_STORAGE_PATH=str(home / ".nicegui"),
        **more,
    ) as running:
        yield running


@pytest.fixture(scope="session")
async def e2e_db(mongo_uri: str, desk: Desk) -> AsyncIterator[AsyncDatabase]:
    """`desk_e2e`, the database the desk serves (its indexes made by the desk at start)."""
    async with database(mongo_uri, E2E_DB) as db:
        yield db


@asynccontextmanager
async def database(mongo_uri: str, name: str) -> AsyncIterator[AsyncDatabase]:
    """A client of its own on the database `name`, closed when the block ends."""
    client: AsyncMongoClient = AsyncMongoClient(mongo_uri, tz_aware=True)
    try:
        yield client[name]
    finally:
        await client.close()


@pytest.fixture(autouse=True)
async def clean_e2e_db(e2e_db: AsyncDatabase) -> AsyncIterator[None]:
    """Every test starts on an empty desk (even without the admin the desk made at start) and leaves one."""
    await _empty(e2e_db)
    yield
    await _empty(e2e_db)


async def _empty(db: AsyncDatabase) -> None:
    """Empty every collection (not drop: the embedded engine loses some indexes of a re-created one)."""
    for name in await db.list_collection_names():
        if name.startswith("system."):
            continue
        # The running desk's live feed remembers the last change number it read; restarting the
        # numbering would hide every later change from it, so the sequence counter stays.
        keep = {"_id": {"$ne": "changes:seq"}} if name == "counters" else {}
        await db[name].delete_many(keep)


@pytest.fixture(autouse=True)
def desk_logs_no_errors(desk: Desk) -> Iterator[None]:
    """Fail a test during which the desk logged an error (as NiceGUI's `user` fixture does in-process)."""
    start = desk.log.stat().st_size
    yield
    with desk.log.open() as log:
        log.seek(start)
        written = log.read()
    errors = [line for line in written.splitlines() if _is_error(line)]
    assert not errors, "the desk logged errors during this test:\n" + "\n".join(errors)


def _is_error(line: str) -> bool:
    """An error in the desk's own log (JSON lines); uvicorn's plain-text copy of the same traceback is not counted."""
    try:
        entry = json.loads(line)
    except ValueError:
        return False
    return isinstance(entry, dict) and entry.get("level") in ("error", "critical")


@pytest.fixture
def make_person(e2e_db: AsyncDatabase) -> Callable[..., Awaitable[dict]]:
    """Someone who can log in, made through the real service; their stored user plus the plain password."""
    made = 0

    async def make(role: str = "user", *, name: str) -> dict:
        nonlocal made
        made += 1
        email = f"{name.split(maxsplit=1)[0].lower()}.{made}@example.com"
        user = await users_service.register(
            db=e2e_db, data=UserCreate(email=email, name=name, role=role, password=PASSWORD)
        )
        return {**user.model_dump(by_alias=True), "password": PASSWORD}

    return make


@pytest.fixture
def make_order(e2e_db: AsyncDatabase) -> Callable[..., Awaitable[WorkOrderRead]]:
    """A work order created by `person` through the real service."""

    async def make(person: dict, title: str, **fields: object) -> WorkOrderRead:
        data = WorkOrderCreate(title=title, **fields)
        return await work_orders_service.create(db=e2e_db, actor=actor(person), data=data)

    return make


@pytest.fixture
def browser(desk: Desk, chromes: "Chromes", request: pytest.FixtureRequest) -> Iterator[Callable[[str], Browser]]:
    """A separate Chromium per call (two people, two browsers), as fresh as a new profile; given back at the end.

    A failing test leaves a screenshot of every browser it used in screenshots/.
    """
    shots = Screenshots(SCREENSHOTS, request.node.name)
    used: list[Browser] = []

    def open_browser(name: str) -> Browser:
        used.append(Browser(chromes.take(), desk.url, name, shots))
        return used[-1]

    yield open_browser
    report = getattr(request.node, "rep_call", None)
    for person in used:
        try:
            if report is None or report.failed:
                person.shoot("FAILED")
        finally:
            chromes.give_back(person.driver, desk.url)


@pytest.fixture(scope="session")
def chromes(tmp_path_factory: pytest.TempPathFactory) -> Iterator["Chromes"]:
    _require_chromium()
    pool = Chromes(tmp_path_factory.mktemp("chrome"))
    yield pool
    pool.quit_all()


class Chromes:
    """Headless Chromium processes kept for the session: starting one takes seconds, wiping one milliseconds."""

    def __init__(self, profiles: Path) -> None:
        self.profiles = profiles
        self.idle: list[Chrome] = []
        self.started: list[Chrome] = []
        # Two (the most a test uses) start one after the other in the background, the first while the desk boots.
        self._starter = ThreadPoolExecutor(max_workers=1)
        self._starting: list[Future[Chrome]] = [self._starter.submit(self._start) for _ in range(PEOPLE_AT_ONCE)]

    def take(self) -> Chrome:
        if self.idle:
            return self.idle.pop()
        if self._starting:
            return self._starting.pop(0).result()
        return self._start()

    def give_back(self, driver: Chrome, origin: str) -> None:
        """Leave `origin` in a new window of the usual size (its own session storage); forget cookies and storage."""
        try:
            used = driver.window_handles
            driver.switch_to.new_window("window")
            for handle in used:
                driver.switch_to.window(handle)
                driver.close()
            driver.switch_to.window(driver.window_handles[0])
            driver.set_window_size(*WINDOW)
            driver.execute_cdp_cmd("Network.clearBrowserCookies", {})
            driver.execute_cdp_cmd("Storage.clearDataForOrigin", {"origin": origin, "storageTypes": "all"})
        except WebDriverException:
            self.started.remove(driver)  # a broken one is not handed out again
            with suppress(WebDriverException):
                driver.quit()
            return
        self.idle.append(driver)

    def quit_all(self) -> None:
        self._starter.shutdown(wait=True)
        for driver in self.started:
            driver.quit()

    def _start(self) -> Chrome:
        options = ChromeOptions()
        options.binary_location = str(CHROMIUM)
        for argument in (*CHROME_ARGS, f"--user-data-dir={self.profiles / f'chrome-{len(self.started)}'}"):
            options.add_argument(argument)
        # A Service with a path: Selenium Manager is never asked to find or download anything.
        self.started.append(Chrome(service=Service(str(CHROMEDRIVER)), options=options))
        return self.started[-1]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    # Lets the browser fixture see, at teardown, whether the test itself failed.
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)


def _require_chromium() -> None:
    missing = [str(path) for path in (CHROMIUM, CHROMEDRIVER) if not path.is_file()]
    if missing:
        pytest.fail(
            f"Browser tests need Debian's Chromium and its driver; missing: {', '.join(missing)}. "
            "`python3 dev.py test` installs them (apt packages chromium and chromium-driver).",
            pytrace=False,
        )
