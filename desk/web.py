"""Serving the desk: NiceGUI's app carries the API, the pages and the start-up work."""

import logging
from contextlib import AsyncExitStack

from nicegui import app, ui

from components import live
from desk.app import ensure_first_admin, ensure_indexes, install_api
from desk.config import Settings
from desk.db.client import use_database
from desk.db.lifecycle import open_database
from pages import ROUTERS

log = logging.getLogger("desk")


def mount() -> None:
    """The API, its docs and the pages on NiceGUI's app; the live feed starts with the app."""
    app.title, app.version = "Work Order Desk API", "1"
    app.docs_url, app.redoc_url, app.openapi_url = "/api/docs", None, "/api/openapi.json"
    app.setup()  # FastAPI registers the docs routes here; NiceGUI built the app without them
    install_api(app)
    for router in ROUTERS:
        app.include_router(router)
    app.on_startup(live.start)


def configure(settings: Settings, *, demo: bool = False) -> None:
    """Everything `mount` does, after connecting the database at start-up (and closing it at the end)."""
    stack = AsyncExitStack()

    @app.on_startup
    async def start() -> None:
        db = await stack.enter_async_context(open_database(settings))
        use_database(db)
        await ensure_indexes(db)
        first = await ensure_first_admin(db, settings)
        if demo:
            from desk.seed import seed_demo

            print(await seed_demo(db, only_if_empty=True), flush=True)
        _welcome(settings, first)

    @app.on_shutdown
    async def stop() -> None:
        use_database(None)
        await stack.aclose()

    mount()


def serve(settings: Settings, *, demo: bool = False) -> None:
    """Run the desk until interrupted."""
    from desk.cli import generated_secret

    configure(settings, demo=demo)
    secret = settings.desk_secret.get_secret_value() if settings.desk_secret else generated_secret()
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


def _welcome(settings: Settings, first) -> None:
    host = "localhost" if settings.desk_host in ("127.0.0.1", "0.0.0.0") else settings.desk_host  # noqa: S104
    print(f"Work Order Desk is running: open http://{host}:{settings.desk_port}/", flush=True)
    if first is not None and first.password:
        print(f"First admin created. Log in as {first.email} with the one-time password: {first.password}", flush=True)
    elif first is not None:
        print(f"First admin created: log in as {first.email} with DESK_ADMIN_PASSWORD.", flush=True)
