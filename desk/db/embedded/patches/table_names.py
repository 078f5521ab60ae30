"""The list of collections is read from SQLite's schema only when the schema has changed.

nx-27017 asks neosqlite for every collection's name before each insert and each find (does the
table exist?), and neosqlite answers by reading every table's name from sqlite_master and filtering
them in Python: 40 µs on the desk's 24 collections, four times in each copilot turn. SQLite counts
every change to the schema (`PRAGMA schema_version`, a read of the file's header: 5 µs), so the
names are read again only when that count moved, whichever connection changed it.

Pinned by test_embedded_engine.py: test_the_collection_names_follow_every_change_to_the_schema;
test_conformance.py: test_a_dropped_collection_reads_empty_and_takes_writes_again (over the wire).
"""

from functools import partial

from neosqlite.connection import Connection

from desk.db.embedded.patches import until_schema_changes


def apply() -> None:  # pragma: no cover - runs in the child
    """`Connection.list_collection_names` answers from memory while the schema is unchanged."""
    read_names = Connection.list_collection_names

    def list_collection_names(self: Connection) -> list[str]:
        names = until_schema_changes(self, "_desk_collection_names", self.db, partial(read_names, self))
        return list(names)  # a copy: a caller may change its list

    Connection.list_collection_names = list_collection_names  # type: ignore[method-assign]
