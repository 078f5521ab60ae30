"""Aggregations routed to where neosqlite answers them right, and the two the desk runs most done in SQL.

Without it, neosqlite's SQL tiers answer a `$match` on a datetime with nothing (or a `$count` of 0),
return `$max`/`$min` of dates as strings, group by dates wrongly and `$project` bools as 1/0 and
_id as a string; pipelines nx passes on never match stored ObjectIds; pymongo's count_documents
(a `$group` by a constant) reads every document, whatever its `$limit`; and `$lookup` reads the whole
foreign collection for every joined document.

Pinned by test_conformance.py: test_aggregation_over_dates, test_queries_on_object_id_references
(the per-owner `$group`), test_keyset_pages_on_a_compound_index_with_id and
test_equality_still_matches_arrays_on_every_key_of_an_index (their counts), test_capped_counts,
test_lookup_by_id; test_embedded_engine.py (the work): test_a_capped_count_stops_at_the_cap,
test_a_join_by_id_reads_only_the_joined_document.
"""

from datetime import datetime

from neosqlite.collection.aggregation_cursor import AggregationCursor
from neosqlite.collection.json_helpers import neosqlite_json_loads
from neosqlite.collection.query_engine import QueryEngine
from neosqlite.collection.query_engine.python_aggregation_engine import execute_python_aggregation
from neosqlite.sql_utils import quote_table_name
from nx_27017.utils import convert_bson_to_neo_objectids

_COUNT_STAGE = {"$group": {"_id": 1, "n": {"$sum": 1}}}  # how pymongo's count_documents ends its pipeline
# Pipelines built only from these (and no datetime values) come out right from neosqlite's SQL
# aggregation tiers; the conformance suite pins them.
_PLAIN_AGGREGATION = frozenset(
    {"$match", "$group", "$sort", "$limit", "$skip", "$count", "$sum", "$avg"}
    | {"$and", "$or", "$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin", "$exists"}
)


def apply() -> None:  # pragma: no cover - runs in the child
    """Route each aggregation to the engine (or the single query) that answers it right and cheaply."""
    # Before every aggregate, neosqlite counts the whole collection (an index walk: tens of ms over
    # a million postings) to choose between memory and spilling to quez, which is not installed.
    AggregationCursor._estimate_result_size = lambda self: 0
    sql_tiers = QueryEngine.aggregate_with_constraints

    def aggregate(self, pipeline, batch_size=101, memory_constrained=False, session=None):
        # nx passes pipelines on with pymongo's ObjectIds, which never equal the stored ones.
        pipeline = convert_bson_to_neo_objectids(pipeline)
        # pymongo's count_documents: no SQL tier groups by a constant, so the Python engine would
        # read every document (the SQL tiers took 120 s over a $limit at 100,000 orders); one SQL
        # COUNT over the filter, capped by a LIMIT subquery, reads no more index entries than that.
        if (counting := _count_documents_shape(pipeline)) is not None:
            n = _count(self, *counting, session=session)
            return [{"_id": 1, "n": n}] if n else []
        # The Python engine's $lookup reads the whole foreign collection for every join.
        if (joining := _lookup_by_id_shape(pipeline)) is not None:
            return _join_by_id(self, *joining, session=session)
        # The SQL tiers answer a $match on a datetime with nothing (or a $count of 0), return
        # $max/$min of dates as strings, group by dates wrongly and $project bools as 1/0 and _id
        # as a string. The Python engine gets these right but reads the whole collection, so
        # plain pipelines stay on the SQL tiers; the ObjectIds and dates they group by come back
        # as their stored JSON text, which is decoded.
        if _is_plain(pipeline):
            return [decoded(doc) for doc in sql_tiers(self, pipeline, batch_size, memory_constrained, session)]
        return execute_python_aggregation(self, pipeline, session)

    def decoded(value: object) -> object:
        if isinstance(value, dict):
            return {key: decoded(item) for key, item in value.items()}
        if isinstance(value, str) and value.startswith(('{"__neosqlite_objectid__"', '{"$date"')):
            return neosqlite_json_loads(value)
        return value

    QueryEngine.aggregate_with_constraints = aggregate


def _count_documents_shape(pipeline: list) -> tuple[dict, int, int | None] | None:  # pragma: no cover - child
    """(filter, skip, limit) of pymongo's count_documents pipeline: $match, [$skip], [$limit], $group."""
    if len(pipeline) < 2 or pipeline[-1] != _COUNT_STAGE or list(pipeline[0]) != ["$match"]:
        return None
    middle = pipeline[1:-1]
    if [list(stage) for stage in middle] not in ([], [["$skip"]], [["$limit"]], [["$skip"], ["$limit"]]):
        return None
    options = {op: value for stage in middle for op, value in stage.items()}
    skip, limit = options.get("$skip", 0), options.get("$limit")
    if not isinstance(skip, int) or skip < 0 or not (limit is None or (isinstance(limit, int) and limit > 0)):
        return None
    return pipeline[0]["$match"], skip, limit


def _count(engine, query: dict, skip: int, limit: int | None, *, session=None) -> int:  # pragma: no cover - child
    if not skip and limit is None:
        return engine.count_documents(query, session=session)
    where, params = engine.sql_translator.translate_match(engine.helpers._normalize_id_query(query))
    if where is None:  # a filter only the Python engine understands
        return len(list(engine.collection.find(query, skip=skip, limit=limit or 0, session=session)))
    table = quote_table_name(engine.collection.name)
    capped = f"SELECT COUNT(*) FROM (SELECT 1 FROM {table} {where} LIMIT ? OFFSET ?)"  # noqa: S608 - names, not input
    return engine.collection.db.execute(capped, [*params, -1 if limit is None else limit, skip]).fetchone()[0]


def _lookup_by_id_shape(pipeline: list) -> tuple[dict, int, dict] | None:  # pragma: no cover - runs in the child
    """(filter, limit, $lookup) of a join by primary key: $match, [$limit], $lookup on the foreign _id."""
    if len(pipeline) not in (2, 3) or list(pipeline[0]) != ["$match"] or list(pipeline[-1]) != ["$lookup"]:
        return None
    middle = pipeline[1:-1]
    if [list(stage) for stage in middle] not in ([], [["$limit"]]):
        return None
    limit = middle[0]["$limit"] if middle else 0  # 0: no limit
    if not isinstance(limit, int) or limit < (1 if middle else 0):
        return None
    spec = pipeline[-1]["$lookup"]
    if not isinstance(spec, dict) or set(spec) != {"from", "localField", "foreignField", "as"}:
        return None
    if spec["foreignField"] != "_id" or not all(isinstance(spec[k], str) and "." not in spec[k] for k in spec):
        return None
    return pipeline[0]["$match"], limit, spec


def _join_by_id(engine, query: dict, limit: int, spec: dict, *, session=None) -> list[dict]:  # pragma: no cover
    """The matching documents, each with its foreign documents under `as`, found by _id (MongoDB's $lookup)."""
    foreign = engine.collection._database[spec["from"]]
    joined = []
    for doc in engine.collection.find(query, limit=limit, session=session):
        local = doc.get(spec["localField"])
        if isinstance(local, list):
            found = list(foreign.find({"_id": {"$in": local}}, session=session)) if local else []
        else:  # a missing or null local value matches a null _id, which no stored document has
            found = [] if local is None else list(foreign.find({"_id": local}, session=session))
        joined.append({**doc, spec["as"]: found})
    return joined


def _is_plain(node: object) -> bool:  # pragma: no cover - runs in the child
    if isinstance(node, dict):
        return all((not key.startswith("$") or key in _PLAIN_AGGREGATION) and _is_plain(v) for key, v in node.items())
    if isinstance(node, list):
        return all(_is_plain(item) for item in node)
    return not isinstance(node, datetime)
