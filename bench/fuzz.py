"""Fuzz the whole HTTP API with schemathesis, from its own OpenAPI schema, as each kind of caller.

Starts `desk run` (bench/harness.py) on a fresh embedded database, adds a viewer and a user beside the
first admin, then runs `st run` with every check (`--checks all`) and its coverage, fuzzing and
stateful phases over every operation of /api/openapi.json: anonymously, then logged in as the viewer,
the user and the admin (a real session cookie and the CSRF header, from bench/fuzz_auth.py). Each run
writes schemathesis's JSON report; the summary counts what failed. tests/test_fuzz.py runs a short
version of it in the test suite; by hand, the long one (results in docs/fuzzing.md):

    .venv/bin/python -m bench.fuzz [--examples 100] [--seed 1] [--roles anonymous,viewer,user,admin]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from bench.harness import Desk, desk_running
from desk.db.embedded import EmbeddedMongo

REPO = Path(__file__).resolve().parents[1]
ROLES = ("anonymous", "viewer", "user", "admin")
PASSWORD = "fuzzing the desk for a while"  # noqa: S105 - a throwaway desk on loopback
ADMIN_EMAIL = "admin@fuzz.example"
SETTINGS = {
    "DESK_ADMIN_EMAIL": ADMIN_EMAIL,
    "DESK_ADMIN_PASSWORD": PASSWORD,
    "DESK_RUN_WORKER": "false",  # the API alone: no triage passes taking the CPU from the run
    "DESK_LOGIN_ATTEMPTS_PER_MINUTE": "100000",  # the fuzzer logs in again after every logout it makes
    "DESK_LOGIN_FREE_FAILURES": "100000",  # and tries wrong passwords by the thousand: fuzz the login, not its delays
    "DESK_WRITES_PER_MINUTE": "100000",  # one role writes far faster than a person: fuzz the writes, not the limit
}


@dataclass
class Result:
    """One role's run, from schemathesis's JSON report."""

    role: str
    seconds: float
    operations: int
    test_cases: int
    failures: list[dict] = field(default_factory=list)  # {code, title, count, operations}
    errors: list[dict] = field(default_factory=list)
    phases: dict[str, str] = field(default_factory=dict)
    output: str = ""  # what `st run` printed, for a failing run's message

    @property
    def clean(self) -> bool:
        return not self.failures and not self.errors


def fuzz(
    desk: Desk, role: str, *, examples: int, seed: int, reports: Path, mongodb_uri: str = "", coverage: bool = True
) -> Result:
    """`st run` with every check and phase (without `coverage`: all but that one) against the desk, as `role`."""
    reports.mkdir(parents=True, exist_ok=True)
    report = reports / f"{role}.json"
    env = {**os.environ, "SCHEMATHESIS_HOOKS": "bench.fuzz_auth", "FUZZ_URL": desk.url, "FUZZ_MONGODB_URI": mongodb_uri}
    # The fuzzer runs none of the desk's code, and under the test suite's coverage (which follows every
    # child process) tracing its generators took a quarter of the run's CPU: it runs untraced.
    env.pop("COVERAGE_PROCESS_CONFIG", None)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))  # st imports the hooks
    if role != "anonymous":
        env |= {"FUZZ_EMAIL": email_of(role), "FUZZ_PASSWORD": PASSWORD}
    command = [
        str(Path(sys.executable).with_name("st")),
        "run",
        f"{desk.url}/api/openapi.json",
        "--checks=all",
        "--phases=examples,coverage,fuzzing,stateful" if coverage else "--phases=examples,fuzzing,stateful",
        f"--max-examples={examples}",
        f"--seed={seed}",
        "--workers=1",  # a 2-core machine: the desk and the fuzzer share it
        "--generation-database=none",  # nothing carried from one run to the next: the seed decides
        "--no-color",
        "--report=json",
        f"--report-json-path={report}",
    ]
    started = time.monotonic()
    # in the reports' directory: st keeps a cache (.schemathesis/) where it runs
    done = subprocess.run(command, env=env, cwd=reports, capture_output=True, text=True, check=False)  # noqa: S603
    seconds = time.monotonic() - started
    (reports / f"{role}.txt").write_text(done.stdout + done.stderr)  # each failure with a curl line to replay it
    if not report.exists():
        raise RuntimeError(f"st run wrote no report (exit {done.returncode})\n{done.stdout}\n{done.stderr}")
    data = json.loads(report.read_text())
    return Result(
        role=role,
        seconds=seconds,
        operations=data["operations"]["tested"],
        test_cases=data["test_cases"]["generated"],
        failures=data["failures"],
        errors=data["errors"],
        phases={name: phase["status"] for name, phase in data["phases"].items()},
        output=done.stdout[-20_000:] + done.stderr[-5_000:],
    )


def email_of(role: str) -> str:
    return ADMIN_EMAIL if role == "admin" else f"{role}@fuzz.example"


def add_people(desk: Desk) -> None:
    """A viewer and a user beside the first admin, made by the admin through the API."""
    with httpx.Client(base_url=desk.url, headers={"X-Desk-CSRF": "1"}, timeout=30) as admin:
        admin.post("/api/v1/auth/login", json={"email": ADMIN_EMAIL, "password": PASSWORD}).raise_for_status()
        for role in ("viewer", "user"):
            person = {"email": email_of(role), "name": role.title(), "role": role, "password": PASSWORD}
            admin.post("/api/v1/admin/users", json=person).raise_for_status()


def run(
    home: Path,
    *,
    examples: int,
    seed: int,
    roles: tuple[str, ...] = ROLES,
    together: bool = False,
    coverage_for: tuple[str, ...] = ROLES,
) -> list[Result]:
    """One desk, every role in turn (the admin last), or `together`: the runs at once, which mostly wait on
    the desk, so the wall time is about the longest one's. The database is started here, so the hooks can
    put back an account the fuzzing admin changed (a reset password, a lock, a deactivation). Only the
    roles in `coverage_for` run the coverage phase (the others: examples, fuzzing, stateful).
    """
    with EmbeddedMongo(home / "mongo") as uri, desk_running(home / "desk", MONGODB_URI=uri, **SETTINGS) as desk:
        add_people(desk)

        def one(role: str) -> Result:
            reports, covered = home / "reports", role in coverage_for
            return fuzz(desk, role, examples=examples, seed=seed, reports=reports, mongodb_uri=uri, coverage=covered)

        if not together:
            return [one(role) for role in roles]
        with ThreadPoolExecutor(len(roles)) as pool:
            return list(pool.map(one, roles))


def summary(results: list[Result]) -> str:
    lines = ["| caller | operations | test cases | failures | seconds |", "|---|---:|---:|---:|---:|"]
    for result in results:
        found = sum(failure["count"] for failure in result.failures) + len(result.errors)
        lines.append(f"| {result.role} | {result.operations} | {result.test_cases} | {found} | {result.seconds:.0f} |")
    for result in results:
        for failure in result.failures:
            ops = ", ".join(failure["operations"])
            lines.append(f"- {result.role}: {failure['code']} {failure['title']} x{failure['count']}: {ops}")
        lines += [f"- {result.role}: error {error}" for error in result.errors]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=100, help="test cases per operation and phase")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--roles", default=",".join(ROLES))
    parser.add_argument("--keep", type=Path, help="keep the desk's files and the reports here")
    parser.add_argument("--together", action="store_true", help="the roles at once (as tests/test_fuzz.py does)")
    args = parser.parse_args()
    roles = tuple(args.roles.split(","))
    with tempfile.TemporaryDirectory(prefix="desk-fuzz-") as scratch:
        home = args.keep or Path(scratch)
        results = run(home, examples=args.examples, seed=args.seed, roles=roles, together=args.together)
    print(summary(results))
    sys.exit(0 if all(result.clean for result in results) else 1)


if __name__ == "__main__":
    main()
