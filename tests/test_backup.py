"""`desk backup` and `desk restore`, run as an operator would: a running desk, under writes, into a fresh one."""

import subprocess
import threading
import time

import httpx
from pymongo import MongoClient

from bench.harness import desk_command, desk_env, desk_running
from desk.db.embedded import EmbeddedMongo
from tests.helpers import until_blocking

ADMIN = {"DESK_ADMIN_EMAIL": "ops@example.com", "DESK_ADMIN_PASSWORD": "a sturdy passphrase"}
WEB_ONLY = {"DESK_RUN_WORKER": "false"}  # backups are the web process's database: no worker needed beside it
CSRF = {"X-Desk-CSRF": "1"}


def _desk(*args: str, **env: str) -> subprocess.CompletedProcess:
    command = desk_command(*args)
    return subprocess.run(command, env=desk_env(**env), capture_output=True, text=True, timeout=90, check=False)  # noqa: S603


def _api(url: str) -> httpx.Client:
    """An API client with a personal token, as a script would hold one."""
    with httpx.Client(base_url=url, headers=CSRF) as login:
        credentials = {"email": ADMIN["DESK_ADMIN_EMAIL"], "password": ADMIN["DESK_ADMIN_PASSWORD"]}
        assert login.post("/api/v1/auth/login", json=credentials).status_code == 200
        token = login.post("/api/v1/auth/tokens", json={"name": "backup test"}).json()["secret"]
    return httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=30)


def _all(api: httpx.Client, path: str) -> tuple[list[dict], int]:
    items, offset = [], 0
    while True:
        page = api.get(path, params={"offset": offset, "limit": 100}).json()
        items += page["items"]
        offset += 100
        if offset >= page["total"]:
            return items, page["total"]


class Writer(threading.Thread):
    """Creates work orders through the API until told to stop; remembers when each was acknowledged."""

    def __init__(self, api: httpx.Client) -> None:
        super().__init__(daemon=True)
        self.api, self.stop, self.acked = api, threading.Event(), []

    def run(self) -> None:
        n = 0
        while not self.stop.is_set():
            n += 1
            answer = self.api.post("/api/v1/work-orders", json={"title": f"Written while backing up {n}"})
            assert answer.status_code == 201, answer.text
            self.acked.append((time.monotonic(), answer.json()["id"]))


def test_a_backup_of_a_running_desk_under_writes_restores_into_a_fresh_desk(tmp_path):
    backup = tmp_path / "desk-backup.db"
    # One writer as fast as it goes: far past a person's write limit, which this test is not about.
    fast = {"DESK_WRITES_PER_MINUTE": "100000", **ADMIN, **WEB_ONLY}
    with desk_running(tmp_path / "live", **fast) as live, _api(live.url) as api:
        made = [
            api.post(
                "/api/v1/admin/users",
                json={"email": f"p{i}@example.com", "name": f"Person {i}", "password": "another sturdy passphrase"},
            )
            for i in range(3)
        ]
        assert [r.status_code for r in made] == [201] * 3
        first = api.post("/api/v1/work-orders", json={"title": "Leaking tap", "priority": "high"}).json()
        changed = api.patch(
            f"/api/v1/work-orders/{first['id']}", json={"version": first["version"], "title": "Leaking tap, kitchen"}
        )
        assert changed.status_code == 200
        writer = Writer(api)
        writer.start()
        until_blocking(lambda: len(writer.acked) >= 20, what="20 writes acknowledged", within=60)
        started = time.monotonic()
        saved = _desk("backup", str(backup), DESK_DATA_DIR=str(tmp_path / "live"))
        ended = time.monotonic()
        until_blocking(lambda: writer.acked[-1][0] > ended, what="a write after the backup")  # still taking writes
        refused = _desk("restore", str(backup), DESK_DATA_DIR=str(tmp_path / "live"))
        writer.stop.set()
        writer.join()
        users_before, _ = _all(api, "/api/v1/admin/users")

    assert saved.returncode == 0, saved.stderr
    assert "Backed up the desk's database" in saved.stdout
    assert backup.stat().st_mode & 0o777 == 0o600  # password hashes and every order: the desk's user's alone
    assert (tmp_path / "live" / "mongo").stat().st_mode & 0o777 == 0o700  # so is the live database
    assert any(started < at < ended for at, _ in writer.acked), "no write landed while the backup ran"
    assert refused.returncode != 0 and "the desk is running" in refused.stderr

    restored = _desk("restore", str(backup), DESK_DATA_DIR=str(tmp_path / "fresh"))
    assert restored.returncode == 0, restored.stderr
    with desk_running(tmp_path / "fresh", **WEB_ONLY) as fresh, _api(fresh.url) as api:
        orders, total = _all(api, "/api/v1/work-orders")
        users, _ = _all(api, "/api/v1/admin/users")
        activity = {order["id"]: api.get(f"/api/v1/work-orders/{order['id']}/activity").json() for order in orders}

    ids = {order["id"] for order in orders}
    assert {oid for at, oid in writer.acked if at < started} <= ids  # everything acknowledged before the backup
    assert first["id"] in ids and len(orders) == total  # the counters agree with the documents: one moment
    assert {u["email"] for u in users} == {u["email"] for u in users_before}
    assert [a["action"] for a in activity[first["id"]]] == ["updated", "created"]
    # every order whose create was answered before the backup began has its history; one caught between its
    # insert and its timeline entry (the two are separate writes) may not, and its create was not answered yet
    done_before = {oid for at, oid in writer.acked if at < started}
    assert all([a["action"] for a in activity[oid]][-1:] == ["created"] for oid in done_before)


def test_the_first_start_after_a_restore_counts_the_orders_again(tmp_path):
    """A backup is one moment, which can fall between an order's insert and its counters' (separate writes).
    The files attached to orders (GridFS) are in the backup too."""
    photo = bytes(range(256)) * 2000  # 512 KB: GridFS chunks more than one
    with desk_running(tmp_path / "live", **ADMIN, **WEB_ONLY) as live, _api(live.url) as api:
        for n in range(3):
            assert api.post("/api/v1/work-orders", json={"title": f"Order {n}"}).status_code == 201
        order = _all(api, "/api/v1/work-orders")[0][0]
        files = {"file": ("meter.bin", photo, "application/octet-stream")}
        attached = api.post(f"/api/v1/work-orders/{order['id']}/attachments", files=files)
        assert attached.status_code == 201, attached.text
    with EmbeddedMongo(tmp_path / "live" / "mongo") as uri, MongoClient(uri) as client:  # caught mid-write, as it were
        client["desk"]["counters"].update_many({"_id": {"$ne": "changes:seq"}}, {"$inc": {"n": -1}})
    backup = tmp_path / "caught.db"
    assert _desk("backup", str(backup), DESK_DATA_DIR=str(tmp_path / "live")).returncode == 0
    assert _desk("restore", str(backup), DESK_DATA_DIR=str(tmp_path / "fresh")).returncode == 0

    with desk_running(tmp_path / "fresh", **WEB_ONLY) as fresh, _api(fresh.url) as api:
        orders, total = _all(api, "/api/v1/work-orders")
        listed = api.get(f"/api/v1/work-orders/{order['id']}/attachments").json()
        restored_file = api.get(f"/api/v1/attachments/{attached.json()['id']}")

    assert (len(orders), total) == (3, 3)
    assert [f["name"] for f in listed] == ["meter.bin"]
    assert restored_file.status_code == 200 and restored_file.content == photo
    assert not (tmp_path / "fresh" / "mongo" / "restored").exists()  # recounted once: later starts need not


def test_restore_needs_a_backup_and_backup_a_new_file(tmp_path):
    with desk_running(tmp_path / "live", **WEB_ONLY) as live:
        assert httpx.get(f"{live.url}/healthz").status_code == 200
    existing = tmp_path / "taken.db"
    existing.write_text("not a database")

    over = _desk("backup", str(existing), DESK_DATA_DIR=str(tmp_path / "live"))
    junk = _desk("restore", str(existing), DESK_DATA_DIR=str(tmp_path / "other"))

    assert over.returncode != 0 and "exists: back up to a new file" in over.stderr
    assert junk.returncode != 0 and "is not a desk backup" in junk.stderr


def test_on_mongodb_both_commands_point_at_mongodump(tmp_path):
    for command in ("backup", "restore"):
        result = _desk(command, str(tmp_path / "x.db"), MONGODB_URI="mongodb://127.0.0.1:9/")
        assert result.returncode != 0
        assert result.stderr.strip() == (
            "desk: MONGODB_URI is set: back up and restore that MongoDB with mongodump and mongorestore "
            "(docs/operations.md)"
        )
