"""The process's one MongoDB client and database handle."""

from pymongo import AsyncMongoClient
from pymongo.asynchronous.database import AsyncDatabase

_database: AsyncDatabase | None = None


def connect(uri: str, name: str) -> AsyncDatabase:
    """A database handle on a new client; datetimes come back timezone-aware (UTC)."""
    client: AsyncMongoClient = AsyncMongoClient(uri, tz_aware=True, serverSelectionTimeoutMS=5000, appname="desk")
    return client[name]


def use_database(database: AsyncDatabase | None) -> None:
    """Make `database` the one the UI and the API use (set at start-up, and by tests)."""
    global _database  # noqa: PLW0603 - one handle per process, set once at start-up
    _database = database


def get_db() -> AsyncDatabase:
    """The database set by `use_database`."""
    if _database is None:
        raise RuntimeError("the database is not connected yet")
    return _database


async def ping(database: AsyncDatabase) -> bool:
    """True when the server answers."""
    try:
        await database.command("ping")
    except Exception:  # any failure means "not ready"
        return False
    return True
