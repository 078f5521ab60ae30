"""The real desk as its own process: start `desk run` on a free port, wait until it serves, stop it.

Also any other ASGI app under uvicorn in its own process (`serve`, `running`, and `read_body` for
its requests): the fake provider (the tests' own, tests/fake_provider.py) and the copilot's floor.

The benches (bench/api.py, bench/ui.py, bench/copilot.py) and the tests that need the whole process
(tests/test_cli.py, tests/e2e/conftest.py) all start the desk this one way. It lives in bench/, not
tests/, because the dependency may only point one way: a bench is run by hand without pytest and must
not import the test suite's conftest (its fixtures and plugins come with it), while a test may import
anything in the repository. The one test module the benches import is the fake provider, which loads
none. Nothing here uses pytest, and the desk itself (desk/) never imports it.
"""

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
from starlette.types import Receive

READY_SECONDS = 60.0
STOP_SECONDS = 30.0
# Printed once start-up is over, after the first admin is made; /readyz answers before that.
WELCOME = "Work Order Desk is running"
# NiceGUI treats a process that sees PYTEST_* as a test and would not serve; the desk's own settings
# come only from what the caller passes, never from the developer's shell.
NOT_INHERITED = ("PYTEST", "MONGODB_", "DESK_", "AI_", "AGENT_", "NICEGUI_", "FORWARDED_ALLOW_IPS")


@dataclass(frozen=True)
class Desk:
    """A `desk run` that is serving: where it answers, and the files its output goes to."""

    url: str
    port: int
    process: subprocess.Popen
    out: Path  # what it prints for a person (stdout)
    log: Path  # its log lines (stderr)


def serve(app: str, port: int, env: dict[str, str] | None = None) -> subprocess.Popen:
    """The ASGI `app` (module:name) under uvicorn in its own process, once it accepts connections."""
    command = ["-m", "uvicorn", app, "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"]
    server = subprocess.Popen([sys.executable, *command], env=env)  # noqa: S603 - our own module
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return server
        time.sleep(0.05)
    server.kill()
    raise RuntimeError(f"{app} did not start")


@contextmanager
def running(process: subprocess.Popen) -> Iterator[subprocess.Popen]:
    """`process` (from `serve`) until the block ends; then terminated."""
    try:
        yield process
    finally:
        process.terminate()
        process.wait(timeout=30)


async def read_body(receive: Receive) -> bytes:
    """The whole body of an ASGI request, for the apps `serve` runs (and the tests' fake provider)."""
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            return body


def free_port() -> int:
    """A loopback port nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def desk_command(*args: str) -> list[str]:
    """The `desk` command line: the venv's console script, next to this interpreter."""
    return [str(Path(sys.executable).with_name("desk")), *args]


def desk_env(**settings: str) -> dict[str, str]:
    """This process's environment without the desk's settings and pytest's markers, plus `settings`."""
    return {**{k: v for k, v in os.environ.items() if not k.startswith(NOT_INHERITED)}, **settings}


@contextmanager
def desk_running(home: Path, **settings: str) -> Iterator[Desk]:
    """`desk run` on 127.0.0.1 and a free port, with DESK_DATA_DIR, working directory and output in `home`.

    Yields once /readyz answers 200 and the desk has said it is running; stops it with SIGINT (as
    Ctrl+C does, so it stops its worker on the way out) when the block ends.
    """
    port = free_port()
    home.mkdir(parents=True, exist_ok=True)  # NiceGUI makes its storage below it without parents
    env = desk_env(DESK_HOST="127.0.0.1", DESK_PORT=str(port), DESK_DATA_DIR=str(home), **settings)
    out, log = home / "desk.out", home / "desk.log"
    with out.open("wb") as stdout, log.open("wb") as stderr:
        process = subprocess.Popen(desk_command("run"), env=env, cwd=home, stdout=stdout, stderr=stderr)  # noqa: S603
    desk = Desk(url=f"http://127.0.0.1:{port}", port=port, process=process, out=out, log=log)
    try:
        _wait_ready(desk)
        yield desk
    finally:
        _stop(process)


def _wait_ready(desk: Desk) -> None:
    deadline = time.monotonic() + READY_SECONDS
    while time.monotonic() < deadline:
        if desk.process.poll() is not None:
            raise RuntimeError(f"desk run exited with status {desk.process.returncode}\n{_output(desk)}")
        try:
            if httpx.get(f"{desk.url}/readyz", timeout=1).status_code == 200 and WELCOME in desk.out.read_text():
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"desk run was not ready within {READY_SECONDS:g} s\n{_output(desk)}")


def _output(desk: Desk) -> str:
    return f"--- stdout\n{desk.out.read_text(errors='replace')}--- stderr\n{desk.log.read_text(errors='replace')}"


def _stop(process: subprocess.Popen) -> None:
    process.send_signal(signal.SIGINT)
    try:
        process.wait(timeout=STOP_SECONDS)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
