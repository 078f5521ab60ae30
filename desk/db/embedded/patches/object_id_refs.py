"""Filters on an ObjectId held in a field other than `_id` (a reference like ownerId) match.

Without it, `{"ownerId": oid}` finds nothing and `{"ownerId": {"$ne": oid}}` finds everything:
such an ObjectId is stored as {"__neosqlite_objectid__": true, "id": hex}, but every filter first
turns it into the bare hex string, which SQL then compares with that JSON.

Pinned by test_conformance.py: test_queries_on_object_id_references,
test_equality_still_matches_arrays_on_every_key_of_an_index, test_capped_counts;
test_embedded_engine.py: test_an_equality_on_the_second_key_of_an_index_narrows_the_search,
test_a_capped_count_stops_at_the_cap.
"""

from collections.abc import Callable
from typing import Any

from bson import ObjectId as BsonObjectId
from neosqlite.collection import query_helper
from neosqlite.collection.query_helper import _sql_query_builder
from neosqlite.collection.sql_translator_unified import SQLClauseBuilder
from neosqlite.objectid import ObjectId


def apply() -> None:  # pragma: no cover - runs in the child
    """Filters keep such ObjectIds; only the two SQL filter builders turn them into the stored JSON text."""

    # Python matching compares kept ObjectIds right; the stored JSON text is what json_extract
    # returns (an index serves it too). $in/$nin walk the field with json_each, which steps into a
    # lone stored ObjectId: there the bare hex matches, inside an array the JSON text does, so
    # they get both.
    class Kept:
        def __init__(self, oid: object) -> None:
            self.oid = oid

    refs = (ObjectId, BsonObjectId, Kept)

    def replace(value: object, change: Callable[[Any, str], list], field: str | None = None, key: str = "") -> Any:
        """The filter with each ObjectId compared with a field (not _id) replaced by change(oid, operator)."""
        if isinstance(value, list):
            return [new for item in value for new in replacements(item, change, field, key)]
        return replacements(value, change, field, key)[0]

    def replacements(value: object, change: Callable[[Any, str], list], field: str | None, key: str) -> list:
        if isinstance(value, dict):
            return [{k: replace(v, change, field if k.startswith("$") else k, k) for k, v in value.items()}]
        if isinstance(value, refs) and field not in (None, "_id", "id"):
            return change(value, key)
        return [value]

    def stored(oid: object, operator: str) -> list:
        text = stored_object_id(oid)
        return [text, str(oid)] if operator in ("$in", "$nin") else [text]

    normalize = query_helper.normalize_id_query_for_db
    query_helper.normalize_id_query_for_db = lambda query: replace(
        normalize(replace(query, lambda oid, _: [Kept(oid)])), lambda kept, _: [kept.oid]
    )
    _sql_query_builder.normalize_id_query_for_db = lambda query: normalize(replace(query, stored))
    build_where_clause = SQLClauseBuilder.build_where_clause
    SQLClauseBuilder.build_where_clause = lambda self, query, *args, **kwargs: build_where_clause(
        self, replace(query, stored), *args, **kwargs
    )


def stored_object_id(oid: object) -> str:
    """An ObjectId in a field other than _id, as neosqlite stores it and json_extract returns it."""
    return f'{{"__neosqlite_objectid__":true,"id":"{oid}"}}'
