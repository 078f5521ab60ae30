"""The `desk` command's arguments and the commands that need no UI: create an admin, seed demo data, the worker.

`desk run` serves the web app, which only the composition root (main.py) can assemble; it starts the
worker beside it with `start_worker` (`python -m desk worker`, desk/__main__.py: no web app imported).
"""

import argparse
import asyncio
import getpass
import os
import subprocess
import sys
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path

from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import PyMongoError

from desk import heartbeat, tasks
from desk.agent.core.provider import AIUnavailable
from desk.agent.triage.eval import command as eval_command
from desk.agent.triage.eval.labels import BadSet
from desk.agent.triage.eval.runner import EvalStopped
from desk.app import ensure_indexes
from desk.config import Settings, load_settings, use_settings
from desk.db import backup
from desk.db.embedded.launcher import SOCKET_NAME, socket_uri
from desk.db.lifecycle import DatabaseUnavailable, open_database
from desk.errors import DeskError
from desk.logs import configure_logging, never_log
from desk.seed import seed_demo
from desk.users import service as users_service
from desk.users.models import UserCreate

NO_DATABASE = (
    "MONGODB_URI: the worker needs the database the web app uses (`desk run` passes it when it starts the worker)"
)


def main(argv: list[str] | None = None) -> None:
    """`python -m desk`: every command but `run`, which needs the web app (main.py's `desk` command runs it)."""
    args = parse(argv)
    if args.command == "run":
        raise SystemExit("desk: `python -m desk` serves no web app: run `desk run`")
    run_command(args, setup(args))


def parse(argv: list[str] | None = None) -> argparse.Namespace:
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
    save = commands.add_parser("backup", help="copy the embedded database to PATH, consistently, while it runs")
    save.add_argument("path", type=Path, help="a new file")
    load = commands.add_parser("restore", help="replace the embedded database with a backup (the desk stopped)")
    load.add_argument("path", type=Path, help="a file made by desk backup")
    work = commands.add_parser("worker", help="run the worker process (MONGODB_URI names the desk's database)")
    work.add_argument("--check", action="store_true", help="exit 0 if this host's worker beat within a minute, else 1")
    work.add_argument("--burst", action="store_true", help="run every job that is due once, then exit")
    eval_command.add_to(commands)
    return parser.parse_args(argv)


def setup(args: argparse.Namespace) -> Settings:
    """Logging, then the settings (a bad value exits with one line per problem), made the process's own.

    Everything a desk command creates (the embedded database, backups, browser storage) is readable by
    the desk's user alone: files 0600, directories 0700.
    """
    os.umask(0o077)
    configure_logging()
    overrides = {key: value for key in ("host", "port") if (value := getattr(args, key, None)) is not None}
    settings = load_settings(**{f"desk_{key}": value for key, value in overrides.items()})
    never_log(*settings.secrets())
    use_settings(settings)
    return settings


def run_command(args: argparse.Namespace, settings: Settings) -> None:
    """Any command but `run` (create-admin, seed and restore need the embedded desk stopped)."""
    if args.command == "worker":
        _worker(settings, check=args.check, burst=args.burst)
    elif args.command in ("backup", "restore"):
        try:
            if args.command == "backup":
                print(backup.backup(settings=settings, target=args.path))
            else:
                print(backup.restore(settings=settings, source=args.path))
        except backup.BackupRefused as error:
            raise SystemExit(f"desk: {error}") from None
    elif args.command == "eval":  # beside a running desk too: it reads and writes nothing of the desk's but spend
        _eval(settings, args)
    elif (pid := backup.embedded_pid(settings)) is not None:  # the engine's files are open: one line, no traceback
        raise SystemExit(f"desk: the desk is running (embedded database pid {pid}): stop it first, then run this again")
    elif args.command == "create-admin":
        password = _admin_password(settings)
        _with_db(settings, partial(_create_admin, email=args.email, name=args.name, password=password))
    else:
        _with_db(settings, _seed)


def _with_db(settings: Settings, job: Callable[[AsyncDatabase], Awaitable[None]], uri: str | None = None) -> None:
    async def run() -> None:
        async with open_database(settings, uri) as db:
            await ensure_indexes(db)
            await job(db)

    try:
        asyncio.run(run())
    except DatabaseUnavailable as error:
        raise SystemExit(f"desk: {error}") from None


def _eval(settings: Settings, args: argparse.Namespace) -> None:
    """`desk eval triage`: a bad set, a refusal or a stop is one line and exit status 1, never a traceback."""
    try:
        _with_db(settings, partial(eval_command.triage, settings=settings, args=args), _running_database(settings))
    except (BadSet, EvalStopped) as error:
        raise SystemExit(f"desk: {error}") from None
    except AIUnavailable as error:  # not configured: no AI_BASE_URL or AI_API_KEY
        raise SystemExit(f"desk: {error.message} Set AI_BASE_URL and AI_API_KEY.") from None
    except KeyboardInterrupt:
        raise SystemExit("desk: stopped; the answers so far are kept (--resume DIR goes on)") from None


def _running_database(settings: Settings) -> str | None:
    """The running desk's embedded server (its socket in the data directory), None when no desk runs on it."""
    if (pid := backup.embedded_pid(settings)) is None:
        return None
    socket = settings.desk_data_dir.resolve() / "mongo" / SOCKET_NAME
    if not socket.exists():  # a data directory too deep for a socket: the server's is in a directory of its own
        raise SystemExit(f"desk: the desk is running (embedded database pid {pid}): stop it, or set MONGODB_URI")
    return socket_uri(socket)


def start_worker(uri: str) -> Callable[[], None]:
    """`desk worker` as a child process, on the web app's database; returns its stopper (`desk run`'s, main.py)."""
    env = {**os.environ, "MONGODB_URI": uri, "DESK_WORKER_PARENT": str(os.getpid())}
    child = subprocess.Popen([sys.executable, "-m", "desk", "worker"], env=env)

    def stop() -> None:
        child.terminate()
        try:
            child.wait(timeout=10)
        except subprocess.TimeoutExpired:
            child.kill()

    return stop


def _worker(settings: Settings, *, check: bool, burst: bool) -> None:
    if settings.mongodb_uri is None:
        raise SystemExit(f"desk: {NO_DATABASE}")
    if not check:
        asyncio.run(tasks.worker(settings, burst=burst).run(settings))
        return

    async def beat_is_fresh() -> tuple[bool, str]:
        async with open_database(settings) as db:
            return await heartbeat.check(db, worker=heartbeat.worker_name())

    try:
        fresh, line = asyncio.run(beat_is_fresh())
    except PyMongoError as error:  # the type only: a driver's message may quote a document (SEC-1)
        raise SystemExit(
            f"desk: the worker's heartbeat is unreadable: the database did not answer ({type(error).__name__})"
        ) from None
    if not fresh:
        raise SystemExit(f"desk: {line}")
    print(line)


def _admin_password(settings: Settings) -> str:
    if settings.desk_admin_password:
        return settings.desk_admin_password.get_secret_value()
    if not sys.stdin.isatty():
        raise SystemExit("desk: set DESK_ADMIN_PASSWORD or run create-admin in a terminal to type it")
    return getpass.getpass("Password for the new admin: ")


async def _create_admin(db: AsyncDatabase, *, email: str, name: str, password: str) -> None:
    try:
        data = UserCreate(email=email, name=name, role="admin", password=password)
        user = await users_service.register(db=db, data=data, via="desk create-admin")
    except DeskError as error:
        raise SystemExit(f"desk: {error.message}") from None
    except ValueError as error:
        raise SystemExit(f"desk: {error}") from None
    print(f"Created admin {user.email}.")


async def _seed(db: AsyncDatabase) -> None:
    print(await seed_demo(db))
