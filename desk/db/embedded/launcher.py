"""Starting and stopping the embedded server: `python -m desk.db.embedded` as a child process.

The parent side only: it waits until the child answers a ping, and fails with the tail of the
child's log when it does not. neosqlite and nx-27017 are never imported here.
"""

import atexit
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from pymongo import MongoClient
from pymongo.errors import PyMongoError

LOG_NAME = "nx-27017.log"
PID_NAME = "nx-27017.pid"
_START_MARK = "--- desk: starting nx-27017"
_PROJECT_ROOT = Path(__file__).resolve().parents[3]


class EmbeddedMongoError(RuntimeError):
    """The embedded server could not be started."""


class EmbeddedMongo:
    """The embedded server as a child process on 127.0.0.1."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = Path(data_dir).resolve()
        self.log_path = self.data_dir / LOG_NAME
        self.uri: str | None = None
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 30.0) -> str:
        """Launch the server and wait until it answers a ping; return its URI."""
        if self._proc is not None and self.uri is not None:
            return self.uri
        try:
            self.data_dir.mkdir(parents=True, exist_ok=True)
            port = _free_port()
            # stdout/stderr go to the log too, so tracebacks that happen before logging is set up are kept.
            with self.log_path.open("ab") as log:
                log.write(f"{_START_MARK} on 127.0.0.1:{port}\n".encode())
                log.flush()
                self._proc = subprocess.Popen(  # noqa: S603 - our own interpreter and module
                    [sys.executable, "-m", "desk.db.embedded", "--data-dir", str(self.data_dir), "--port", str(port)],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=_child_env(),
                )
        except OSError as exc:
            raise EmbeddedMongoError(f"cannot launch the embedded MongoDB in {self.data_dir}: {exc}") from exc
        atexit.register(self.stop)
        uri = f"mongodb://127.0.0.1:{port}/"
        self._wait_ready(uri, timeout)
        self.uri = uri
        return uri

    def stop(self) -> None:
        """Terminate the server (kill it if it does not exit in time); safe to call twice."""
        proc, self._proc, self.uri = self._proc, None, None
        atexit.unregister(self.stop)
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    @property
    def pid(self) -> int | None:
        """The child's process id while it runs."""
        return self._proc.pid if self._proc is not None else None

    def __enter__(self) -> str:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _wait_ready(self, uri: str, timeout: float) -> None:
        assert self._proc is not None
        deadline = time.monotonic() + timeout
        while True:
            if (code := self._proc.poll()) is not None:
                self.stop()
                raise EmbeddedMongoError(f"the embedded MongoDB exited with code {code}:\n{self._log_tail()}")
            client: MongoClient = MongoClient(uri, serverSelectionTimeoutMS=250, connectTimeoutMS=250)
            try:
                client.admin.command("ping")
                return
            except PyMongoError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise EmbeddedMongoError(
                        f"the embedded MongoDB did not answer on {uri} within {timeout:g} s:\n{self._log_tail()}"
                    ) from None
            finally:
                client.close()
            time.sleep(0.05)

    def _log_tail(self, lines: int = 20) -> str:
        """The last lines this launch wrote to the log."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError as exc:
            return f"(no log: {exc})"
        this_launch = text.rpartition(_START_MARK)[2].partition("\n")[2]
        return "\n".join(this_launch.splitlines()[-lines:]) or "(nothing in the log)"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _child_env() -> dict[str, str]:
    # The child must import this same `desk` package, whether or not the project is installed.
    env = dict(os.environ)
    # A coverage run that follows child processes (the test suite's) would trace the engine under every
    # command for nothing: the child's code is excluded from the figures. Untraced, the database-heavy
    # tests ran about 7 % faster, and the fuzzing test (whose `desk run` starts its own) 13 %.
    env.pop("COVERAGE_PROCESS_CONFIG", None)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(_PROJECT_ROOT), env.get("PYTHONPATH")]))
    return env
