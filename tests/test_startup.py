"""Several web processes on one database, as a compose scale-up or a rolling restart starts them."""

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from datetime import UTC, datetime, timedelta

import httpx
from bson import ObjectId
from pymongo import MongoClient

from bench.harness import desk_running
from desk.app import ensure_first_admin
from desk.config import Settings
from desk.db.embedded import EmbeddedMongo

ADMIN = {"DESK_ADMIN_EMAIL": "ops@example.com", "DESK_ADMIN_PASSWORD": "a sturdy passphrase"}


def test_two_web_processes_started_at_once_share_the_first_admin_and_leave_the_jobs_to_the_worker(tmp_path):
    with EmbeddedMongo(tmp_path / "mongo") as uri, MongoClient(uri, tz_aware=True) as client:
        runs = client["desk"]["agent_runs"]  # a copilot run whose web process died: only a worker ends it
        dead = {"_id": ObjectId(), "status": "running", "leaseUntil": datetime.now(UTC) - timedelta(hours=1)}
        runs.insert_one(dead)
        settings = {"MONGODB_URI": uri, "DESK_RUN_WORKER": "false", **ADMIN}
        with ExitStack() as stack, ThreadPoolExecutor(2) as pool:
            started = [
                pool.submit(lambda home: stack.enter_context(desk_running(home, **settings)), tmp_path / name)
                for name in ("web-1", "web-2")
            ]
            desks = [future.result() for future in started]  # both ready, neither exited with a config error
            logins = [
                httpx.post(
                    f"{desk.url}/api/v1/auth/login",
                    json={"email": ADMIN["DESK_ADMIN_EMAIL"], "password": ADMIN["DESK_ADMIN_PASSWORD"]},
                    headers={"X-Desk-CSRF": "1"},
                )
                for desk in desks
            ]
            page, api = httpx.get(f"{desks[0].url}/login"), httpx.get(f"{desks[1].url}/healthz")
            time.sleep(2)  # a worker sweeps as it starts: give one the time it would need
            admins = list(client["desk"]["users"].find({"role": "admin"}, {"email": 1}))
            still = runs.find_one({"_id": dead["_id"]})["status"]
            logs = [desk.log.read_text() for desk in desks]

    assert [login.status_code for login in logins] == [200, 200]
    assert [admin["email"] for admin in admins] == ["ops@example.com"]
    assert still == "running"
    assert not any('"worker started"' in log for log in logs)
    # the app's assembly puts the security headers around pages and API alike (no other site may frame the desk)
    for answer in (page, api):
        assert "frame-ancestors 'none'" in answer.headers["content-security-policy"]
        assert answer.headers["x-frame-options"] == "DENY"
    assert "strict-transport-security" not in page.headers  # not served over https here
    assert f"Max-Age={12 * 3600}" in page.headers["set-cookie"]  # NiceGUI's cookie lives no longer than a session


async def test_two_start_ups_racing_for_the_first_admin_both_go_on(db):
    settings = Settings(desk_admin_email=ADMIN["DESK_ADMIN_EMAIL"], desk_admin_password=ADMIN["DESK_ADMIN_PASSWORD"])

    # both find no users, both try to make the admin: the unique index lets one in, the other goes on
    made = await asyncio.gather(ensure_first_admin(db, settings), ensure_first_admin(db, settings))

    assert sorted(first is None for first in made) == [False, True]
    assert await db["users"].count_documents({"role": "admin"}) == 1
