"""The `desk` command, run as a person would: create an admin, seed demo data, and run the desk."""

import subprocess
import time
from datetime import UTC, datetime, timedelta

import httpx
from bson import ObjectId
from pymongo import MongoClient

from bench.harness import desk_command, desk_env, desk_running
from desk.db.embedded import EmbeddedMongo


def _desk(*args: str, env: dict[str, str], timeout: float = 90) -> subprocess.CompletedProcess:
    command = desk_command(*args)
    return subprocess.run(command, env=desk_env(**env), capture_output=True, text=True, timeout=timeout, check=False)  # noqa: S603


def test_create_admin_and_seed_on_the_embedded_database(tmp_path):
    env = {"DESK_DATA_DIR": str(tmp_path), "DESK_ADMIN_PASSWORD": "a sturdy passphrase"}

    made = _desk("create-admin", "--email", "ops@example.com", env=env)
    again = _desk("create-admin", "--email", "ops@example.com", env=env)
    seeded = _desk("seed", "--demo", env=env)

    assert made.returncode == 0 and "Created admin ops@example.com" in made.stdout
    assert again.returncode != 0 and "already exists" in again.stderr
    assert seeded.returncode == 0 and "Added 200 demo work orders" in seeded.stdout
    with EmbeddedMongo(tmp_path / "mongo") as uri, MongoClient(uri) as client:
        (entry,) = client["desk"]["audit_log"].find({}, {"_id": 0, "at": 0, "subjectId": 0})  # not the demo people
    details = {"name": "Admin", "email": "ops@example.com", "role": "admin", "via": "desk create-admin"}
    assert entry == {"action": "user_created", "actorId": None, "actorKind": "system", "details": details}


def test_a_bad_setting_stops_the_command_with_a_readable_line(tmp_path):
    result = _desk("seed", "--demo", env={"DESK_DATA_DIR": str(tmp_path), "DESK_SESSION_IDLE_MINUTES": "-5"})
    assert result.returncode == 2
    assert result.stderr.strip() == "config error: DESK_SESSION_IDLE_MINUTES: Input should be greater than 0"


def test_desk_run_serves_the_api_runs_the_worker_and_stops_cleanly(tmp_path):
    with EmbeddedMongo(tmp_path / "mongo") as uri, MongoClient(uri, tz_aware=True) as client:
        runs = client["desk"]["agent_runs"]  # a copilot run whose web process died an hour ago
        dead = {"_id": ObjectId(), "status": "running", "leaseUntil": datetime.now(UTC) - timedelta(hours=1)}
        runs.insert_one(dead)
        with desk_running(tmp_path / "desk", MONGODB_URI=uri) as desk:  # fails unless /readyz answers
            base = desk.url
            docs = httpx.get(f"{base}/api/openapi.json").json()
            docs_page = httpx.get(f"{base}/api/docs")
            # a script with a token or a health probe keeps no cookies: it must not be handed a
            # browser session (NiceGUI kept one in memory per such request, for good)
            api_answers = [httpx.get(f"{base}{path}") for path in ("/healthz", "/api/v1/auth/me", "/api/v1/nope")]
            login_page = httpx.get(f"{base}/login")
            swept = _wait_for(lambda: runs.find_one({"_id": dead["_id"]})["status"] != "running")
        after = runs.find_one({"_id": dead["_id"]})
        out, err = desk.out.read_text(), desk.log.read_text()
    assert docs["info"]["title"] == "Work Order Desk API"
    assert docs_page.status_code == 200 and "swagger" in docs_page.text.lower()
    assert [r.status_code for r in api_answers] == [200, 401, 404]
    assert [r.json().get("error", {}).get("code") for r in api_answers[1:]] == ["UNAUTHORIZED", "NOT_FOUND"]
    assert not any("set-cookie" in r.headers for r in api_answers)
    assert login_page.status_code == 200 and "set-cookie" in login_page.headers  # pages keep NiceGUI's session
    assert f"open http://localhost:{desk.port}/" in out
    assert "Log in as admin@desk.local with the one-time password:" in out
    # the worker (scheduler.py) runs beside the web app: it swept the dead run, and it stopped with the desk
    assert swept and (after["status"], after["errorCode"]) == ("error", "lease_expired")
    assert '"worker started"' in err and '"worker stopped"' in err


def _wait_for(condition, timeout: float = 30) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.2)
    return False
