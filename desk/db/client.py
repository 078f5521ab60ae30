"""The process's one MongoDB client and database handle."""

from pymongo import AsyncMongoClient
from pymongo.asynchronous.collection import AsyncCollection
from pymongo.asynchronous.database import AsyncDatabase

from desk import state


class Database(AsyncDatabase):
    """pymongo's database handle, keeping the handle of each collection it gave out.

    pymongo builds a new `AsyncCollection` for every `db[name]` (6 µs in a loop, three times that in a
    running desk), and every repository call asks for one: five of them stand before a copilot turn's
    first token. A handle holds no state of its own beyond its options, so one per name serves all.
    """

    def __init__(self, client: AsyncMongoClient, name: str) -> None:
        super().__init__(client, name)
        self._handles: dict[str, AsyncCollection] = {}

    def __getitem__(self, name: str) -> AsyncCollection:
        try:
            return self._handles[name]
        except KeyError:
            return self._handles.setdefault(name, super().__getitem__(name))


def connect(uri: str, name: str) -> AsyncDatabase:
    """A database handle on a new client; datetimes come back timezone-aware (UTC)."""
    client: AsyncMongoClient = AsyncMongoClient(uri, tz_aware=True, serverSelectionTimeoutMS=5000, appname="desk")
    return Database(client, name)


def use_database(database: AsyncDatabase | None) -> None:
    """Make `database` the one the UI and the API use: the process `Desk`'s (set at start-up, and by tests)."""
    if database is not None:
        state.current().db = database
    elif (desk := state.peek()) is not None:
        desk.db = None


def get_db() -> AsyncDatabase:
    """The database set by `use_database`."""
    database = state.current().db
    if database is None:
        raise RuntimeError("the database is not connected yet")
    return database


async def ping(database: AsyncDatabase) -> bool:
    """True when the server answers."""
    try:
        await database.command("ping")
    except Exception:  # any failure means "not ready"
        return False
    return True
