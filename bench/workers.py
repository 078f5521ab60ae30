"""Worker processes (`python scheduler.py`) on a given database, for bench/triage.py and the fault tests.

Started as production starts them: the repository's scheduler.py, its settings in the environment
only (MONGODB_URI, AI_*, AGENT_*), its log lines (JSON on stderr) in a file. Like bench/harness.py
this imports neither pytest nor the test suite, so a bench run by hand can use it too.
"""

import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from bench.harness import desk_env

ROOT = Path(__file__).resolve().parents[1]
STARTED = '"worker started"'
READY_SECONDS = 30.0


@dataclass
class Worker:
    """One `python scheduler.py` and the file its log lines go to."""

    process: subprocess.Popen
    log: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def wait_started(self, within: float = READY_SECONDS) -> None:
        """Block until the worker has opened its database and started its jobs (it logs "worker started")."""
        deadline = time.monotonic() + within
        while STARTED not in self.log_text():
            if self.process.poll() is not None:
                raise RuntimeError(f"the worker exited with {self.process.returncode}:\n{self.log_text()[-3000:]}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the worker did not start within {within:g} s:\n{self.log_text()[-3000:]}")
            time.sleep(0.05)

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM (it finishes its passes first), SIGKILL if it does not exit in time; safe on a dead worker."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)  # a paused worker cannot act on SIGTERM
            self.process.terminate()
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@dataclass
class Workers:
    """Starts workers with common settings; `stop_all` ends every one still running."""

    home: Path
    settings: dict[str, str]
    started: list[Worker] = field(default_factory=list)

    def start(self, *, wait: bool = True, **overrides: str) -> Worker:
        """A worker with the common settings plus `overrides`; waits for it to start unless `wait` is False."""
        self.home.mkdir(parents=True, exist_ok=True)
        log = self.home / f"worker-{len(self.started) + 1}.log"
        env = desk_env(**{**self.settings, **overrides})
        with log.open("wb") as stderr:
            process = subprocess.Popen(  # noqa: S603 - our own interpreter and script
                [sys.executable, str(ROOT / "scheduler.py")], env=env, cwd=ROOT, stdout=stderr, stderr=stderr
            )
        worker = Worker(process=process, log=log)
        self.started.append(worker)
        if wait:
            worker.wait_started()
        return worker

    def stop_all(self) -> None:
        for worker in self.started:
            worker.stop()


@contextmanager
def workers(home: Path, **settings: str) -> Iterator[Workers]:
    """A `Workers` for the block; every worker it started is stopped at the end."""
    pool = Workers(home=home, settings=settings)
    try:
        yield pool
    finally:
        pool.stop_all()


def worker_settings(*, mongodb_uri: str, db_name: str, provider_url: str, **agent: str) -> dict[str, str]:
    """The environment of a triage worker on `db_name` against a provider on loopback, budgets out of the way."""
    return {
        "MONGODB_URI": mongodb_uri,
        "MONGODB_DB": db_name,
        "AI_ENABLED": "true",
        "AI_BASE_URL": provider_url,
        "AI_API_KEY": "sk-worker-key",
        "AI_ALLOW_PRIVATE_BASE_URL": "true",  # the fake provider listens on 127.0.0.1
        "AGENT_DAILY_SPEND_USD": "1000",
        "AI_GLOBAL_DAILY_SPEND_USD": "1000",
        **agent,
    }
