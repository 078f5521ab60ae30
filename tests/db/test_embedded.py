"""The embedded MongoDB launcher: start, restart, stop, failing readably, and reachable by the desk alone."""

import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
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


def test_the_server_listens_on_no_tcp_port_only_on_its_private_socket(tmp_path: Path) -> None:
    server = EmbeddedMongo(tmp_path / "mongo")
    with server as uri, MongoClient(uri) as client:
        client.desk_private.users.insert_one({"email": "a@example.com"})
        assert server.pid is not None and server.socket_path is not None
        listening = _listening_sockets(server.pid)
        mongo_dir, sock = (tmp_path / "mongo").stat(), server.socket_path.stat()

    assert listening == {"unix": [str(tmp_path / "mongo" / "nx-27017.sock")], "tcp": []}
    assert uri == "mongodb://" + str(tmp_path / "mongo" / "nx-27017.sock").replace("/", "%2F") + "/"
    assert stat.S_IMODE(mongo_dir.st_mode) == 0o700 and stat.S_IMODE(sock.st_mode) == 0o600
    assert not (tmp_path / "mongo" / "nx-27017.sock").exists()  # removed as the server stops


def test_another_user_of_the_machine_cannot_reach_the_socket(tmp_path: Path) -> None:
    assert os.getuid() == 0, "becoming another user takes root (the suite runs as root: .ci/run)"
    # An open parent (as /tmp is), so that the data directory's own mode is the only fence in the way.
    shared = Path(tempfile.mkdtemp(prefix="desk-shared-"))
    shared.chmod(0o755)
    try:
        with EmbeddedMongo(shared / "mongo") as server_uri, MongoClient(server_uri) as client:
            client.admin.command("ping")
            sock = shared / "mongo" / "nx-27017.sock"
            refused = _connect_as_nobody(sock)
            (shared / "mongo").chmod(0o755)  # the control: with the modes opened, the same stranger gets in
            sock.chmod(0o666)
            let_in = _connect_as_nobody(sock)
    finally:
        shutil.rmtree(shared)

    assert refused == "PermissionError"
    assert let_in == "connected"


def test_a_data_dir_too_deep_for_a_socket_path_serves_on_a_private_one_elsewhere(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 100) / "mongo"
    server = EmbeddedMongo(deep)
    with server as uri, MongoClient(uri) as client:
        client.desk_deep.orders.insert_one({"_id": "wo-1"})
        sock = server.socket_path
        assert sock is not None and len(os.fsencode(sock)) <= 107
        assert stat.S_IMODE(sock.parent.stat().st_mode) == 0o700 and sock.parent.stat().st_uid == os.getuid()
        assert stat.S_IMODE(sock.stat().st_mode) == 0o600
    assert (deep / "desk_deep.db").is_file()  # the files stay in the data directory
    assert not sock.parent.exists()  # the spare directory goes with the server


def test_a_socket_path_too_long_anywhere_fails_in_one_readable_line(tmp_path: Path, monkeypatch) -> None:
    deep_tmp = tmp_path / ("t" * 120)
    deep_tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(deep_tmp))

    with pytest.raises(EmbeddedMongoError) as failed:
        EmbeddedMongo(tmp_path / ("d" * 100) / "mongo").start()

    (line,) = str(failed.value).splitlines()
    assert "longer than 107 bytes" in line and "use a shorter DESK_DATA_DIR" in line
    assert list(deep_tmp.iterdir()) == []  # no spare directory left behind


def _listening_sockets(pid: int) -> dict[str, list[str]]:
    """The sockets process `pid` listens on: Unix socket paths, and TCP ports (IPv4 and IPv6) in hex."""
    inodes = {
        target[len("socket:[") : -1]
        for fd in Path(f"/proc/{pid}/fd").iterdir()
        if (target := os.readlink(fd)).startswith("socket:[")
    }
    tcp = []
    for table in ("tcp", "tcp6"):
        for row in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = row.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                tcp.append(f"{table} {fields[1]}")
    unix = []
    for row in Path(f"/proc/{pid}/net/unix").read_text().splitlines()[1:]:
        fields = row.split()
        if fields[6] in inodes and len(fields) > 7 and fields[5] == "01":  # 01: listening
            unix.append(fields[7])
    return {"unix": unix, "tcp": tcp}


def _connect_as_nobody(sock: Path) -> str:
    """What a process of the user `nobody` gets when it connects to `sock`."""
    probe = (
        "import socket, sys\n"
        "s = socket.socket(socket.AF_UNIX)\n"
        "try:\n"
        "    s.connect(sys.argv[1])\n"
        "except OSError as error:\n"
        "    print(type(error).__name__)\n"
        "else:\n"
        "    print('connected')\n"
    )
    done = subprocess.run(  # noqa: S603 - the system's interpreter, as another user
        ["/usr/bin/python3", "-c", probe, str(sock)], user=65534, capture_output=True, text=True, timeout=30, check=True
    )
    return done.stdout.strip()
