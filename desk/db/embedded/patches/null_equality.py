"""An equality with null matches a stored null in the filters neosqlite answers in Python, as it does in SQL.

Without it, `{"ownerId": None}` inside an `$and` or `$or` beside an operator neosqlite cannot put
into SQL (an `$in`) matched only documents without the field: its walk to a field's values drops a
null it finds. A person's list filtered by two statuses (`status=pending&status=in_progress`) then
left out the whole shared queue (`ownerId` null), while its total, read from the counters, counted it.

Pinned by test_conformance.py: test_equality_with_null_matches_a_stored_null_in_every_filter.
"""

from typing import Any

from neosqlite.collection.query_helper import query_builder


def apply() -> None:  # pragma: no cover - runs in the child
    leaf_values = query_builder._iter_leaf_values

    def with_nulls(document: dict[str, Any], parts: list[str]) -> Any | None:
        found = leaf_values(document, parts)
        return [None] if found == [] and _stored_null(document, parts) else found

    query_builder._iter_leaf_values = with_nulls


def _stored_null(document: Any, parts: list[str]) -> bool:  # pragma: no cover - runs in the child
    """The path leads through documents (no array) to a field that holds null."""
    for part in parts:
        if not isinstance(document, dict) or part not in document:
            return False
        document = document[part]
    return document is None
