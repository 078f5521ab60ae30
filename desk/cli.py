"""The `desk` command: run the desk, create an admin, seed demo data."""

import argparse
import asyncio
import getpass
import logging
import secrets
import sys
from contextlib import AsyncExitStack

from desk.config import Settings, get_settings, load_settings, use_settings
from desk.logs import configure_logging, never_log

log = logging.getLogger("desk")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="desk", description="Work Order Desk")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="run the desk (the embedded database unless MONGODB_URI is set)")
    run.add_argument("--host", help="address to listen on (DESK_HOST)")
    run.add_argument("--port", type=int, help="port to listen on (DESK_PORT)")
    run.add_argument("--demo", action="store_true", help="seed demo users and work orders into an empty desk")
    admin = commands.add_parser("create-admin", help="create an admin (password from DESK_ADMIN_PASSWORD or a prompt)")
    admin.add_argument("--email", required=True)
    admin.add_argument("--name", default="Admin")
    seed = commands.add_parser("seed", help="add demo data")
    seed.add_argument("--demo", action="store_true", required=True, help="demo users and 200 work orders")
    args = parser.parse_args(argv)

    configure_logging()
    overrides = {key: value for key in ("host", "port") if (value := getattr(args, key, None)) is not None}
    settings = load_settings(**{f"desk_{key}": value for key, value in overrides.items()})
    never_log(*settings.secrets())
    use_settings(settings)
    if args.command == "run":
        from desk.web import serve

        serve(settings, demo=args.demo)
    elif args.command == "create-admin":
        password = _admin_password(settings)
        asyncio.run(_with_db(settings, _create_admin, email=args.email, name=args.name, password=password))
    else:
        asyncio.run(_with_db(settings, _seed))


async def _with_db(settings: Settings, job, **kwargs) -> None:
    from desk.app import ensure_indexes
    from desk.db.lifecycle import open_database

    async with AsyncExitStack() as stack:
        db = await stack.enter_async_context(open_database(settings))
        await ensure_indexes(db)
        await job(db, **kwargs)


def _admin_password(settings: Settings) -> str:
    if settings.desk_admin_password:
        return settings.desk_admin_password.get_secret_value()
    if not sys.stdin.isatty():
        raise SystemExit("desk: set DESK_ADMIN_PASSWORD or run create-admin in a terminal to type it")
    return getpass.getpass("Password for the new admin: ")


async def _create_admin(db, *, email: str, name: str, password: str) -> None:
    from desk.errors import DeskError
    from desk.users import service
    from desk.users.models import UserCreate

    try:
        data = UserCreate(email=email, name=name, role="admin", password=password)
        user = await service.register(db=db, data=data)
    except DeskError as error:
        raise SystemExit(f"desk: {error.message}") from None
    except ValueError as error:
        raise SystemExit(f"desk: {error}") from None
    print(f"Created admin {user.email}.")


async def _seed(db) -> None:
    from desk.seed import seed_demo

    summary = await seed_demo(db)
    print(summary)


def generated_secret() -> str:
    """The storage secret when DESK_SECRET is unset: made once, kept in DESK_DATA_DIR."""
    settings = get_settings()
    path = settings.desk_data_dir / "secret"
    if not path.exists():
        settings.desk_data_dir.mkdir(parents=True, exist_ok=True)
        path.write_text(secrets.token_urlsafe(48))
        path.chmod(0o600)
    return path.read_text().strip()


if __name__ == "__main__":
    main()
