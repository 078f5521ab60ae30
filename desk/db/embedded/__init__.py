"""The embedded MongoDB: nx-27017 (MongoDB wire protocol over SQLite) as a child process.

Used when no MONGODB_URI is set (DESIGN §4). Every engine bug that can be fixed at server start
is fixed in the child, so application code stays plain MongoDB. Under the data directory
nx-27017 keeps one SQLite file per logical database (`<db>.db`), next to our log and pid file.

- `launcher`: `EmbeddedMongo`, which starts `python -m desk.db.embedded` and waits for it;
- `server`: that child (`__main__` runs it): signals, orphaning, commands on the event loop;
- `patches/`: one module per neosqlite bug fixed (and two per-command costs cut), each naming
  the test that pins it; `patch_engine()` applies them all.

Gaps that remain are listed at the top of tests/db/test_conformance.py.
"""

from desk.db.embedded.launcher import LOG_NAME, PID_NAME, EmbeddedMongo, EmbeddedMongoError
from desk.db.embedded.patches import TTL_MONITOR_SECONDS, patch_engine

__all__ = ["LOG_NAME", "PID_NAME", "TTL_MONITOR_SECONDS", "EmbeddedMongo", "EmbeddedMongoError", "patch_engine"]
