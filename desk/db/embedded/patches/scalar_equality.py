"""An equality on a field that holds no array uses its index.

Without it, `{"f": v}`, which must also match documents whose f is an array holding v, carries
neosqlite's array test, which keeps SQLite off every index: a filter on the second key of
(term, ownerId, createdAt), or any count_documents, delete_many or update filter, walks every
candidate row. And find() leaves the test out when an index is merely *named* ..._f, so on an
indexed array field `{"terms": "leak"}` finds nothing.

A filter that names one `_id` is left as it is: SQLite finds that row by its `_id` column, the
array test then runs on one row, and the proofs (a seek per index key) would cost more than they
save (a find with the copilot's claim filter took 73 µs in-process with them, 58 µs without).

Pinned by test_embedded_engine.py: test_an_equality_on_the_second_key_of_an_index_narrows_the_search
(the work); test_conformance.py: test_find_on_an_array_field_with_a_multikey_index,
test_queries_on_object_id_references (indexed). test_equality_still_matches_arrays_on_every_key_of_an_index
pins that the array test stays where an array is, with and without an `_id` in the filter.
"""

from functools import partial

from bson import ObjectId as BsonObjectId
from neosqlite.collection.json_path_utils import parse_json_path
from neosqlite.collection.query_engine import QueryEngine
from neosqlite.collection.query_helper._sql_query_builder import SqlQueryBuilderMixin
from neosqlite.collection.sql_translator_unified import SQLTranslator
from neosqlite.objectid import ObjectId
from neosqlite.sql_utils import quote_table_name

from desk.db.embedded.patches import until_schema_changes
from desk.db.embedded.patches.object_id_refs import stored_object_id


def apply() -> None:  # pragma: no cover - runs in the child
    """Drop the array test exactly for the fields `_array_free` proves hold no array among the candidates."""
    # An {"$eq": v} compiles to a plain `f = ?` in both of neosqlite's filter builders.
    SqlQueryBuilderMixin._field_has_index = lambda self, field: False
    simple_where = SqlQueryBuilderMixin._build_simple_where_clause
    SqlQueryBuilderMixin._build_simple_where_clause = lambda self, query: simple_where(
        self, _with_scalar_equalities(self.collection, query)
    )

    # count_documents, delete_many and the updates build their WHERE through the collection's
    # translator, which does not know its collection.
    engine_init = QueryEngine.__init__

    def init(self, collection) -> None:
        engine_init(self, collection)
        self.sql_translator.desk_collection = collection

    QueryEngine.__init__ = init
    translate_match = SQLTranslator.translate_match

    def translate(self, match_spec, context: str = "direct"):
        collection = getattr(self, "desk_collection", None)
        if collection is not None and isinstance(match_spec, dict):
            match_spec = _with_scalar_equalities(collection, match_spec)
        return translate_match(self, match_spec, context)

    SQLTranslator.translate_match = translate


def _with_scalar_equalities(collection, query: dict) -> dict:  # pragma: no cover - runs in the child
    """The filter with each {f: v} that needs no array test written as {f: {"$eq": v}}."""
    if _stored_scalar(query.get("_id")) is not None:  # one row at most, found by its _id column: no index to free
        return query
    equal = {}
    for field, value in query.items():
        stored = _stored_scalar(value)
        # _id is a column, and neosqlite reads "id" as _id; dotted paths cross arrays of documents.
        if stored is not None and not field.startswith("$") and field not in ("_id", "id") and "." not in field:
            equal[field] = stored
    scalar = _array_free(collection, equal) if equal else set()
    return {field: {"$eq": value} if field in scalar else value for field, value in query.items()} if scalar else query


def _array_free(collection, equal: dict[str, object]) -> set[str]:  # pragma: no cover - runs in the child
    """The fields of `equal` that hold no array in any document matching the equalities before them in an index.

    For an index (k1, k2, ...) and a filter with k1 = v1 and k2 = v2: k1 is array-free when no
    document holds an array in k1; then k2 is, for this filter, when no document with k1 = v1 holds
    one in k2. Each answer is one seek on that index (arrays are stored as JSON text, starting
    with "["), however large the collection.
    """
    table = quote_table_name(collection.name)
    found: set[str] = set()
    for keys in _index_keys(collection):
        before: list[str] = []
        for key in keys:
            if key not in equal:
                break
            value = f"json_extract(data, '{parse_json_path(key)}')"
            if key not in found:
                where = [f"json_extract(data, '{parse_json_path(k)}') = ?" for k in before]
                where.append(f"{value} >= ? AND {value} < ?")
                probe = f"SELECT 1 FROM {table} WHERE {' AND '.join(where)} LIMIT 1"  # noqa: S608 - names, not input
                if collection.db.execute(probe, [*(equal[k] for k in before), "[", "\\"]).fetchone():
                    break
                found.add(key)
            before.append(key)
    return found


def _index_keys(collection) -> list[list[str]]:  # pragma: no cover - runs in the child
    """The key fields of each index, read again only when the schema changed."""
    keys = partial(collection.list_indexes, as_keys=True)
    return until_schema_changes(collection, "_desk_index_keys", collection.db, keys)


def _stored_scalar(value: object) -> object:  # pragma: no cover - runs in the child
    """How a scalar filter value is stored (None for values the array test is not about)."""
    if isinstance(value, ObjectId | BsonObjectId):
        return stored_object_id(value)
    if isinstance(value, str | int | float):  # bools too: stored and bound as 1/0
        return value
    return None
