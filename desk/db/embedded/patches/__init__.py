"""neosqlite's bugs, fixed in the server child before nx-27017 serves: one module per patch.

Two of them are costs rather than bugs, paid on every command (table_names, document_copies).

Each module says what goes wrong without it and which tests pin it (tests/db/test_conformance.py
over the wire, tests/db/test_embedded_engine.py for the work SQLite does). They replace neosqlite
internals, hence the exact nx-27017 pin in pyproject.toml. Application code never bends its
queries around the engine.
"""

from collections.abc import Callable
from typing import Any

TTL_MONITOR_SECONDS = 60  # how often MongoDB's TTL monitor deletes expired documents; ttl.py keeps its beat


def until_schema_changes(holder: Any, name: str, sqlite: Any, read: Callable[[], Any]) -> Any:
    """`read()`, kept on `holder` as `name` until SQLite's schema version moves (any connection's change).

    `PRAGMA schema_version` reads the file's header (about 5 µs). Kept in `vars(holder)`: neosqlite's
    connection and collection answer any unknown attribute with a collection.
    """
    version = sqlite.execute("PRAGMA schema_version").fetchone()[0]
    kept = vars(holder).get(name)
    if kept is None or kept[0] != version:
        kept = vars(holder)[name] = (version, read())
    return kept[1]


_patched = False  # kept module-level: the patches change neosqlite's classes, the process's, not a Desk's


def patch_engine() -> None:  # pragma: no cover - runs in the child (and in tests that read query plans)
    """Apply every patch below to neosqlite in this process, once."""
    global _patched  # noqa: PLW0603 - the patches change classes, so once per process
    if _patched:
        return
    _patched = True
    # Each patch module imports neosqlite, which only the server child (and the engine tests) load.
    from desk.db.embedded.patches import (  # noqa: PLC0415 - neosqlite loads only where the engine runs
        aggregation,
        compound_id_index,
        document_copies,
        null_equality,
        object_id_refs,
        projection,
        python_updates,
        scalar_equality,
        sql_filters,
        table_names,
        ttl,
    )

    # Keep the order: later patches wrap what earlier ones replaced (sql_filters wraps the WHERE
    # builder scalar_equality wrapped).
    python_updates.apply()
    compound_id_index.apply()
    scalar_equality.apply()
    object_id_refs.apply()
    sql_filters.apply()
    aggregation.apply()
    ttl.apply()
    projection.apply()
    table_names.apply()
    document_copies.apply()
    null_equality.apply()
