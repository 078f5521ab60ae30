"""Serving the desk: NiceGUI's app carries the pages and the start-up work, with the API's own app in front."""

import logging
import os
import subprocess
import sys

from fastapi import FastAPI
from nicegui import app, ui
from nicegui.storage import Storage
from starlette.types import ASGIApp, Receive, Scope, Send

from components import live
from desk.app import ensure_first_admin, ensure_indexes, install_api
from desk.config import Settings
from desk.db.client import connect, get_db, use_database
from desk.db.embedded import EmbeddedMongo, EmbeddedMongoError
from pages import ROUTERS

log = logging.getLogger("desk")


API_PATHS = ("/api/", "/healthz", "/readyz")
_BUILD_PAGES = app.build_middleware_stack  # NiceGUI's own; mount() runs once per UI test: wrap it, never a wrapper


def mount() -> None:
    """The pages on NiceGUI's app, the API and its docs on their own app in front; the live feed starts with the app."""
    docs = {"docs_url": "/api/docs", "redoc_url": None, "openapi_url": "/api/openapi.json"}
    api = FastAPI(title="Work Order Desk API", version="1", **docs)
    install_api(api)
    _api_in_front(api)
    for router in ROUTERS:
        app.include_router(router)
    app.on_startup(live.start)


def _api_in_front(api: FastAPI) -> None:
    """Send API and health requests straight to `api`, past NiceGUI's middleware, which is for pages.

    Through it, every request without NiceGUI's browser cookie (a script with an API token, a health
    probe) was given a new NiceGUI session cookie and left a per-browser storage in memory for good,
    and each API request paid for three more middleware layers. Starlette builds the middleware
    stack on the first request (after NiceGUI added its own), so the dispatch wraps that stack.
    """

    def build() -> ASGIApp:
        pages = _BUILD_PAGES()

        async def dispatch(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] == "http" and scope["path"].startswith(API_PATHS):
                await api(scope, receive, send)
            else:  # pages, NiceGUI's websocket and files, and the lifespan (start-up and shut-down work)
                await pages(scope, receive, send)

        return dispatch

    app.build_middleware_stack = build


def configure(settings: Settings, uri: str, *, demo: bool = False) -> None:
    """Everything `mount` does, plus start-up work (indexes, first admin, demo data, the worker)."""
    stop_worker = None

    @app.on_startup
    async def start() -> None:
        nonlocal stop_worker
        db = get_db()
        await ensure_indexes(db)
        first = await ensure_first_admin(db, settings)
        if demo:
            from desk.seed import seed_demo

            print(await seed_demo(db, only_if_empty=True), flush=True)
        stop_worker = _start_worker(uri)
        _welcome(settings, first)

    @app.on_shutdown
    async def stop() -> None:
        if stop_worker is not None:
            stop_worker()
        await get_db().client.close()

    mount()


def serve(settings: Settings, *, demo: bool = False) -> None:
    """Run the desk until interrupted; the database is connected before the first request can arrive."""
    from desk.cli import generated_secret

    embedded = None
    if settings.mongodb_uri is not None:
        uri = settings.mongodb_uri.get_secret_value()
    else:
        embedded = EmbeddedMongo(settings.desk_data_dir / "mongo")
        try:
            uri = embedded.start()
        except EmbeddedMongoError as error:
            raise SystemExit(f"desk: {error}") from None
    use_database(connect(uri, settings.mongodb_db))
    configure(settings, uri, demo=demo)
    # NiceGUI's per-browser storage holds the desk session secret: keep it with the desk's data,
    # not in whatever directory the desk was started from.
    Storage.path = (settings.desk_data_dir / "nicegui").resolve()
    Storage.path.mkdir(parents=True, exist_ok=True)
    app.storage = Storage()
    app.storage.max_tab_storage_age = 3600  # the desk keeps nothing per tab; NiceGUI's 30-day default only grows
    secret = settings.desk_secret.get_secret_value() if settings.desk_secret else generated_secret()
    try:
        ui.run(
            host=settings.desk_host,
            port=settings.desk_port,
            title="Work Order Desk",
            reload=False,
            show=False,
            storage_secret=secret,
            show_welcome_message=False,
            uvicorn_logging_level="warning",
            favicon="🛠",
        )
    finally:
        if embedded is not None:
            embedded.stop()


def _start_worker(uri: str):
    """The worker process (scheduler.py) beside the web app, on the same database; returns its stopper."""
    env = {**os.environ, "MONGODB_URI": uri, "DESK_WORKER_PARENT": str(os.getpid())}
    worker = subprocess.Popen([sys.executable, "-m", "desk.worker"], env=env)

    def stop() -> None:
        worker.terminate()
        try:
            worker.wait(timeout=10)
        except subprocess.TimeoutExpired:
            worker.kill()

    return stop


def _welcome(settings: Settings, first) -> None:
    host = "localhost" if settings.desk_host in ("127.0.0.1", "0.0.0.0") else settings.desk_host  # noqa: S104
    print(f"Work Order Desk is running: open http://{host}:{settings.desk_port}/", flush=True)
    if first is not None and first.password:
        print(f"First admin created. Log in as {first.email} with the one-time password: {first.password}", flush=True)
    elif first is not None:
        print(f"First admin created: log in as {first.email} with DESK_ADMIN_PASSWORD.", flush=True)
