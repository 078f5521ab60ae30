"""The embedded MongoDB: nx-27017 (MongoDB wire protocol over SQLite) as a child process (DESIGN §4)."""

from desk.db.embedded.launcher import (
    LOG_NAME,
    PID_NAME,
    TTL_MONITOR_SECONDS,
    EmbeddedMongo,
    EmbeddedMongoError,
    patch_engine,
)

__all__ = ["LOG_NAME", "PID_NAME", "TTL_MONITOR_SECONDS", "EmbeddedMongo", "EmbeddedMongoError", "patch_engine"]
