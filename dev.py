#!/usr/bin/env python3
"""Set up and run the Work Order Desk.

    python3 dev.py run  [desk run options]   set up, then run the desk on the embedded database
    python3 dev.py test [pytest arguments]   set up, then lint and run the test suite

Standard library only: this file runs before anything is installed.
"""

# ruff: noqa: S603, S606 -- starting the project's own tools and apt-get is this file's job.

# Lazy annotations keep this file importable on an old Python, so it can say which one it needs.
from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import NoReturn

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / "bin"
# Records what the venv was installed from, so a repeated run skips pip and starts in a second.
STAMP = VENV / ".dev-stamp"

# The venv's tools go first on PATH, so that anything the desk or the tests start by name
# (python, desk, nx-27017) resolves inside the venv, as if it were activated.
ENV = {**os.environ, "VIRTUAL_ENV": str(VENV), "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}


def header(text: str) -> None:
    print(f"==> {text}", flush=True)


def fail(message: str, code: int = 2) -> NoReturn:
    print(f"dev.py: {message}", file=sys.stderr, flush=True)
    sys.exit(code)


def call(*cmd: str | Path, env: dict[str, str] | None = None, quiet: bool = False) -> int:
    """Run a command in the repo root; return its exit code (128+N when killed by signal N).

    `quiet`: what it prints is shown only if it fails. pip's build backend talks even with --quiet
    (setuptools' notes on editable installs), and a first run should say what it does, not how."""
    done = subprocess.run([str(part) for part in cmd], cwd=ROOT, env=env or ENV, capture_output=quiet, check=False)
    if quiet and done.returncode:
        sys.stdout.buffer.write(done.stdout)  # as bytes: whatever it printed, shown as it came
        sys.stdout.flush()
        sys.stderr.buffer.write(done.stderr)
        sys.stderr.flush()
    return 128 - done.returncode if done.returncode < 0 else done.returncode


def check(*cmd: str | Path, env: dict[str, str] | None = None, quiet: bool = False) -> None:
    """Run a command (`call`); stop dev.py with the command's exit code if it fails."""
    code = call(*cmd, env=env, quiet=quiet)
    if code:
        fail(f"{Path(str(cmd[0])).name} failed (exit {code})", code)


def is_root() -> bool:
    return os.geteuid() == 0


def apt_install(*packages: str) -> None:
    """Install Debian packages as root, without questions (CI has no terminal)."""
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    header(f"apt-get install {' '.join(packages)}")
    check("apt-get", "update", env=env)
    check("apt-get", "install", "-y", "--no-install-recommends", *packages, env=env)


def ensure_venv_support() -> None:
    # Debian moves ensurepip (which venv needs) out of the standard library into python3.X-venv.
    if importlib.util.find_spec("ensurepip") is not None:
        return
    package = f"python3.{sys.version_info.minor}-venv"
    if not is_root():
        fail(f"this Python cannot create virtual environments; install it with: sudo apt-get install {package}")
    apt_install(package)


def setup(extras: set[str]) -> None:
    """Create .venv if needed and install the project (editable) with the given extras."""
    if sys.version_info < (3, 11):  # noqa: UP036 -- this check is for the Python running dev.py
        fail(f"Python 3.11 or newer is needed, this is {sys.version.split()[0]} ({sys.executable})")

    fresh = not (BIN / "python").exists()
    if fresh:
        ensure_venv_support()
        header(f"creating {VENV.name} with {sys.executable}")
        # --clear: a half-made .venv (say, an interrupted first run) is rebuilt rather than reused.
        check(sys.executable, "-m", "venv", "--clear", VENV)
        # The bundled pip can be old (Debian's is); a current one resolves and builds reliably.
        check(BIN / "python", "-m", "pip", "install", "--quiet", "--upgrade", "pip", quiet=True)

    # The stamp holds pyproject.toml's hash and the extras installed with it. An install with more
    # extras serves a command that needs fewer (`test` installs dev, so a later `run` skips pip).
    digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    if not fresh and STAMP.exists():
        stamped_digest, _, stamped_extras = STAMP.read_text().strip().partition(" ")
        if stamped_digest == digest and extras <= set(filter(None, stamped_extras.split(","))):
            return

    target = f".[{','.join(sorted(extras))}]" if extras else "."
    header(f"pip install -e {target}" + (" (a minute or two the first time)" if fresh else ""))
    STAMP.unlink(missing_ok=True)  # a failed install must not leave an old stamp that looks valid
    check(BIN / "python", "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "-e", target, quiet=True)
    STAMP.write_text(f"{digest} {','.join(sorted(extras))}\n")


def ensure_chromium() -> None:
    """The browser tests drive Debian's headless Chromium through its matching chromedriver."""
    have_browser = Path("/usr/bin/chromium").exists() or shutil.which("chromium")
    have_driver = Path("/usr/bin/chromedriver").exists() or shutil.which("chromedriver")
    have_nginx = Path("/usr/sbin/nginx").exists()  # tests/deploy/ runs deploy/nginx.conf in front of two desks
    if have_browser and have_driver and have_nginx:
        return
    if not is_root():
        fail("the tests need Chromium and nginx: sudo apt-get install chromium chromium-driver nginx")
    apt_install("chromium", "chromium-driver", "nginx")


def run(args: list[str]) -> None:
    setup(set())
    desk = BIN / "desk"
    if not desk.exists():
        fail(f"{desk} is missing; is [project.scripts] desk in pyproject.toml?")
    # exec, not a child: Ctrl-C and the exit code go straight to the desk.
    os.execve(desk, [str(desk), "run", *args], ENV)


def compile_sources() -> None:
    """Byte-compile the project once. The suite starts a hundred or so Python processes (desks, workers,
    command-line runs); where PYTHONDONTWRITEBYTECODE is set, each compiled the desk again (0.4 s)."""
    sources = ("main.py", "scheduler.py", "desk", "pages", "components", "bench", "tests")
    check(BIN / "python", "-m", "compileall", "-q", *(str(ROOT / name) for name in sources))


def test(args: list[str]) -> None:
    setup({"dev"})
    ensure_chromium()
    compile_sources()
    # Three processes (pytest-xdist), each with its own embedded database: the suite mostly waits (on a
    # single-threaded database server, on browsers, on desks it starts), and two processes kept less than one of
    # the two cores busy (measured 2026-12-08: 0.9 core). A test file stays in one process, so a file's shared
    # desk or browser starts once. `-n 0` runs in one process.
    pytest = [BIN / "pytest", "-n", "3", "--dist", "loadfile", "--cov=desk", "--cov-report=term-missing:skip-covered"]
    # Extra arguments mean a partial run (a folder, -x, -k ...), which cannot meet the coverage bar.
    pytest += args if args else ["--cov-fail-under=85"]
    steps = [
        ("ruff check", [BIN / "ruff", "check", "."]),
        ("ruff format --check", [BIN / "ruff", "format", "--check", "."]),
        ("lint-imports (layer contracts in pyproject.toml)", [BIN / "lint-imports"]),
        ("pytest" + (f" {' '.join(args)}" if args else " (coverage >= 85%)"), pytest),
    ]
    for title, cmd in steps:
        header(title)
        code = call(*cmd)
        if code == 5 and cmd is pytest:
            # pytest's 5 means no test was collected: a suite that tests nothing has not passed.
            fail("pytest collected no tests", 5)
        if code:
            fail(f"{title} failed (exit {code})", code)
    # Nothing is printed after pytest: CI reads its closing summary line.


def main() -> None:
    commands = {"run": run, "test": test}
    if len(sys.argv) < 2 or sys.argv[1] not in commands:
        fail(f"usage: python3 {Path(sys.argv[0]).name} run|test [arguments passed on to desk run / pytest]")
    try:
        commands[sys.argv[1]](sys.argv[2:])
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
