"""This process's live turns, so a logout stops them at once.

A turn registers itself here while it may still run; `sessions.abort_runs` ends the person's runs
in the database and then calls `interrupt`, which reaches the turns of this web process. A turn on
its way to its first event is an `Opening` here too: other turns' bookkeeping gives way to it.
"""

import asyncio
import contextlib
import logging
import time
import weakref
from collections.abc import Iterator
from typing import Protocol

log = logging.getLogger(__name__)
INTERRUPTED = "Stopped: this conversation was ended elsewhere (you signed out, or your access changed)."


class Interruptible(Protocol):
    run_id: str

    def interrupt(self) -> None: ...


_LIVE: dict[str, weakref.WeakSet[Interruptible]] = {}  # person id -> their turns in this process
_waiting: dict[str, asyncio.Event] = {}  # tool-call id -> the event its run waits on for a decision


def register(user_id: str, turn: Interruptible) -> None:
    """Weakly: a turn never read is simply forgotten."""
    mine = _LIVE.get(user_id)
    if mine is None:  # not `setdefault`: it would make a WeakSet for every turn, kept or not
        mine = _LIVE[user_id] = weakref.WeakSet()
    mine.add(turn)


def forget(user_id: str, turn: Interruptible) -> None:
    mine = _LIVE.get(user_id)
    if mine is not None:
        mine.discard(turn)
        if not mine:
            _LIVE.pop(user_id, None)


def interrupt(user_id: str) -> None:
    """Stop this process's turns of `user_id` at once; `sessions.abort_runs` has ended their runs in the database.

    On its own a turn notices that only at its next check, which may come after a long model call
    (or, in another web process, at its lease keeper's next renewal: a third of a lease). A turn in
    another process that has not stored its run yet (no first token so far) is not found there: it
    stops at its next step's check only if its person lost AI access, else it runs to its end.
    """
    for turn in tuple(_LIVE.get(user_id, ())):
        turn.interrupt()


def stop(user_id: str, run_id: str) -> None:
    """Stop one run of `user_id` in this process, if it runs here (Stop pressed on any page or tab)."""
    for turn in tuple(_LIVE.get(user_id, ())):
        if turn.run_id == run_id:
            turn.interrupt()


@contextlib.contextmanager
def awaiting(tool_call_id: str) -> Iterator[asyncio.Event]:
    """The event a run waits on for the decision on `tool_call_id`; a decide in this process sets it (`decided`)."""
    event = _waiting.setdefault(tool_call_id, asyncio.Event())
    try:
        yield event
    finally:
        _waiting.pop(tool_call_id, None)


def decided(tool_call_id: str) -> None:
    """Wake the run of this process waiting on `tool_call_id` (none here: it notices within a second)."""
    event = _waiting.get(tool_call_id)
    if event is not None:
        event.set()


# --- first events first ------------------------------------------------------------------------

GIVE_WAY_SECONDS = 0.05  # the longest a turn gives way to others' first events (and how young theirs must be)
_OPENING: weakref.WeakSet["Opening"] = weakref.WeakSet()  # this process's turns before their first event
_giving_way: list[asyncio.Future] = []  # turns waiting in `Opening.out`, woken as each opening ends


class Opening:
    """A turn on its way to its first event (a token, mostly): what a person waits for when they ask.

    After its first event a turn writes its records (the run, the message, the ledger, the answer)
    while the rest of the answer streams. When several people ask at once, on one event loop and one
    database, that work would go before the first events of the turns still on their way; so a turn
    whose first event is out gives way to the others (`out`), for at most `GIVE_WAY_SECONDS`. It does
    not wait for a turn that began longer ago than that: that one is waiting on its model, and the
    desk is idle meanwhile. Held by its turn, weakly here: a turn that is never streamed is forgotten.
    """

    def __init__(self) -> None:
        self.since = time.monotonic()
        _OPENING.add(self)

    def done(self) -> None:
        """Stop holding others up: the first event is out, or the turn ended (or was refused) without one."""
        if self in _OPENING:
            _OPENING.discard(self)
            for waiter in _giving_way:
                if not waiter.done():
                    waiter.set_result(None)

    async def out(self) -> None:
        """The turn's first event is out: the turns still on their way go first (once; later calls return)."""
        if self not in _OPENING:
            return
        self.done()
        until = time.monotonic() + GIVE_WAY_SECONDS
        while _OPENING:
            stop = min(until, max(opening.since for opening in _OPENING) + GIVE_WAY_SECONDS)
            if stop <= time.monotonic():
                return
            waiter = asyncio.get_running_loop().create_future()
            _giving_way.append(waiter)
            try:
                await asyncio.wait((waiter,), timeout=stop - time.monotonic())
            finally:
                _giving_way.remove(waiter)
