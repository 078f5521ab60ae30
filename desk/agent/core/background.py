"""The agents' tasks nobody awaits (a run's first writes, a turn's wind-down), held until they end."""

import asyncio
import logging

from desk import logs

log = logging.getLogger(__name__)
_background: set[asyncio.Task] = set()  # strong refs until done: the event loop keeps only weak ones


def keep(task: asyncio.Task, *, failure: str, expected: tuple[type[BaseException], ...] = ()) -> asyncio.Task:
    """Hold `task` until it is done, and log its failure (`logs.failure`: never the message, which may quote words)."""

    def done(finished: asyncio.Task) -> None:
        _background.discard(finished)
        if not finished.cancelled() and (error := finished.exception()) is not None and not isinstance(error, expected):
            log.error("%s (%s)", failure, logs.failure(error))

    _background.add(task)
    task.add_done_callback(done)
    return task
