"""What one run learned while it went on, how it ends from inside a step, and its writes side by side."""

import asyncio
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Any

from desk.agent.core.events import Error, RunEvent, RunStatus
from desk.errors import ErrorCode


@dataclass
class RunState:
    """What one run learned: ids it saw, versions it read, answers it can reuse, mistakes it counted."""

    seen_ids: set[str] = field(default_factory=set)
    versions: dict[str, int] = field(default_factory=dict)
    cache: dict[str, str] = field(default_factory=dict)
    pasted: dict[str, str] = field(default_factory=dict)  # results shown to the model (by digest) -> the tool
    executed: set[str] = field(default_factory=set)  # fingerprints of writes already made in this run
    rejected: dict[str, int] = field(default_factory=dict)
    unknown_tools: int = 0
    bad_args: int = 0


class RunEnded(Exception):
    """The run reached a terminal status inside a step (expired, aborted, loop detected, a record not stored)."""

    def __init__(self, status: RunStatus, event: RunEvent | None = None, code: str | None = None):
        super().__init__(status)
        self.status, self.event, self.code = status, event, code


def stopped(code: ErrorCode, message: str, reason: str) -> RunEnded:
    """The run ends as an `error` (`reason` is its stored error code) and the person reads `message`."""
    return RunEnded("error", Error(code=code, message=message), reason)


def not_stored() -> RunEnded:
    message = "Your message or its answer could not be saved, so the assistant stopped."
    return stopped(ErrorCode.INTERNAL, message, "record_failed")


async def together(*writes: Awaitable[Any]) -> None:
    """Side by side, all awaited to their end (none left running unseen); then the first failure is raised."""
    for outcome in await asyncio.gather(*writes, return_exceptions=True):
        if isinstance(outcome, BaseException):
            raise outcome
