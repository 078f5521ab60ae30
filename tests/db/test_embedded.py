"""The embedded MongoDB launcher: start, restart, stop, and failing readably."""

import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pymongo import MongoClient

from desk.db.embedded import EmbeddedMongo, EmbeddedMongoError

PROJECT_ROOT = Path(__file__).resolve().parents[2]


def alive(pid: int) -> bool:
    """True while the process runs (a zombie waiting to be reaped counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def wait_until_gone(pid: int, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not alive(pid)


def test_data_survives_a_restart(tmp_path: Path) -> None:
    server = EmbeddedMongo(tmp_path / "mongo")
    with server as uri, MongoClient(uri) as client:
        client.desk_restart.orders.insert_one({"_id": "wo-1", "title": "Leaking tap"})

    with server as uri, MongoClient(uri) as client:
        assert client.desk_restart.orders.find_one({"_id": "wo-1"}) == {"_id": "wo-1", "title": "Leaking tap"}
    assert (tmp_path / "mongo" / "desk_restart.db").is_file()  # one SQLite file per logical database


def test_stop_ends_the_process_and_is_idempotent(tmp_path: Path) -> None:
    server = EmbeddedMongo(tmp_path / "mongo")
    server.start()
    pid = server.pid
    assert pid is not None
    assert alive(pid)

    server.stop()
    assert not alive(pid)
    assert not (tmp_path / "mongo" / "nx-27017.pid").exists()
    server.stop()
    assert server.pid is None


def test_the_server_exits_when_its_parent_dies(tmp_path: Path) -> None:
    script = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from desk.db.embedded import EmbeddedMongo\n"
        "server = EmbeddedMongo(Path(sys.argv[1]))\n"
        "server.start()\n"
        "print(server.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT)}
    with subprocess.Popen(  # noqa: S603 - our own interpreter
        [sys.executable, "-c", script, str(tmp_path / "mongo")], stdout=subprocess.PIPE, text=True, env=env
    ) as parent:
        assert parent.stdout is not None
        server_pid = int(parent.stdout.readline())
        assert alive(server_pid)
        parent.send_signal(signal.SIGKILL)  # no atexit, no stop(): only the watchdog is left
        parent.wait()

    assert wait_until_gone(server_pid), "the embedded server outlived its parent"


def test_a_data_dir_that_is_a_file_fails_readably(tmp_path: Path) -> None:
    not_a_dir = tmp_path / "data"
    not_a_dir.write_text("")

    with pytest.raises(EmbeddedMongoError, match=r"cannot launch the embedded MongoDB in .*data"):
        EmbeddedMongo(not_a_dir).start()


def test_a_server_that_dies_at_start_fails_with_its_log(tmp_path: Path) -> None:
    with EmbeddedMongo(tmp_path / "mongo"):
        second = EmbeddedMongo(tmp_path / "mongo")  # same files: its pid file check refuses
        with pytest.raises(EmbeddedMongoError, match=r"(?s)exited with code 1.*already running"):
            second.start()
        assert second.pid is None


def test_expired_documents_go_on_a_read_at_most_once_a_minute(tmp_path: Path) -> None:
    # MongoDB's TTL monitor deletes expired documents once a minute; the embedded engine would
    # purge, with two scans, before every read of the collection (desk/db/embedded/patches/ttl.py).
    long_ago = datetime.now(UTC) - timedelta(hours=1)
    with EmbeddedMongo(tmp_path / "mongo") as uri, MongoClient(uri) as client:
        sessions = client.desk_ttl.sessions
        sessions.create_index("expiresAt", expireAfterSeconds=0)
        sessions.insert_many([{"_id": "gone", "expiresAt": long_ago}, {"_id": "epoch", "expiresAt": 5}])
        assert sorted(doc["_id"] for doc in sessions.find()) == ["epoch"]  # like MongoDB, only dates expire

        sessions.insert_one({"_id": "expired since", "expiresAt": long_ago})
        assert sorted(doc["_id"] for doc in sessions.find()) == ["epoch", "expired since"]
