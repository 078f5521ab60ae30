"""find() projects top-level fields without deep-copying every document first.

Without it, find() deep-copies every document before projecting it: a third of the engine's time
for a page of 25 orders. Nothing a client can see changes, only the time.

Pinned by test_conformance.py: test_projection (what the projections answer); its speed is
measured by bench/api.py, and no test can see it (the copy is no work SQLite does).
"""

from neosqlite.collection.cursor import Cursor


def apply() -> None:  # pragma: no cover - runs in the child
    """Project top-level fields by picking from the decoded documents, without copying them."""
    # The documents were decoded for this query alone, so a projection of top-level fields picks
    # from them; others (dotted paths, expressions) keep neosqlite's way.
    apply_projection = Cursor._apply_projection

    def project(self, docs):
        spec = self._projection
        if not spec or not all(isinstance(k, str) and "." not in k and not k.startswith("$") for k in spec):
            return apply_projection(self, docs)
        keep_id = spec.get("_id", 1) not in (0, False)
        fields = {key: value for key, value in spec.items() if key != "_id"}
        if spec == {"_id": 1} or (fields and all(value in (1, True) for value in fields.values())):
            wanted = set(fields) | ({"_id"} if keep_id else set())
            return [{key: value for key, value in doc.items() if key in wanted} for doc in docs]
        if all(value in (0, False) for value in fields.values()):
            dropped = set(fields) | (set() if keep_id else {"_id"})
            return [{key: value for key, value in doc.items() if key not in dropped} for doc in docs]
        return apply_projection(self, docs)

    Cursor._apply_projection = project
