"""Updates through neosqlite's Python path, with dotted paths and `$currentDate` done right.

Without it, neosqlite's SQL update path (json_set) stores a datetime written by `$set`/`$max`/
`update_many`/`find_one_and_update`/`bulk_write` as a string and a bool as 1/0, `$push` of a dict
as a JSON string, and skips `$addToSet` on a missing field, so date sorts and ranges silently miss
documents. Its Python path gets those right, but applies `$inc`, `$unset`, `$push`, ... to "a.b"
as a top-level key named "a.b", and its `$currentDate` stores microseconds with an offset, so the
document is not found by the date it reads back.

Pinned by test_conformance.py: test_types_round_trip (its push, add_to_set, max, unset and
dotted_paths forms), test_sort_by_date_desc_with_limit_on_a_compound_index,
test_aggregation_over_dates, test_a_current_date_is_found_by_the_date_it_reads_back.
"""

from datetime import UTC, datetime

from neosqlite.collection.query_helper._sql_updates import SqlUpdatesMixin
from neosqlite.collection.query_helper.update_operations import UpdateOperationsMixin

from desk.db.embedded.patches.document_copies import copy_document

# Operators whose Python implementation in neosqlite only knows top-level field names.
_TOP_LEVEL_ONLY = frozenset(
    {"$inc", "$mul", "$min", "$max", "$push", "$addToSet", "$unset", "$pop", "$pullAll", "$setOnInsert"}
)
_NO_CREATE = frozenset({"$unset", "$pop", "$pullAll"})  # these never create missing parents


def apply() -> None:  # pragma: no cover - runs in the child
    """Every update through the Python path, which gets the types right, at no measurable cost (DESIGN §4)."""
    SqlUpdatesMixin._can_use_sql_updates = lambda *a, **k: False  # type: ignore[method-assign]

    # Dotted paths are applied to their parent sub-document, and $currentDate becomes a $set of
    # now at BSON (millisecond, naive UTC) precision, stored like any inserted date.
    python_update = UpdateOperationsMixin._perform_python_update

    def update_with_paths(self, doc_id, update_spec, original_doc, *args, **kwargs):
        # neosqlite's own update works on a deep copy: ours copies only when a dotted path changes it first
        doc = original_doc
        rest: dict[str, dict] = {}
        for op, fields in update_spec.items():
            if op == "$currentDate":
                now = datetime.now(UTC).replace(tzinfo=None)
                now = now.replace(microsecond=now.microsecond // 1000 * 1000)
                rest.setdefault("$set", {}).update(dict.fromkeys(fields, now))
                continue
            if op == "$setOnInsert" and doc_id != 0:  # doc_id 0 marks the document an upsert inserts
                continue
            for path, value in fields.items():
                if op in _TOP_LEVEL_ONLY and "." in path and "$" not in path:
                    if doc is original_doc:
                        doc = copy_document(original_doc)
                    parent, leaf = _parent(doc, path, create=op not in _NO_CREATE)
                    if parent is not None:
                        updated, _ = python_update(self, 0, {op: {leaf: value}}, parent)  # 0: nothing written
                        parent.clear()
                        parent.update(updated)
                    if parent is not None or op in _NO_CREATE:
                        continue
                rest.setdefault(op, {})[path] = value
        updated, _ = python_update(self, doc_id, rest, doc, *args, **kwargs)
        return updated, updated != original_doc

    UpdateOperationsMixin._perform_python_update = update_with_paths


def _parent(doc: dict, path: str, *, create: bool) -> tuple[dict | None, str]:  # pragma: no cover - child
    """The sub-document holding the last segment of a dotted path (array indexes allowed)."""
    *steps, leaf = path.split(".")
    node: object = doc
    for step in steps:
        if isinstance(node, dict):
            if step not in node and create:
                node[step] = {}
            node = node.get(step)
        elif isinstance(node, list) and step.isdigit() and int(step) < len(node):
            node = node[int(step)]
        else:
            return None, leaf
    return (node, leaf) if isinstance(node, dict) else (None, leaf)
