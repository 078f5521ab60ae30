"""The one way a desk process reaches its database: MONGODB_URI, or the embedded server under DESK_DATA_DIR.

`database_server` names the server (starting the embedded one for the block when no MONGODB_URI is
set); `open_database` opens a client on it for the block. The web process starts the server before
NiceGUI's event loop runs and opens its client in that loop; the worker and the `desk` commands
open both in one step.
"""

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager

from pymongo.asynchronous.database import AsyncDatabase

from desk.config import Settings
from desk.db.client import connect
from desk.db.embedded import EmbeddedMongo, EmbeddedMongoError


class DatabaseUnavailable(Exception):
    """The embedded server could not start; the message is one line for the person who started the desk."""


@contextmanager
def database_server(settings: Settings) -> Iterator[str]:
    """The URI of the desk's MongoDB for the block: MONGODB_URI, else the embedded server, stopped at the end."""
    if settings.mongodb_uri is not None:
        yield settings.mongodb_uri.get_secret_value()
        return
    embedded = EmbeddedMongo(settings.desk_data_dir / "mongo")
    try:
        uri = embedded.start()
    except EmbeddedMongoError as error:
        raise DatabaseUnavailable(str(error)) from None
    try:
        yield uri
    finally:
        embedded.stop()


@asynccontextmanager
async def open_database(settings: Settings, uri: str | None = None) -> AsyncIterator[AsyncDatabase]:
    """A client on `uri` (else on `database_server(settings)`, started for the block), closed on exit."""
    if uri is None:
        server = database_server(settings)
        uri = await asyncio.to_thread(server.__enter__)
    else:
        server = None
    db = connect(uri, settings.mongodb_db)
    try:
        yield db
    finally:
        await db.client.close()
        if server is not None:
            await asyncio.to_thread(server.__exit__, None, None, None)
