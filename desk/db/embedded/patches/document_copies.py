"""An update copies the stored document as a document, not through `copy.deepcopy`.

neosqlite applies every update to a copy of the stored document, made with `copy.deepcopy`, whose
memo and per-type dispatch cost several times what the copy itself does: on the desk's run and
session documents it was a third of an update's Python time. A stored document holds dicts, lists
and values that never change in place (text, numbers, dates, ids), so copying its dicts and lists
is the whole copy; anything else still goes through deepcopy.

Pinned by test_embedded_engine.py: test_an_update_leaves_the_document_it_read_untouched;
test_conformance.py: test_types_round_trip (every update operator, over the wire).
"""

from copy import deepcopy
from datetime import date, datetime
from decimal import Decimal
from typing import Any

import bson
import neosqlite.objectid
from neosqlite.collection.query_helper import update_operations

# Types whose values cannot change in place: shared between the original and its copy.
_VALUES = frozenset(
    {str, int, float, bool, type(None), bytes, datetime, date, Decimal, bson.ObjectId, neosqlite.objectid.ObjectId}
)


def apply() -> None:  # pragma: no cover - runs in the child
    """neosqlite's update module copies with `copy_document`."""
    update_operations.deepcopy = copy_document


def copy_document(value: Any) -> Any:
    """A copy of `value` that shares nothing mutable with it (what `deepcopy` gives for a document)."""
    kind = type(value)
    if kind is dict:
        return {key: copy_document(item) for key, item in value.items()}
    if kind is list:
        return [copy_document(item) for item in value]
    if kind in _VALUES:
        return value
    return deepcopy(value)
