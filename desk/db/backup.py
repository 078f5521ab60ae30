"""`desk backup PATH` and `desk restore PATH`: the embedded database's SQLite file, copied consistently.

nx-27017 keeps the desk's database in one SQLite file, DESK_DATA_DIR/mongo/<MONGODB_DB>.db, in WAL
mode. A file copy of it while the desk runs can catch a half-written page or miss the WAL; SQLite's
online backup API copies every page inside one read transaction, so the copy is the database as of
one moment, while the desk keeps writing. Restore replaces that file, so it refuses while the
embedded server (the pid in its pid file) is alive, and holds the pid file itself meanwhile so a desk
started during the restore refuses to open the files (nx-27017 will not start beside a live pid).
"""

import os
import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path

from desk.config import Settings
from desk.db.embedded import PID_NAME

RESTORED = "restored"  # beside the database files: the next start recounts (see `restored`)
ON_MONGODB = "MONGODB_URI is set: back up and restore that MongoDB with mongodump and mongorestore (docs/operations.md)"


class BackupRefused(Exception):
    """The backup or restore cannot run; the message is one line for the operator."""


def database_file(settings: Settings) -> Path:
    """The SQLite file that holds the desk's database on the embedded server."""
    return settings.desk_data_dir.resolve() / "mongo" / f"{settings.mongodb_db}.db"


def backup(*, settings: Settings, target: Path) -> str:
    """Copy the embedded database to `target` (a new file), consistent even while the desk writes."""
    source = _embedded_file(settings)
    if not source.exists():
        raise BackupRefused(f"no embedded database at {source}: nothing to back up")
    target = target.resolve()
    if target.exists():
        raise BackupRefused(f"{target} exists: back up to a new file")
    if not target.parent.is_dir():
        raise BackupRefused(f"{target.parent} is not a directory")
    partial = target.with_name(f".{target.name}.partial")
    try:
        with closing(sqlite3.connect(source)) as live, closing(sqlite3.connect(partial)) as copy:
            live.backup(copy)  # every page in one step: one read transaction, one moment of the database
            # one self-contained file: no WAL beside it to lose when the backup is moved
            copy.execute("PRAGMA journal_mode=DELETE")
            _check(copy, partial)
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
    return f"Backed up the desk's database ({_size(target)}) to {target}."


def restore(*, settings: Settings, source: Path) -> str:
    """Replace the embedded database with the backup at `source`; refuses while the desk runs."""
    target = _embedded_file(settings)
    source = source.resolve()
    if not source.is_file():
        raise BackupRefused(f"no backup at {source}")
    target.parent.mkdir(parents=True, exist_ok=True)
    with _server_held_off(target.parent):
        partial = target.with_name(f".{target.name}.partial")
        try:
            with closing(sqlite3.connect(f"{source.as_uri()}?mode=ro", uri=True)) as saved:
                _check(saved, source)
                with closing(sqlite3.connect(partial)) as copy:
                    saved.backup(copy)
            for stale in (Path(f"{target}-wal"), Path(f"{target}-shm")):  # the old database's, not the backup's
                stale.unlink(missing_ok=True)
            os.replace(partial, target)
            (target.parent / RESTORED).touch()
        finally:
            partial.unlink(missing_ok=True)
    return f"Restored the desk's database from {source} ({_size(target)}) into {target}."


def restored(settings: Settings) -> bool:
    """Whether the embedded database was restored since the desk last counted its orders.

    A backup is the database as of one moment, which can fall between the separate writes of one
    change (an order, then its counters): the first start after a restore recounts, as after a crash.
    """
    return settings.mongodb_uri is None and (database_file(settings).parent / RESTORED).exists()


def recounted(settings: Settings) -> None:
    """The restored database has been recounted: later starts need not."""
    (database_file(settings).parent / RESTORED).unlink(missing_ok=True)


def embedded_pid(settings: Settings) -> int | None:
    """The pid of the embedded server running on this desk's files, None when it is not running (or not used)."""
    if settings.mongodb_uri is not None:
        return None
    return _live_pid(settings.desk_data_dir.resolve() / "mongo" / PID_NAME)


def _embedded_file(settings: Settings) -> Path:
    if settings.mongodb_uri is not None:
        raise BackupRefused(ON_MONGODB)
    return database_file(settings)


def _check(conn: sqlite3.Connection, path: Path) -> None:
    try:
        verdict = conn.execute("PRAGMA quick_check").fetchone()[0]
    except sqlite3.DatabaseError as error:
        raise BackupRefused(f"{path} is not a desk backup: {error}") from None
    if verdict != "ok":
        raise BackupRefused(f"{path} is damaged: {verdict}")


@contextmanager
def _server_held_off(mongo_dir: Path) -> Iterator[None]:
    """Refuse if the embedded server runs; else hold its pid file with this process's pid for the block."""
    pid_file = mongo_dir / PID_NAME
    if (pid := _live_pid(pid_file)) is not None:
        raise BackupRefused(f"the desk is running (embedded database pid {pid}): stop it, then restore")
    pid_file.unlink(missing_ok=True)  # left by a server that was killed
    try:
        fd = os.open(pid_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        raise BackupRefused("the desk is starting: stop it, then restore") from None
    with os.fdopen(fd, "w") as file:
        file.write(str(os.getpid()))
    try:
        yield
    finally:
        pid_file.unlink(missing_ok=True)


def _live_pid(pid_file: Path) -> int | None:
    try:
        pid = int(pid_file.read_text().strip())
    except (OSError, ValueError):
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        return pid  # alive, someone else's
    return pid


def _size(path: Path) -> str:
    return f"{path.stat().st_size / 1_000_000:.1f} MB"
