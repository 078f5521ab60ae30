"""Starting and stopping the embedded server: `python -m desk.db.embedded` as a child process.

The parent side only: it waits until the child answers a ping, and fails with the tail of the
child's log when it does not. neosqlite and nx-27017 are never imported here.

The server has no users and no passwords, so it listens on no TCP port, where any local process
could reach it: it answers on a Unix socket inside the data directory (0700, the socket 0600), and
only the desk's own user gets through the directory. The URI names that socket's path.
"""

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

from pymongo import MongoClient
from pymongo.errors import PyMongoError

LOG_NAME = "nx-27017.log"
PID_NAME = "nx-27017.pid"
SOCKET_NAME = "nx-27017.sock"  # pymongo reads a host that ends in ".sock" as a Unix socket's path
MAX_SOCKET_PATH = 107  # bytes: sun_path holds 108 on Linux, with the closing NUL
_START_MARK = "--- desk: starting nx-27017"
_PROJECT_ROOT = Path(__file__).resolve().parents[3]


class EmbeddedMongoError(RuntimeError):
    """The embedded server could not be started."""


class EmbeddedMongo:
    """The embedded server as a child process, on a Unix socket only the desk's user can reach."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = Path(data_dir).resolve()
        self.log_path = self.data_dir / LOG_NAME
        self.uri: str | None = None
        self.socket_path: Path | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._spare_dir: Path | None = None  # the private directory of a socket that did not fit in data_dir

    def start(self, timeout: float = 30.0) -> str:
        """Launch the server and wait until it answers; return its URI."""
        if self._proc is not None and self.uri is not None:
            return self.uri
        try:
            self.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            self.data_dir.chmod(0o700)  # made by an older desk, or by hand: the socket's only fence is this mode
            sock = self.socket_path = self._socket_path()
            # stdout/stderr go to the log too, so tracebacks that happen before logging is set up are kept.
            with self.log_path.open("ab") as log:
                log.write(f"{_START_MARK} on {sock}\n".encode())
                log.flush()
                self._proc = subprocess.Popen(  # noqa: S603 - our own interpreter and module
                    [sys.executable, "-m", "desk.db.embedded", "--data-dir", str(self.data_dir), "--socket", str(sock)],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=_child_env(),
                )
        except OSError as exc:
            self._drop_spare_dir()
            raise EmbeddedMongoError(f"cannot launch the embedded MongoDB in {self.data_dir}: {exc}") from exc
        atexit.register(self.stop)
        uri = socket_uri(sock)
        self._wait_ready(uri, timeout)
        self.uri = uri
        return uri

    def stop(self) -> None:
        """Terminate the server (kill it if it does not exit in time); safe to call twice."""
        proc, self._proc, self.uri = self._proc, None, None
        atexit.unregister(self.stop)
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._drop_spare_dir()

    @property
    def pid(self) -> int | None:
        """The child's process id while it runs."""
        return self._proc.pid if self._proc is not None else None

    def __enter__(self) -> str:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _socket_path(self) -> Path:
        """data_dir/nx-27017.sock; where that path is too long for a socket, one in a new private directory."""
        inside = self.data_dir / SOCKET_NAME
        if len(os.fsencode(inside)) <= MAX_SOCKET_PATH:
            return inside
        # Still the desk user's alone: mkdtemp makes the directory 0700, and the server makes the socket 0600.
        spare = self._spare_dir = Path(tempfile.mkdtemp(prefix="desk-db-"))
        if len(os.fsencode(spare / SOCKET_NAME)) > MAX_SOCKET_PATH:
            self._drop_spare_dir()
            raise EmbeddedMongoError(
                f"the embedded MongoDB's socket path is longer than {MAX_SOCKET_PATH} bytes both in {self.data_dir} "
                f"and in {spare.parent}: use a shorter DESK_DATA_DIR (or TMPDIR)"
            )
        return spare / SOCKET_NAME

    def _drop_spare_dir(self) -> None:
        spare, self._spare_dir = self._spare_dir, None
        if spare is not None:
            shutil.rmtree(spare, ignore_errors=True)

    def _wait_ready(self, uri: str, timeout: float) -> None:
        assert self._proc is not None
        deadline = time.monotonic() + timeout
        while True:
            if (code := self._proc.poll()) is not None:
                self.stop()
                raise EmbeddedMongoError(f"the embedded MongoDB exited with code {code}:\n{self._log_tail()}")
            client: MongoClient = MongoClient(uri, serverSelectionTimeoutMS=250, connectTimeoutMS=250)
            try:
                # Our child's answer, not that of a server already running on these files (and this socket):
                # that one answers at once, while our child is about to exit, refused by the pid file.
                if client.admin.command("serverStatus")["pid"] == self._proc.pid:
                    return
            except PyMongoError:
                pass
            finally:
                client.close()
            if time.monotonic() > deadline:
                self.stop()
                raise EmbeddedMongoError(
                    f"the embedded MongoDB did not answer on {uri} within {timeout:g} s:\n{self._log_tail()}"
                )
            time.sleep(0.05)

    def _log_tail(self, lines: int = 20) -> str:
        """The last lines this launch wrote to the log."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError as exc:
            return f"(no log: {exc})"
        this_launch = text.rpartition(_START_MARK)[2].partition("\n")[2]
        return "\n".join(this_launch.splitlines()[-lines:]) or "(nothing in the log)"


def socket_uri(path: Path) -> str:
    """The MongoDB URI of a server on the Unix socket at `path` (its path percent-encoded, as pymongo reads it)."""
    return f"mongodb://{quote(str(path), safe='')}/"


def _child_env() -> dict[str, str]:
    # The child must import this same `desk` package, whether or not the project is installed.
    env = dict(os.environ)
    # A coverage run that follows child processes (the test suite's) would trace the engine under every
    # command for nothing: the child's code is excluded from the figures. Untraced, the database-heavy
    # tests ran about 7 % faster, and the fuzzing test (whose `desk run` starts its own) 13 %.
    env.pop("COVERAGE_PROCESS_CONFIG", None)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(_PROJECT_ROOT), env.get("PYTHONPATH")]))
    return env
