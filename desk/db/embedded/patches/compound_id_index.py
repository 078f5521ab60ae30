"""A compound index naming `_id` is built on the path "$._id".

Without it, an index like (createdAt, _id), the desk's keyset pagination, is built on the JSON
path "_id" (not "$._id"), which SQLite then rejects on every later insert. _id is also kept in the
document's JSON, so "$._id" indexes the same value.

Pinned by test_conformance.py: test_keyset_pages_on_a_compound_index_with_id,
test_strings_sort_by_code_point_on_a_compound_index.
"""

from neosqlite.collection import index_manager


def apply() -> None:  # pragma: no cover - runs in the child
    """Index `_id` inside a compound index at "$._id"."""
    json_path = index_manager.parse_json_path
    index_manager.parse_json_path = lambda field: "$._id" if field == "_id" else json_path(field)
