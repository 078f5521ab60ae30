"""The embedded server itself: the child process `python -m desk.db.embedded` runs.

Only this process imports nx-27017 (and neosqlite through it), so importing this module is the
child's business; the launcher never does.
"""

import argparse
import asyncio
import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from nx_27017 import daemon as nx_daemon
from nx_27017.handler import NeoSQLiteHandler
from nx_27017.nx_27017 import main as nx_main
from nx_27017.server import handle_client

from desk.db.embedded.launcher import PID_NAME
from desk.db.embedded.patches import patch_engine


def serve() -> None:  # pragma: no cover - runs in the child
    """Fix the engine, then run nx-27017 on the Unix socket --socket, its files under --data-dir, until told to stop."""
    parser = argparse.ArgumentParser(prog="python -m desk.db.embedded")
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--socket", type=Path, required=True)
    args = parser.parse_args()
    data_dir = args.data_dir.resolve()
    pid_file = data_dir / PID_NAME

    _exit_on_signal_or_orphaning(pid_file, args.socket)
    patch_engine()
    _listen_on_unix_socket(args.socket)
    _run_commands_on_the_event_loop()
    # nx logs the body of every command it passes on at INFO: noise, and it may carry user data.
    logging.getLogger("nx_27017").setLevel(logging.WARNING)

    # --data-dir: one <db>.db per logical database. Log and pid file in data_dir, not nx's /tmp
    # defaults; the pid file also stops a second server from opening the same files. The log goes
    # to stderr, which the parent points at data_dir/nx-27017.log (nx's own file handler would
    # write every line twice).
    sys.argv = ["nx_27017", "--data-dir", str(data_dir), "--log-file", os.devnull, "--pid-file", str(pid_file)]
    nx_main()


def _listen_on_unix_socket(path: Path) -> None:  # pragma: no cover - runs in the child
    # nx-27017 has no users or passwords and listens on a TCP port, where any local process (any user of
    # the machine) could read every password hash and make itself an admin. The desk's server listens on a
    # Unix socket instead, 0600 inside the 0700 data directory: the file system is its access control.
    # nx calls this after its pid file check, so a socket file found here is a dead server's.
    def run_server(host: str, port: int, handler: NeoSQLiteHandler, use_threading: bool = False) -> None:
        path.unlink(missing_ok=True)
        asyncio.run(_serve_unix(path, handler))

    nx_daemon.run_server_threaded = run_server


async def _serve_unix(path: Path, handler: NeoSQLiteHandler) -> None:  # pragma: no cover - runs in the child
    umask = os.umask(0o177)  # the socket is born 0600: no moment at which another user could connect
    try:
        server = await asyncio.start_unix_server(lambda r, w: handle_client(r, w, handler), path=str(path))
    finally:
        os.umask(umask)
    os.chmod(path, 0o600)  # the umask made it so; said again in case a platform ignores it for sockets
    logging.getLogger("desk.db.embedded").info("listening on %s", path)
    async with server:
        await server.serve_forever()


def _run_commands_on_the_event_loop() -> None:  # pragma: no cover - runs in the child
    # nx hands every command to a worker thread, then takes one lock per database file: commands
    # on the desk's database run one at a time anyway, and the hop only adds two thread switches
    # per command, plus a wait for the GIL (up to its 5 ms switch interval) whenever the event loop
    # is reading the next request. No handler blocks or waits for another command, so running them
    # on the loop itself is safe.
    async def run_inline(func: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        return func(*args, **kwargs)

    asyncio.to_thread = run_inline  # this process only runs the server


def _exit_on_signal_or_orphaning(pid_file: Path, socket: Path) -> None:  # pragma: no cover - runs in the child
    # nx's SIGTERM handler raises SystemExit inside the event loop, which logs a traceback per open
    # connection. Exiting at once is as safe: every committed SQLite transaction is already in the
    # WAL, an open one rolls back.
    def exit_now(*_: object) -> None:
        if nx_daemon.get_pid(str(pid_file)) == os.getpid():
            socket.unlink(missing_ok=True)
            pid_file.unlink(missing_ok=True)
        os._exit(0)

    nx_daemon._signal_exit_handler = exit_now

    # A killed test run or web process must not leave a server holding the port and the files.
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        exit_now()

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()
