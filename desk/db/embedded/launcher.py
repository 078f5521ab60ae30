"""The embedded MongoDB: nx-27017 (MongoDB wire protocol over SQLite) as a child process.

Used when no MONGODB_URI is set (DESIGN §4). Every engine bug that can be fixed at server start
is fixed here, in the child, so application code stays plain MongoDB. Under the data directory
nx-27017 keeps one SQLite file per logical database (`<db>.db`), next to our log and pid file.

Gaps that remain are listed at the top of tests/db/test_conformance.py.
"""

import argparse
import atexit
import logging
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from copy import deepcopy
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pymongo import MongoClient
from pymongo.errors import PyMongoError

LOG_NAME = "nx-27017.log"
PID_NAME = "nx-27017.pid"
_START_MARK = "--- desk: starting nx-27017"
_PROJECT_ROOT = Path(__file__).resolve().parents[3]


class EmbeddedMongoError(RuntimeError):
    """The embedded server could not be started."""


class EmbeddedMongo:
    """The embedded server as a child process on 127.0.0.1."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = Path(data_dir).resolve()
        self.log_path = self.data_dir / LOG_NAME
        self.uri: str | None = None
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 30.0) -> str:
        """Launch the server and wait until it answers a ping; return its URI."""
        if self._proc is not None and self.uri is not None:
            return self.uri
        try:
            self.data_dir.mkdir(parents=True, exist_ok=True)
            port = _free_port()
            # stdout/stderr go to the log too, so tracebacks that happen before logging is set up are kept.
            with self.log_path.open("ab") as log:
                log.write(f"{_START_MARK} on 127.0.0.1:{port}\n".encode())
                log.flush()
                self._proc = subprocess.Popen(  # noqa: S603 - our own interpreter and module
                    [sys.executable, "-m", "desk.db.embedded", "--data-dir", str(self.data_dir), "--port", str(port)],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=_child_env(),
                )
        except OSError as exc:
            raise EmbeddedMongoError(f"cannot launch the embedded MongoDB in {self.data_dir}: {exc}") from exc
        atexit.register(self.stop)
        uri = f"mongodb://127.0.0.1:{port}/"
        self._wait_ready(uri, timeout)
        self.uri = uri
        return uri

    def stop(self) -> None:
        """Terminate the server (kill it if it does not exit in time); safe to call twice."""
        proc, self._proc, self.uri = self._proc, None, None
        atexit.unregister(self.stop)
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    @property
    def pid(self) -> int | None:
        """The child's process id while it runs."""
        return self._proc.pid if self._proc is not None else None

    def __enter__(self) -> str:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _wait_ready(self, uri: str, timeout: float) -> None:
        assert self._proc is not None
        deadline = time.monotonic() + timeout
        while True:
            if (code := self._proc.poll()) is not None:
                self.stop()
                raise EmbeddedMongoError(f"the embedded MongoDB exited with code {code}:\n{self._log_tail()}")
            client: MongoClient = MongoClient(uri, serverSelectionTimeoutMS=250, connectTimeoutMS=250)
            try:
                client.admin.command("ping")
                return
            except PyMongoError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise EmbeddedMongoError(
                        f"the embedded MongoDB did not answer on {uri} within {timeout:g} s:\n{self._log_tail()}"
                    ) from None
            finally:
                client.close()
            time.sleep(0.05)

    def _log_tail(self, lines: int = 20) -> str:
        """The last lines this launch wrote to the log."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError as exc:
            return f"(no log: {exc})"
        this_launch = text.rpartition(_START_MARK)[2].partition("\n")[2]
        return "\n".join(this_launch.splitlines()[-lines:]) or "(nothing in the log)"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _child_env() -> dict[str, str]:
    # The child must import this same `desk` package, whether or not the project is installed.
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(_PROJECT_ROOT), env.get("PYTHONPATH")]))
    return env


def _serve() -> None:  # pragma: no cover - runs in the child
    parser = argparse.ArgumentParser(prog="python -m desk.db.embedded")
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    data_dir = args.data_dir.resolve()
    pid_file = data_dir / PID_NAME

    _exit_on_signal_or_orphaning(pid_file)
    patch_engine()
    _run_commands_on_the_event_loop()
    # nx logs the body of every command it passes on at INFO: noise, and it may carry user data.
    logging.getLogger("nx_27017").setLevel(logging.WARNING)

    from nx_27017.nx_27017 import main

    # --data-dir: one <db>.db per logical database. Log and pid file in data_dir, not nx's /tmp
    # defaults; the pid file also stops a second server from opening the same files. The log goes
    # to stderr, which the parent points at data_dir/nx-27017.log (nx's own file handler would
    # write every line twice).
    sys.argv = ["nx_27017", "--host", "127.0.0.1", "--port", str(args.port), "--data-dir", str(data_dir)]
    sys.argv += ["--log-file", os.devnull, "--pid-file", str(pid_file)]
    main()


_patched = False


def patch_engine() -> None:  # pragma: no cover - runs in the child (and in tests that read query plans)
    """Apply every workaround below to neosqlite in this process, once."""
    global _patched  # noqa: PLW0603 - the patches change classes, so once per process
    if _patched:
        return
    _patched = True
    _use_python_updates()
    _index_compound_keys_with_id()
    _use_indexes_for_equality_on_scalar_fields()
    _match_object_id_references()
    _filter_dates_and_ids_in_sql()
    _route_aggregation()
    _purge_ttl_like_mongodb()
    _project_without_copying()


def _run_commands_on_the_event_loop() -> None:  # pragma: no cover - runs in the child
    import asyncio

    # nx hands every command to a worker thread, then takes one lock per database file: commands
    # on the desk's database run one at a time anyway, and the hop only adds two thread switches
    # per command, plus a wait for the GIL (up to its 5 ms switch interval) whenever the event loop
    # is reading the next request. No handler blocks or waits for another command, so running them
    # on the loop itself is safe.
    async def run_inline(func: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        return func(*args, **kwargs)

    asyncio.to_thread = run_inline  # this process only runs the server


def _exit_on_signal_or_orphaning(pid_file: Path) -> None:  # pragma: no cover - runs in the child
    from nx_27017 import daemon as nx_daemon

    # nx's SIGTERM handler raises SystemExit inside the event loop, which logs a traceback per open
    # connection. Exiting at once is as safe: every committed SQLite transaction is already in the
    # WAL, an open one rolls back.
    def exit_now(*_: object) -> None:
        if nx_daemon.get_pid(str(pid_file)) == os.getpid():
            pid_file.unlink(missing_ok=True)
        os._exit(0)

    nx_daemon._signal_exit_handler = exit_now

    # A killed test run or web process must not leave a server holding the port and the files.
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        exit_now()

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


# Operators whose Python implementation in neosqlite only knows top-level field names.
_TOP_LEVEL_ONLY = frozenset(
    {"$inc", "$mul", "$min", "$max", "$push", "$addToSet", "$unset", "$pop", "$pullAll", "$setOnInsert"}
)
_NO_CREATE = frozenset({"$unset", "$pop", "$pullAll"})  # these never create missing parents


def _use_python_updates() -> None:  # pragma: no cover - runs in the child
    from neosqlite.collection.query_helper._sql_updates import SqlUpdatesMixin
    from neosqlite.collection.query_helper.update_operations import UpdateOperationsMixin

    # neosqlite's SQL update path (json_set) stores a datetime written by $set/$max/update_many/
    # find_one_and_update/bulk_write as a string and a bool as 1/0, $push of a dict as a JSON
    # string, and skips $addToSet on a missing field: date-range queries then silently miss
    # documents. Its Python path gets the types right, at no measurable cost (DESIGN §4)...
    SqlUpdatesMixin._can_use_sql_updates = lambda *a, **k: False  # type: ignore[method-assign]

    # ...but it applies $inc, $unset, $push, $max, ... to "a.b" as a top-level key named "a.b",
    # and $currentDate stores microseconds with an offset, which date-range counts then miss. So
    # dotted paths are applied to their parent sub-document, and $currentDate becomes a $set of
    # now at BSON (millisecond, naive UTC) precision, stored like any inserted date.
    python_update = UpdateOperationsMixin._perform_python_update

    def update_with_paths(self, doc_id, update_spec, original_doc, *args, **kwargs):
        doc = deepcopy(original_doc)
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


def _index_compound_keys_with_id() -> None:  # pragma: no cover - runs in the child
    from neosqlite.collection import index_manager

    # A compound index naming _id, like (createdAt, _id) for keyset pagination, is built on the
    # JSON path "_id" (not "$._id"), which SQLite rejects on every later insert. _id is also kept
    # in the document's JSON, so "$._id" indexes the same value.
    json_path = index_manager.parse_json_path
    index_manager.parse_json_path = lambda field: "$._id" if field == "_id" else json_path(field)


def _use_indexes_for_equality_on_scalar_fields() -> None:  # pragma: no cover - runs in the child
    from neosqlite.collection.query_engine import QueryEngine
    from neosqlite.collection.query_helper._sql_query_builder import SqlQueryBuilderMixin
    from neosqlite.collection.sql_translator_unified import SQLTranslator

    # {"f": v} must also match documents whose f is an array holding v. Both of neosqlite's filter
    # builders add that array test (find() leaves it out when an index is merely *named* ..._f,
    # which finds nothing in an array field), and the test keeps SQLite off every index: a filter
    # on the second key of (term, ownerId, createdAt), or any count_documents, delete_many or
    # update filter, walks every candidate row. So the test is dropped exactly for the fields
    # _array_free proves hold no array among the documents the filter can match; an {"$eq": v}
    # compiles to a plain `f = ?` in both builders.
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
    from neosqlite.collection.json_path_utils import parse_json_path
    from neosqlite.sql_utils import quote_table_name

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
    version = collection.db.execute("PRAGMA schema_version").fetchone()[0]
    cached = collection.__dict__.get("_desk_index_keys")
    if cached is None or cached[0] != version:
        cached = (version, collection.list_indexes(as_keys=True))
        collection._desk_index_keys = cached
    return cached[1]


def _stored_scalar(value: object) -> object:  # pragma: no cover - runs in the child
    """How a scalar filter value is stored (None for values the array test is not about)."""
    from bson import ObjectId as BsonObjectId
    from neosqlite.objectid import ObjectId

    if isinstance(value, ObjectId | BsonObjectId):
        return _stored_object_id(value)
    if isinstance(value, str | int | float):  # bools too: stored and bound as 1/0
        return value
    return None


def _stored_object_id(oid: object) -> str:
    """An ObjectId in a field other than _id, as neosqlite stores it and json_extract returns it."""
    return f'{{"__neosqlite_objectid__":true,"id":"{oid}"}}'


def _match_object_id_references() -> None:  # pragma: no cover - runs in the child
    from bson import ObjectId as BsonObjectId
    from neosqlite.collection import query_helper
    from neosqlite.collection.query_helper import _sql_query_builder
    from neosqlite.collection.sql_translator_unified import SQLClauseBuilder
    from neosqlite.objectid import ObjectId

    # An ObjectId in any field but _id is stored as {"__neosqlite_objectid__": true, "id": hex},
    # but every filter first turns it into the bare hex string, which SQL then compares with that
    # JSON: {"ownerId": oid} finds nothing and $ne finds everything. So filters keep such
    # ObjectIds (Python matching compares them right) and only the two SQL filter builders turn
    # them into the stored JSON text, which is what json_extract returns (an index serves it too).
    # $in/$nin walk the field with json_each, which steps into a lone stored ObjectId: there the
    # bare hex matches, inside an array the JSON text does, so they get both.
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
        text = _stored_object_id(oid)
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


def _filter_dates_and_ids_in_sql() -> None:  # pragma: no cover - runs in the child
    from neosqlite.collection.cursor import Cursor
    from neosqlite.collection.query_helper._sql_query_builder import SqlQueryBuilderMixin
    from neosqlite.collection.sql_translator_unified import SQLOperatorTranslator
    from neosqlite.objectid import ObjectId

    translate = SQLOperatorTranslator.translate_operator

    def translate_operator(self, field_access: str, operator: str, value: object) -> tuple[str | None, list]:
        # This builder leaves any ObjectId compared with _id to Python, a full scan: keyset pages
        # ({"_id": {"$lt": last}}) and updates of a batch ({"_id": {"$in": ids}}). The _id column
        # holds an ObjectId as its 24 lower-case hex digits, which sort like the ObjectId.
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
        # Its date comparisons go through SQLite's datetime(), which drops the fraction of a second:
        # {"leaseUntil": {"$lt": now}} is off by up to a second either way. strftime's %f keeps the
        # milliseconds a BSON date has.
        sql, params = translate(self, field_access, operator, value)
        return (sql and sql.replace("datetime(", "strftime('%Y-%m-%d %H:%M:%f', ")), params

    SQLOperatorTranslator.translate_operator = translate_operator

    # find() hands a filter holding a date (or $or/$and) to code that selects every match and then
    # sorts and limits in Python: 0.7 s for a page of 25 out of 50,000. The clause builder that
    # count_documents and the updates use understands both, so find() can sort and limit in SQL.
    simple_where = SqlQueryBuilderMixin._build_simple_where_clause

    def build_simple_where_clause(self, query: dict) -> tuple[str, list, list] | None:
        if not _holds_date(query) and not {"$and", "$or", "$nor"} & set(query):
            return simple_where(self, query)
        where, params = self.collection.query_engine.sql_translator.translate_match(query)
        return None if where is None else (where, params, [])

    SqlQueryBuilderMixin._build_simple_where_clause = build_simple_where_clause
    Cursor._contains_datetime_operations = lambda self, query: False


_ID_COMPARISONS = {"$eq": "=", "$ne": "!=", "$lt": "<", "$lte": "<=", "$gt": ">", "$gte": ">="}
_COUNT_STAGE = {"$group": {"_id": 1, "n": {"$sum": 1}}}  # how pymongo's count_documents ends its pipeline
# Pipelines built only from these (and no datetime values) come out right from neosqlite's SQL
# aggregation tiers; the conformance suite pins them.
_PLAIN_AGGREGATION = frozenset(
    {"$match", "$group", "$sort", "$limit", "$skip", "$count", "$sum", "$avg"}
    | {"$and", "$or", "$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin", "$exists"}
)


def _route_aggregation() -> None:  # pragma: no cover - runs in the child
    from neosqlite.collection.aggregation_cursor import AggregationCursor
    from neosqlite.collection.json_helpers import neosqlite_json_loads
    from neosqlite.collection.query_engine import QueryEngine
    from neosqlite.collection.query_engine.python_aggregation_engine import execute_python_aggregation
    from nx_27017.utils import convert_bson_to_neo_objectids

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
    from neosqlite.sql_utils import quote_table_name

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


TTL_MONITOR_SECONDS = 60  # how often MongoDB's TTL monitor deletes expired documents
TTL_BATCH = 1000  # expired documents deleted per purge; a longer backlog goes on the next read
_DATE_TEXT = '{"$date":"'  # how json_extract (and so an index) returns a stored date, before its ISO text


def _purge_ttl_like_mongodb() -> None:  # pragma: no cover - runs in the child
    from neosqlite._sqlite import sqlite3
    from neosqlite.collection import Collection

    # neosqlite deletes expired documents before every find, count and aggregate on a collection
    # with a TTL index, comparing dates through strftime(), which no index serves: two scans per
    # read (217 ms for each poll of a 100,000-entry change feed). MongoDB's monitor purges once a
    # minute, so expired documents may linger that long there too; here a read purges at most
    # once a minute per collection, as a range on the TTL index itself.
    def auto_purge(self) -> None:
        if time.monotonic() < self.__dict__.get("_desk_ttl_due", 0.0):
            return
        try:
            deleted = purge_expired(self) if self._ttl_specs_cached() else 0
        except sqlite3.Error as exc:  # as in MongoDB, a failed purge must not fail the read
            logging.getLogger(__name__).warning("TTL purge of %s failed: %s", self.name, exc)
            deleted = 0
        self._desk_ttl_due = time.monotonic() + (0 if deleted >= TTL_BATCH else TTL_MONITOR_SECONDS)

    def purge_expired(self, now: datetime | None = None) -> int:
        """Delete up to TTL_BATCH documents per TTL index whose date is older than its expiry."""
        from neosqlite.collection.json_path_utils import parse_json_path
        from neosqlite.sql_utils import quote_table_name

        moment = now or datetime.now(UTC)
        moment = moment.astimezone(UTC).replace(tzinfo=None) if moment.tzinfo else moment  # stored: naive UTC
        table = quote_table_name(self.name)
        deleted = 0
        for spec in self._ttl_specs_cached():
            # A stored date is {"$date":"<naive UTC ISO>"} text, which sorts by date; like MongoDB,
            # only dates expire (neosqlite also deleted numbers, as seconds since the epoch).
            value = f"json_extract(data, '{parse_json_path(spec['field'])}')"
            cutoff = moment - timedelta(seconds=int(spec["expireAfterSeconds"]))
            expired = f"SELECT id FROM {table} WHERE {value} > ? AND {value} < ? LIMIT ?"  # noqa: S608 - names
            bounds = (_DATE_TEXT, _DATE_TEXT + cutoff.isoformat(timespec="microseconds"), TTL_BATCH)
            deleted += self.db.execute(f"DELETE FROM {table} WHERE id IN ({expired})", bounds).rowcount  # noqa: S608
        return deleted

    Collection._auto_purge_ttl = auto_purge
    Collection.purge_expired = purge_expired


def _project_without_copying() -> None:  # pragma: no cover - runs in the child
    from neosqlite.collection.cursor import Cursor

    # find() deep-copies every document before projecting it, a third of the engine's time for a
    # page of 25 orders. The documents were decoded for this query alone, so a projection of
    # top-level fields picks from them; others (dotted paths, expressions) keep neosqlite's way.
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


def _is_plain(node: object) -> bool:  # pragma: no cover - runs in the child
    if isinstance(node, dict):
        return all((not key.startswith("$") or key in _PLAIN_AGGREGATION) and _is_plain(v) for key, v in node.items())
    if isinstance(node, list):
        return all(_is_plain(item) for item in node)
    return not isinstance(node, datetime)


def _holds_date(node: object) -> bool:  # pragma: no cover - runs in the child
    if isinstance(node, dict):
        return any(_holds_date(item) for item in node.values())
    if isinstance(node, list):
        return any(_holds_date(item) for item in node)
    return isinstance(node, datetime)


if __name__ == "__main__":  # pragma: no cover
    _serve()
