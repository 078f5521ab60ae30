"""`desk run` as a process: what a client of the running desk, or a second `desk` command beside it, meets."""

import contextlib
import json
import subprocess
import time
from pathlib import Path

import httpx

from bench.harness import desk_command, desk_env, desk_running

ADMIN = {"DESK_ADMIN_EMAIL": "ops@example.com", "DESK_ADMIN_PASSWORD": "a sturdy passphrase"}
FORGED = "198.51.100.7"


def test_seed_while_the_embedded_desk_runs_says_to_stop_it_first(tmp_path):
    home = tmp_path / "desk"
    with desk_running(home, DESK_SECRET="x" * 40, AI_ENABLED="false", DESK_RUN_WORKER="false"):
        result = subprocess.run(  # noqa: S603 - our own command
            desk_command("seed", "--demo"),
            env=desk_env(DESK_DATA_DIR=str(home)),
            capture_output=True,
            text=True,
            timeout=90,
            check=False,
        )
    assert result.returncode == 1
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("desk: the desk is running (embedded database pid ") and "stop it first" in line


def test_a_direct_clients_forged_x_forwarded_for_is_not_believed(tmp_path):
    # Behind nothing (FORWARDED_ALLOW_IPS unset), the address is the TCP peer's, even a loopback peer's: the
    # login throttle, the copilot's limit and the security log key on it. uvicorn alone believed 127.0.0.1.
    with desk_running(tmp_path / "desk", AI_ENABLED="false", DESK_RUN_WORKER="false", **ADMIN) as desk:
        forged = {"X-Forwarded-For": FORGED, "X-Real-IP": FORGED, "X-Desk-CSRF": "1"}
        wrong = {"email": ADMIN["DESK_ADMIN_EMAIL"], "password": "a wrong guess"}
        answer = httpx.post(f"{desk.url}/api/v1/auth/login", json=wrong, headers=forged)
        failed = _security_events(desk.log, "login_failed")

    assert answer.status_code == 401
    assert [event["address"] for event in failed] == ["127.0.0.1"]
    assert FORGED not in desk.log.read_text()


def _security_events(log: Path, name: str, timeout: float = 10.0) -> list[dict]:
    """The security events called `name` in a desk's log, once there is one (the line is written after the answer)."""
    deadline = time.monotonic() + timeout
    while True:
        lines = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
        if (found := [line for line in lines if line.get("event") == name]) or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


def test_desk_run_starts_desk_worker_beside_it_unless_desk_run_worker_is_false(tmp_path):
    with desk_running(tmp_path / "with", AI_ENABLED="false") as desk:
        beside = _children(desk.process.pid)
    with desk_running(tmp_path / "without", AI_ENABLED="false", DESK_RUN_WORKER="false") as desk:
        alone = _children(desk.process.pid)

    worker = ["-m", "desk", "worker"]  # `desk worker`, without the web app's imports (desk/__main__.py)
    assert [argv[1:] for argv in beside].count(worker) == 1
    assert worker not in [argv[1:] for argv in alone]


def _children(pid: int) -> list[list[str]]:
    """The command lines of a process's children (Linux's /proc)."""
    found = []
    for listing in Path(f"/proc/{pid}/task").glob("*/children"):
        for child in listing.read_text().split():
            with contextlib.suppress(FileNotFoundError):  # a child that has just ended
                found.append(Path(f"/proc/{child}/cmdline").read_bytes().decode().split("\0")[:-1])
    return found
