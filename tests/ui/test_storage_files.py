"""Issue 16.7: NiceGUI's storage files under DESK_DATA_DIR/nicegui hold no session and are the desk's alone."""

import hashlib
import json
import os
import stat
from collections.abc import Iterator

import pytest
from nicegui import app
from nicegui.persistence.file_persistent_dict import FilePersistentDict
from nicegui.storage import Storage
from nicegui.testing import User

import main
from desk.config import Settings


def mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def desk_storage(tmp_path) -> Iterator[Settings]:
    """Settings with their own DESK_DATA_DIR; the process's umask and NiceGUI's storage put back afterwards."""
    umask, path, storage = os.umask(0o022), Storage.path, app.storage
    os.umask(umask)
    yield Settings(desk_data_dir=tmp_path / "data")
    os.umask(umask)
    Storage.path, app.storage = path, storage


def test_storage_files_and_their_directory_are_readable_by_the_desk_alone(desk_storage: Settings):
    old = desk_storage.desk_data_dir / "nicegui"
    old.mkdir(parents=True)
    old.chmod(0o755)
    (old / "storage-user-left-by-an-older-desk.json").write_text("{}")
    (old / "storage-user-left-by-an-older-desk.json").chmod(0o644)

    main._private_storage(desk_storage)
    written = FilePersistentDict(Storage.path / "storage-user-new.json", encoding="utf-8")
    written["theme"] = "dark"  # NiceGUI writes the file on change

    assert Storage.path == old.resolve()
    assert mode(old) == 0o700
    assert {p.name: mode(p) for p in old.glob("storage-*")} == {
        "storage-user-left-by-an-older-desk.json": 0o600,
        "storage-user-new.json": 0o600,
    }


async def test_no_storage_file_holds_a_session(user: User, make_user, log_in, db):
    sam = await make_user("user")
    await log_in(user, sam)
    await user.open("/app/profile")
    await user.should_see(marker="profile-name")

    sessions = {doc["_id"] async for doc in db["sessions"].find({}, {"_id": 1})}
    stored = [path for path in Storage.path.glob("storage-*.json")] if Storage.path.exists() else []
    held = {text for path in stored for text in _strings(json.loads(path.read_text()))}

    assert sessions  # Sam is logged in
    assert not {hashlib.sha256(text.encode()).hexdigest() for text in held} & sessions


def _strings(value: object) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
