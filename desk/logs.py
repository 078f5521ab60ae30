"""Logging: one JSON object per line, with secrets redacted before anything is written.

Each line carries the ids of what it is part of (`requestId`, `runId`), from a context variable
that the HTTP edge and the agents set with `tag`: every line of one request or one run can be
found together, and tasks started meanwhile inherit the ids.
"""

import json
import logging
import os
import re
import sys
import traceback
from contextvars import ContextVar, Token
from datetime import UTC, datetime
from pathlib import Path

# Values that must never reach a log, whatever message carries them (SEC-1).
_SECRET_PATTERNS = [
    re.compile(r"(?i)(authorization|api[_-]?key|password|secret|token|cookie)(\"?\s*[:=]\s*\"?)([^\s\",}]+)"),
    re.compile(r"(?i)bearer\s+[A-Za-z0-9._~+/=-]+"),
    re.compile(r"wod_[A-Za-z0-9_-]{8,}"),
    re.compile(r"sk-[A-Za-z0-9_-]{8,}"),
]


FIELDS = "desk_fields"  # a record's structured facts, passed as `extra={FIELDS: {...}}`, become keys of its line
_IDS: ContextVar[dict[str, str]] = ContextVar("desk_log_ids", default={})  # noqa: B039 - never mutated, replaced
# The configured secrets themselves, whatever they look like (see never_log).
# One of three kept module-level: logging is the process's, and this module sits below the Desk, which imports it.
_CONFIGURED: list[str] = []


def never_log(*values: str | None) -> None:
    """Redact these exact values as well: the configured secrets (an AI key need not look like `sk-…`)."""
    for value in values:
        if value and len(value) >= 8 and value not in _CONFIGURED:  # shorter ones would also hit ordinary words
            _CONFIGURED.append(value)
    _CONFIGURED.sort(key=len, reverse=True)  # a secret that contains another goes first, whole


# pydantic quotes what it refused (`input_value='…', input_type=str]`): a message, a work order's text or a
# model's answer. Greedy to the line's last `, input_type=`, so a value that contains one stays hidden whole.
_INPUT_VALUE = re.compile(r"input_value=.*, input_type=")


def redact(text: str) -> str:
    """`text` with every configured secret, secret-looking value and quoted input replaced by [REDACTED]."""
    text = _INPUT_VALUE.sub("input_value=[REDACTED], input_type=", text)
    text = _SECRET_PATTERNS[0].sub(lambda m: f"{m.group(1)}{m.group(2)}[REDACTED]", text)
    for pattern in _SECRET_PATTERNS[1:]:
        text = pattern.sub("[REDACTED]", text)
    for value in _CONFIGURED:  # after the patterns: a secret that is also a key word must not hide its value
        text = text.replace(value, "[REDACTED]")
    return text


# The desk's own code is this package's folder, not any folder named "desk": a clone or a venv may be one.
_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def failure(error: BaseException) -> str:
    """What a log line may say of `error`: its type and where it was raised, never its message.

    A message may quote a stored document or a person's words (SEC-1); a place is code. The place is
    the innermost frame, and when that is not the desk's own code, the innermost frame that is (the
    desk's call that led there).
    """
    frames = list(traceback.walk_tb(error.__traceback__))
    if not frames:
        return type(error).__name__
    ours = [(frame, line) for frame, line in frames if frame.f_code.co_filename.startswith(_PACKAGE)]
    places = [frames[-1]] + ([ours[-1]] if ours and ours[-1] != frames[-1] else [])
    where = ", from ".join(f"{Path(f.f_code.co_filename).name}:{line} in {f.f_code.co_name}" for f, line in places)
    return f"{type(error).__name__} at {where}"


def tag(**ids: str) -> Token:
    """Add ids to every log line written from here on in this context (and in tasks it starts)."""
    return _IDS.set({**_IDS.get(), **ids})


def untag(token: Token) -> None:
    """Back to the ids before `tag` returned `token`."""
    _IDS.reset(token)


class RedactingFilter(logging.Filter):
    """Render the message once, redact it, and drop the arguments so nothing formats them again."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = redact(record.getMessage())
        record.args = None
        return True


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "at": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
            **_IDS.get(),
            **getattr(record, FIELDS, {}),  # a security event's facts (desk/auth/events.py): ids, never text
        }
        if record.exc_info:
            entry["error"] = redact(self.formatException(record.exc_info))
        return json.dumps(entry, ensure_ascii=False)


def configure_logging(level: int = logging.INFO) -> None:
    """JSON lines on stderr, redacted; quiet the chatty access log."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    handler.addFilter(RedactingFilter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    logging.getLogger("pymongo").setLevel(logging.WARNING)
    logging.getLogger("apscheduler").setLevel(logging.WARNING)
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per request is noise
