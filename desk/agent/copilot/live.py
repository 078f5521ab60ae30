"""This process's live turns, over the Desk's bus: a logout stops them at once, a decision wakes them.

A turn registers itself here while it may still run; `sessions.abort_runs` ends the person's runs
in the database and then calls `interrupt`, which reaches the turns of this web process. A turn on
its way to its first event is an `Opening` here too: other turns' bookkeeping gives way to it.

The desk-wide AI switch stops every turn: turned off in this process, `switch.turn` publishes
"switch" on the bus and they stop at once; turned off in another, this process's watcher, which runs
while any turn does, reads the switch every `switch.WATCH_SECONDS` and publishes it here.
"""

import asyncio
import logging
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Protocol

from pymongo.asynchronous.database import AsyncDatabase

from desk import state
from desk.agent.core import switch
from desk.logs import failure

log = logging.getLogger(__name__)
INTERRUPTED = "Stopped: this conversation was ended elsewhere (you signed out, or your access changed)."
TURNED_OFF = switch.STOPPED  # the message of "switch" on the bus: a turn tells it from a person's Stop by it
WATCHER = "ai-switch-watcher"


class Interruptible(Protocol):
    run_id: str

    def interrupt(self, by: str | None = None) -> None: ...


def register(user_id: str, turn: Interruptible, db: AsyncDatabase) -> Callable[[], None]:
    """Stop `turn` when its person's turns must stop, or its run must, or AI is turned off for the desk; until
    the returned call forgets it. Weakly: a turn never read is simply forgotten.
    """
    desk = state.current()
    off_person = desk.bus.subscribe("person", user_id, turn.interrupt, weak=True)
    off_run = desk.bus.subscribe("run", turn.run_id, turn.interrupt, weak=True)
    off_switch = desk.bus.subscribe("switch", None, turn.interrupt, weak=True)  # told TURNED_OFF
    if not any(task.get_name() == WATCHER for task in desk.tasks):
        desk.keep(asyncio.create_task(_watch_switch(db), name=WATCHER), failure="the AI switch's watcher failed")

    def forget() -> None:
        off_person()
        off_run()
        off_switch()

    return forget


async def _watch_switch(db: AsyncDatabase) -> None:
    """While turns run here, read the switch every `WATCH_SECONDS`; off, stop them (a flip made in another process)."""
    bus = state.current().bus
    while True:
        await asyncio.sleep(switch.WATCH_SECONDS)
        if not bus.subscribers("switch", None):
            return  # no turn left: the next one starts a watcher again
        try:
            now_on = (await switch.read(db)).on
        except Exception as error:  # the database away for a moment: the turns' own checks still stand
            log.warning("could not read the AI switch (%s)", failure(error))
            continue
        if not now_on:
            await bus.publish("switch", None, TURNED_OFF)


async def interrupt(user_id: str) -> None:
    """Stop this process's turns of `user_id` at once; `sessions.abort_runs` has ended their runs in the database.

    On its own a turn notices that only at its next check, which may come after a long model call
    (or, in another web process, at its lease keeper's next renewal: a third of a lease). A turn in
    another process that has not stored its run yet (no first token so far) is not found there: it
    stops at its next step's check only if its person lost AI access, else it runs to its end.
    """
    await state.current().bus.publish("person", user_id)


async def stop(user_id: str, run_id: str) -> None:
    """Stop one run of `user_id` in this process, if it runs here (Stop pressed on any page or tab)."""
    await state.current().bus.publish("run", run_id, user_id)  # the turn stops only for its own person


def awaiting(tool_call_id: str) -> AbstractContextManager[asyncio.Event]:
    """The event a run waits on for the decision on `tool_call_id`; a decide in this process sets it (`decided`)."""
    return state.current().bus.waiting("tool_call", tool_call_id)


async def decided(tool_call_id: str) -> None:
    """Wake the run of this process waiting on `tool_call_id` (none here: it notices within a second)."""
    await state.current().bus.publish("tool_call", tool_call_id, tool_call_id)  # pages showing it close it


# --- first events first ------------------------------------------------------------------------

GIVE_WAY_SECONDS = 0.05  # the longest a turn gives way to others' first events (and how young theirs must be)


class Opening:
    """A turn on its way to its first event (a token, mostly): what a person waits for when they ask.

    After its first event a turn writes its records (the run, the message, the ledger, the answer)
    while the rest of the answer streams. When several people ask at once, on one event loop and one
    database, that work would go before the first events of the turns still on their way; so a turn
    whose first event is out gives way to the others (`out`), for at most `GIVE_WAY_SECONDS`. It does
    not wait for a turn that began longer ago than that: that one is waiting on its model, and the
    desk is idle meanwhile. Held by its turn, weakly by the process's Desk (`openings`, `giving_way`).
    Real time, not the Desk's clock: what it spares is a person's wait, and it waits at most 50 ms.
    """

    def __init__(self) -> None:
        self.since = time.monotonic()
        self.desk = state.current()  # the Desk it was counted in, should a test install another meanwhile
        self.desk.openings.add(self)

    def done(self) -> None:
        """Stop holding others up: the first event is out, or the turn ended (or was refused) without one."""
        if self in self.desk.openings:
            self.desk.openings.discard(self)
            for waiter in self.desk.giving_way:
                if not waiter.done():
                    waiter.set_result(None)

    async def out(self) -> None:
        """The turn's first event is out: the turns still on their way go first (once; later calls return)."""
        openings, giving_way = self.desk.openings, self.desk.giving_way
        if self not in openings:
            return
        self.done()
        until = time.monotonic() + GIVE_WAY_SECONDS
        while openings:
            stop = min(until, max(opening.since for opening in openings) + GIVE_WAY_SECONDS)
            if stop <= time.monotonic():
                return
            waiter = asyncio.get_running_loop().create_future()
            giving_way.append(waiter)
            try:
                await asyncio.wait((waiter,), timeout=stop - time.monotonic())
            finally:
                giving_way.remove(waiter)
