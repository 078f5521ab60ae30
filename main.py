"""The desk's composition root: the `desk` command and the web app it runs.

Everything is wired here: the pages and components (the UI), the API's own app in front of them,
the live feed, the database, the worker process. `desk/` holds the domains and never imports the
UI (an import-linter contract checks it); the UI imports `desk/`. NiceGUI's modularization example
keeps its `main.py` the same way.
"""

import gc
import os
import secrets
from contextlib import AsyncExitStack
from urllib.parse import urlsplit

from fastapi import FastAPI
from nicegui import Client, app, core, ui
from nicegui.storage import Storage
from starlette.types import ASGIApp, Receive, Scope, Send

from components.runtime import live
from desk import cli, observability, state
from desk.app import FirstAdmin, ensure_first_admin, ensure_indexes, install_api, wire
from desk.config import Settings, get_settings
from desk.db import backup
from desk.db.client import use_database
from desk.db.lifecycle import DatabaseUnavailable, database_server, open_database
from desk.middleware import UPLOAD_PATH, BodyLimit
from desk.security_headers import SecurityHeaders
from desk.seed import seed_demo
from desk.work_orders import counters
from pages import ROUTERS, not_found

API_PATHS = ("/api/", "/healthz", "/readyz", "/metrics")
ROOT_PAGE = not_found.unknown_address  # ui.run's root page: NiceGUI draws it for any address no page answers
_BUILD_PAGES = app.build_middleware_stack  # NiceGUI's own; mount() runs once per UI test: wrap it, never a wrapper


def main(argv: list[str] | None = None) -> None:
    """The `desk` command: `run` serves the desk; the other commands are desk/cli.py's."""
    args = cli.parse(argv)
    settings = cli.setup(args)
    if args.command == "run":
        serve(settings, demo=args.demo)
    else:
        cli.run_command(args, settings)


def mount() -> None:
    """The pages on NiceGUI's app, the API and its docs on their own app in front; the live feed starts with the app."""
    docs = {"docs_url": None, "redoc_url": None, "openapi_url": "/api/openapi.json"}  # install_api serves /api/docs
    api = FastAPI(title="Work Order Desk API", version="1", **docs)
    install_api(api)
    _api_in_front(api)
    for router in ROUTERS:
        app.include_router(router)
    app.on_startup(live.start)
    core.sio.eio.cors_allowed_origins = _same_host  # NiceGUI's "*" let any site's page open a socket as you
    observability.count_open_screens(lambda: sum(1 for c in Client.instances.values() if c.has_socket_connection))


def serve(settings: Settings, *, demo: bool = False) -> None:
    """Run the desk until interrupted; the database is open before the first request can arrive."""
    try:
        with database_server(settings) as uri:
            _start_up(settings, uri, demo=demo)
            mount()
            _run(settings)
    except DatabaseUnavailable as error:
        raise SystemExit(f"desk: {error}") from None


def _start_up(settings: Settings, uri: str, *, demo: bool) -> None:
    """Start-up work, in NiceGUI's event loop and before the live feed: the client, indexes, first admin, worker."""
    stack = AsyncExitStack()

    @app.on_startup
    async def start() -> None:
        db = await stack.enter_async_context(open_database(settings, uri))
        use_database(db)
        wire(state.current())  # the listeners across layers, on the bus of this process's Desk
        await ensure_indexes(db)
        if backup.restored(settings):
            await counters.rebuild(db)
            backup.recounted(settings)
        first = await ensure_first_admin(db, settings)
        if demo:
            print(await seed_demo(db, only_if_empty=True), flush=True)
        if settings.desk_run_worker:
            stack.callback(cli.start_worker(uri))
        _welcome(settings, first)
        gc.freeze()  # what start-up built lives as long as the process: the collector stops walking it

    @app.on_shutdown
    async def stop() -> None:
        await stack.aclose()
        use_database(None)


def _run(settings: Settings) -> None:
    _private_storage(settings)
    ui.run(
        ROOT_PAGE,
        host=settings.desk_host,
        port=settings.desk_port,
        title="Work Order Desk",
        reload=False,
        show=False,
        storage_secret=_storage_secret(settings),
        show_welcome_message=False,
        uvicorn_logging_level="warning",
        # No access lines are printed at that level, but uvicorn would still build each one's
        # arguments (the client's address, the quoted path) on every request.
        access_log=False,
        # A client's address is its TCP peer's unless that peer is a proxy FORWARDED_ALLOW_IPS names: left to
        # itself, uvicorn believes X-Forwarded-For from any loopback client (and reads its own environment key).
        proxy_headers=bool(proxies := _proxies(settings)),
        forwarded_allow_ips=proxies,
        favicon="🛠",
        language="en-US",  # <html lang>: a screen reader reads the pages in English
        # NiceGUI's own browser cookie carries no session (that is the desk's cookie), but it lives no
        # longer than a session and travels only over https when the desk is served so.
        session_middleware_kwargs={
            "https_only": settings.desk_public_https,
            "same_site": "lax",
            "max_age": settings.desk_session_max_hours * 3600,
        },
    )


def _proxies(settings: Settings) -> list[str]:
    """The reverse proxies whose X-Forwarded-For is believed (FORWARDED_ALLOW_IPS); none when it is unset."""
    return [part.strip() for part in (settings.forwarded_allow_ips or "").split(",") if part.strip()]


def _private_storage(settings: Settings) -> None:
    """NiceGUI's per-browser files with the desk's data, not wherever the desk was started, readable by it alone.

    They hold no session (the desk's own cookie does), but nothing of a person's belongs to other users of
    the machine: from here on the desk creates its files 0600 and its directories 0700 (umask 077).
    """
    os.umask(0o077)  # cli.setup set it already; also here for an app started some other way
    Storage.path = (settings.desk_data_dir / "nicegui").resolve()
    Storage.path.mkdir(parents=True, exist_ok=True)
    for made in (Storage.path, *Storage.path.glob("storage-*")):  # an older desk made them world-readable
        made.chmod(0o700 if made.is_dir() else 0o600)
    app.storage = Storage()
    app.storage.max_tab_storage_age = 3600  # the desk keeps nothing per tab; NiceGUI's 30-day default only grows


def _api_in_front(api: FastAPI) -> None:
    """Send API and health requests straight to `api`, past NiceGUI's middleware, which is for pages.

    Through it, every request without NiceGUI's browser cookie (a script with an API token, a health
    probe) was given a new NiceGUI session cookie and left a per-browser storage in memory for good,
    and each API request paid for three more middleware layers. Starlette builds the middleware
    stack on the first request (after NiceGUI added its own), so the dispatch wraps that stack.
    """

    def build() -> ASGIApp:
        pages = _BUILD_PAGES()
        uploads = BodyLimit(pages)  # NiceGUI's upload route spools whatever it is sent: the limit holds there too

        async def dispatch(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] == "http" and scope["path"].startswith(API_PATHS):
                await api(scope, receive, send)
            elif scope["type"] == "http" and UPLOAD_PATH.match(scope["path"]):
                await uploads(scope, receive, send)
            else:  # pages, NiceGUI's websocket and files, and the lifespan (start-up and shut-down work)
                await pages(scope, receive, send)

        return SecurityHeaders(dispatch, https=get_settings().desk_public_https)  # outermost: pages and API

    app.build_middleware_stack = build


def _same_host(origin: str | None, environ: dict) -> bool:
    """A socket.io handshake's Origin is this desk's host (any port: a proxy's Host may have dropped it)."""
    host = urlsplit(origin or "").hostname
    return bool(host) and host == urlsplit(f"//{environ.get('HTTP_HOST', '')}").hostname


def _storage_secret(settings: Settings) -> str:
    """DESK_SECRET, or one made once and kept in DESK_DATA_DIR (readable by the desk's user alone)."""
    if settings.desk_secret is not None:
        return settings.desk_secret.get_secret_value()
    path = settings.desk_data_dir / "secret"
    if not path.exists():
        settings.desk_data_dir.mkdir(parents=True, exist_ok=True)
        path.write_text(secrets.token_urlsafe(48))
        path.chmod(0o600)
    return path.read_text().strip()


def _welcome(settings: Settings, first: FirstAdmin | None) -> None:
    host = "localhost" if settings.desk_host in ("127.0.0.1", "0.0.0.0") else settings.desk_host  # noqa: S104
    print(f"Work Order Desk is running: open http://{host}:{settings.desk_port}/", flush=True)
    if first is not None and first.password:
        print(f"First admin created. Log in as {first.email} with the one-time password: {first.password}", flush=True)
    elif first is not None:
        print(f"First admin created: log in as {first.email} with DESK_ADMIN_PASSWORD.", flush=True)


if __name__ == "__main__":
    main()
