"""TTL indexes purge like MongoDB's monitor: at most once a minute per collection, by a seek on the index.

Without it, neosqlite deletes expired documents before every find, count and aggregate on a
collection with a TTL index, comparing dates through strftime(), which no index serves: two
scans per read (217 ms for each poll of a 100,000-entry change feed); it also deletes numbers,
as seconds since the epoch, where MongoDB expires only dates.

Pinned by test_embedded_engine.py: test_the_ttl_purge_searches_its_index_and_runs_once_a_minute;
test_embedded.py: test_expired_documents_go_on_a_read_at_most_once_a_minute.
"""

import logging
import time
from datetime import UTC, datetime, timedelta

from neosqlite._sqlite import sqlite3
from neosqlite.collection import Collection
from neosqlite.collection.json_path_utils import parse_json_path
from neosqlite.sql_utils import quote_table_name

from desk.db.embedded.patches import TTL_MONITOR_SECONDS

TTL_BATCH = 1000  # expired documents deleted per purge; a longer backlog goes on the next read
_DATE_TEXT = '{"$date":"'  # how json_extract (and so an index) returns a stored date, before its ISO text


def apply() -> None:  # pragma: no cover - runs in the child
    """A read purges at most once a minute per collection, as a range on the TTL index itself."""
    # MongoDB's monitor purges once a minute, so expired documents may linger that long there too.
    Collection._auto_purge_ttl = _auto_purge
    Collection.purge_expired = _purge_expired


def _auto_purge(self) -> None:  # pragma: no cover - runs in the child
    if time.monotonic() < self.__dict__.get("_desk_ttl_due", 0.0):
        return
    try:
        deleted = _purge_expired(self) if self._ttl_specs_cached() else 0
    except sqlite3.Error as exc:  # as in MongoDB, a failed purge must not fail the read
        logging.getLogger(__name__).warning("TTL purge of %s failed: %s", self.name, exc)
        deleted = 0
    self._desk_ttl_due = time.monotonic() + (0 if deleted >= TTL_BATCH else TTL_MONITOR_SECONDS)


def _purge_expired(self, now: datetime | None = None) -> int:  # pragma: no cover - runs in the child
    """Delete up to TTL_BATCH documents per TTL index whose date is older than its expiry."""
    moment = now or datetime.now(UTC)
    moment = moment.astimezone(UTC).replace(tzinfo=None) if moment.tzinfo else moment  # stored: naive UTC
    table = quote_table_name(self.name)
    deleted = 0
    for spec in self._ttl_specs_cached():
        # A stored date is {"$date":"<naive UTC ISO>"} text, which sorts by date; like MongoDB,
        # only dates expire (neosqlite also deleted numbers, as seconds since the epoch).
        value = f"json_extract(data, '{parse_json_path(spec['field'])}')"
        cutoff = moment - timedelta(seconds=int(spec["expireAfterSeconds"]))
        expired = f"SELECT id FROM {table} WHERE {value} > ? AND {value} < ? LIMIT ?"  # noqa: S608 - names
        bounds = (_DATE_TEXT, _DATE_TEXT + cutoff.isoformat(timespec="microseconds"), TTL_BATCH)
        deleted += self.db.execute(f"DELETE FROM {table} WHERE id IN ({expired})", bounds).rowcount  # noqa: S608
    return deleted
