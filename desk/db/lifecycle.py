"""Opening the database a process uses: MONGODB_URI, or the embedded server under DESK_DATA_DIR."""

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from pymongo.asynchronous.database import AsyncDatabase

from desk.config import Settings
from desk.db.client import connect
from desk.db.embedded import EmbeddedMongo


@asynccontextmanager
async def open_database(settings: Settings) -> AsyncIterator[AsyncDatabase]:
    """Connect (starting the embedded server first when no MONGODB_URI is set); close and stop on exit."""
    embedded = None
    if settings.mongodb_uri is not None:
        uri = settings.mongodb_uri.get_secret_value()
    else:
        embedded = EmbeddedMongo(settings.desk_data_dir / "mongo")
        uri = await asyncio.to_thread(embedded.start)
    db = connect(uri, settings.mongodb_db)
    try:
        yield db
    finally:
        await db.client.close()
        if embedded is not None:
            await asyncio.to_thread(embedded.stop)
