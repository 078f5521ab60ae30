"""Filters on dates and on `_id` ObjectIds are answered in SQL, dates to the millisecond.

Without it, date comparisons go through SQLite's datetime(), which drops the fraction of a second
({"leaseUntil": {"$lt": now}} is off by up to a second either way); any ObjectId compared with
_id ({"_id": {"$lt": last}} for keyset pages, {"_id": {"$in": ids}} for a batch) is left to
Python, a full scan; and find() with a date (or $or/$and) in its filter selects every match and
sorts and limits in Python (0.7 s for a page of 25 out of 50,000).

Pinned by test_conformance.py: test_date_comparisons_keep_milliseconds; test_embedded_engine.py
(the work): test_a_page_of_a_date_range_reads_only_that_page,
test_comparing_id_with_an_object_id_seeks_instead_of_scanning.
"""

from datetime import datetime

from neosqlite.collection.cursor import Cursor
from neosqlite.collection.query_helper._sql_query_builder import SqlQueryBuilderMixin
from neosqlite.collection.sql_translator_unified import SQLOperatorTranslator
from neosqlite.objectid import ObjectId

_ID_COMPARISONS = {"$eq": "=", "$ne": "!=", "$lt": "<", "$lte": "<=", "$gt": ">", "$gte": ">="}


def apply() -> None:  # pragma: no cover - runs in the child
    """Compare `_id` ObjectIds and dates in SQL, and let find() sort and limit such filters in SQL."""
    translate = SQLOperatorTranslator.translate_operator

    def translate_operator(self, field_access: str, operator: str, value: object) -> tuple[str | None, list]:
        # The _id column holds an ObjectId as its 24 lower-case hex digits, which sort like the ObjectId.
        if field_access == "_id" and operator in _ID_COMPARISONS and isinstance(value, ObjectId):
            guard = "typeof(_id) = 'text' AND " if operator not in ("$eq", "$ne") else ""
            return f"({guard}_id {_ID_COMPARISONS[operator]} ?)", [str(value)]
        if (
            field_access == "_id"
            and operator in ("$in", "$nin")
            and value
            and all(isinstance(v, ObjectId) for v in value)
        ):
            marks = ", ".join("?" * len(value))
            return f"_id {'NOT IN' if operator == '$nin' else 'IN'} ({marks})", [str(v) for v in value]
        # strftime's %f keeps the milliseconds a BSON date has.
        sql, params = translate(self, field_access, operator, value)
        return (sql and sql.replace("datetime(", "strftime('%Y-%m-%d %H:%M:%f', ")), params

    SQLOperatorTranslator.translate_operator = translate_operator

    # The clause builder that count_documents and the updates use understands dates and $or/$and,
    # so find() can sort and limit in SQL.
    simple_where = SqlQueryBuilderMixin._build_simple_where_clause

    def build_simple_where_clause(self, query: dict) -> tuple[str, list, list] | None:
        if not _holds_date(query) and not {"$and", "$or", "$nor"} & set(query):
            return simple_where(self, query)
        where, params = self.collection.query_engine.sql_translator.translate_match(query)
        return None if where is None else (where, params, [])

    SqlQueryBuilderMixin._build_simple_where_clause = build_simple_where_clause
    Cursor._contains_datetime_operations = lambda self, query: False


def _holds_date(node: object) -> bool:  # pragma: no cover - runs in the child
    if isinstance(node, dict):
        return any(_holds_date(item) for item in node.values())
    if isinstance(node, list):
        return any(_holds_date(item) for item in node)
    return isinstance(node, datetime)
