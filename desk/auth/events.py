"""Security events (ASVS 7.1-7.2): one logger, `desk.security`, one JSON line per event.

Each line names the event, who acted (`actorId`) and on whom (`subjectId`), and a few facts that
are ids, names from a closed set, counts, times or the client address: never an email, a password,
a session or a token secret (a failed login for an email nobody has is logged without the email,
which is often a password typed in the wrong field).
"""

import logging
from datetime import datetime
from typing import Literal

from bson import ObjectId

from desk.logs import FIELDS

log = logging.getLogger("desk.security")

Event = Literal[
    "login_succeeded",
    "login_failed",
    "logged_out",
    "account_locked",
    "account_unlocked",
    "user_created",
    "role_changed",
    "activation_changed",
    "password_changed",
    "password_change_failed",
    "password_reset",
    "token_created",
    "token_revoked",
    "tokens_revoked",
]
Fact = str | int | bool | datetime | ObjectId | None
WARNINGS = frozenset({"login_failed", "account_locked", "password_change_failed"})


def record(event: Event, *, actor_id: object | None, subject_id: object | None, **facts: Fact) -> None:
    """Log one security event; ids may be ObjectIds or strings."""
    fields: dict[str, Fact] = {"event": event, "actorId": _id(actor_id), "subjectId": _id(subject_id)}
    fields |= {key: _plain(value) for key, value in facts.items()}
    log.log(logging.WARNING if event in WARNINGS else logging.INFO, event, extra={FIELDS: fields})


def _id(value: object | None) -> str | None:
    return None if value is None else str(value)


def _plain(value: Fact) -> str | int | bool | None:
    """What JSON can hold: times as ISO text, ids as their hex."""
    if isinstance(value, datetime):
        return value.isoformat()
    return str(value) if isinstance(value, ObjectId) else value
