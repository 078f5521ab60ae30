"""The process's one `Desk`: its settings, database, provider, clock, message bus, unawaited tasks, AI switch.

The `desk` command installs it with the settings it parsed (desk/cli.py `setup`, through
`use_settings`); the web process then gives it its database and wires the listeners that cross
layers onto its bus (main.py, desk/app.py `wire`). Everything that used to be a module-level handle
(the settings, the database, the provider) is read from it, so a test gets a fresh one by installing
its own, and one place says what a process holds.
"""

import asyncio
import logging
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from desk import config, logs  # config: a module, not its names: desk.config reads the Desk through this one
from desk.bus import Bus
from desk.clock import SYSTEM_CLOCK, Clock

if TYPE_CHECKING:  # imported for their types only: the modules that read the Desk import this one
    from pymongo.asynchronous.database import AsyncDatabase

    from desk.agent.core.provider import Provider
    from desk.agent.core.switch import Switch
    from desk.config import Settings


log = logging.getLogger(__name__)


@dataclass
class Desk:
    settings: "Settings"
    db: "AsyncDatabase | None" = None  # opened at start-up
    provider: "Provider | None" = None  # built on first use, while AI is on (desk/agent/core/client.py)
    clock: Clock = SYSTEM_CLOCK  # what limits and waits count time in (a test's stands still until moved)
    bus: Bus = field(default_factory=Bus)
    tasks: set[asyncio.Task] = field(default_factory=set)  # held until done: the event loop keeps only weak refs
    ai_switch: "tuple[float, Switch] | None" = None  # the desk-wide AI switch as last read, and when (monotonic)
    # copilot turns on their way to their first event (desk/agent/copilot/live.py `Opening`, not named here: the
    # agents import this module), held weakly: a turn never streamed is forgotten; and the turns giving way to them
    openings: weakref.WeakSet = field(default_factory=weakref.WeakSet)
    giving_way: list[asyncio.Future] = field(default_factory=list)
    # the web process's (components/runtime, not named here: the core never imports the UI): each person's
    # copilot turn running here, by person id, and the reads in flight that screens following a change share
    copilot_turns: dict[str, Any] = field(default_factory=dict)
    shared_reads: dict[tuple, asyncio.Future] = field(default_factory=dict)
    # the worker's connections to the mail server, kept between emails (desk/notifications/mail.py `Relay`, not named
    # here: the core never imports a domain); made at the first email
    mail_relay: Any = None

    def keep(self, task: asyncio.Task, *, failure: str, expected: tuple[type[BaseException], ...] = ()) -> asyncio.Task:
        """Hold a task nobody awaits (a run's first writes, a turn's wind-down) until it ends, and log its failure.

        The log says `failure` and the error's type and place (`logs.failure`), never its message,
        which may quote a person's words.
        """
        held = self.tasks

        def done(finished: asyncio.Task) -> None:
            held.discard(finished)
            error = None if finished.cancelled() else finished.exception()
            if error is not None and not isinstance(error, expected):
                log.error("%s (%s)", failure, logs.failure(error))

        held.add(task)
        task.add_done_callback(done)
        return task


_desk: Desk | None = None  # the process's Desk (`current`); kept module-level: it is where all else is found


def current() -> Desk:
    """The process's Desk; a command or test that installed none gets one with the environment's settings."""
    global _desk  # noqa: PLW0603 - one Desk per process
    if _desk is None:
        _desk = Desk(config.load_settings())
    return _desk


def peek() -> Desk | None:
    """The installed Desk, if any (what a teardown touches: it never builds one)."""
    return _desk


def install(desk: Desk | None) -> None:
    """Make `desk` the process's (None: forget it; the next `current` builds a fresh one)."""
    global _desk  # noqa: PLW0603
    _desk = desk
