"""The desk-wide AI switch (issue 41): an admin turns every agent off, and on again, without a restart.

One document of the agents' settings collection, `agent_config` `_id: "ai_switch"`: `{on, changedBy,
changedAt}` (none stored: on). It is a document apart from the triage policy, so flipping it moves no
policy version (an admin's open policy form still saves); sharing the policy's collection lets the worker
read both in one command before a claim (`read_beside`).
The per-agent switch (the policy's `enabled`) stays in the policy; AI_ENABLED=false stays the hard off
beneath both (desk/access.py says what each refusal reads). This module is the only code touching it.

Who reads it, and how soon a flip is seen (it lives in the database: every process sees it):
- the worker before the first claim of a poll (the read stands for that poll's next claims for at most
  `task.LOOK_KEPT_SECONDS`, unless this process saw a flip meanwhile), after each claim before a suggestion
  is stored, and, while a model call runs, every `WATCH_SECONDS` (desk/agent/triage/task.py, run.py):
  within about a second, a call in flight is cancelled;
- the copilot before a turn and before each step, through `current`: a read at most `FRESH_SECONDS`
  old, kept on the process's Desk, because the message route is the first token's hot path; a flip
  made in this process is kept at once;
- a web process with copilot turns running reads it every `WATCH_SECONDS` and stops them
  (desk/agent/copilot/live.py); a flip made in this process stops them at once, through the bus;
- open pages follow it in their header (components/frame.py): whenever this process sees the switch other
  than it last saw it (a flip here, or any read of a flip made elsewhere), it says so on the bus
  ("ai_switch", with the switch), and each page reads it through `current` every few seconds.
"""

import contextlib
import time
from dataclasses import dataclass
from datetime import datetime

from pymongo import ReturnDocument
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import DuplicateKeyError

from desk import state
from desk.schema import now

SWITCH_ID = "ai_switch"
FRESH_SECONDS = 1.0  # how old a kept read may be before the copilot reads the switch again
WATCH_SECONDS = 1.0  # how often a model call in flight (a triage pass, copilot turns) looks at it
STOPPED = "Stopped: an admin turned AI assistance off for the whole desk."  # what a stopped turn tells its person


@dataclass(frozen=True)
class Switch:
    """The switch as stored: on or off, and who flipped it last, when (None: never flipped)."""

    on: bool = True
    changed_by: str | None = None
    changed_at: datetime | None = None


NEVER_FLIPPED = Switch()


def _switch(db: AsyncDatabase):
    return db["agent_config"]  # beside the agents' policies (desk/agent/triage/policy.py)


async def read(db: AsyncDatabase) -> Switch:
    """The switch as stored now (kept for `current`)."""
    found = await _switch(db).find_one({"_id": SWITCH_ID})
    return await _seen(_from(found))


async def read_beside(db: AsyncDatabase, other_id: str) -> tuple[dict | None, Switch]:
    """The switch and another document of its collection (an agent's policy), as stored now, in one read."""
    found = {doc["_id"]: doc async for doc in _switch(db).find({"_id": {"$in": [SWITCH_ID, other_id]}})}
    return found.get(other_id), await _seen(_from(found.get(SWITCH_ID)))


async def current(db: AsyncDatabase) -> Switch:
    """The switch as read at most `FRESH_SECONDS` ago in this process, else read now."""
    kept = state.current().ai_switch
    if kept is not None and time.monotonic() - kept[0] < FRESH_SECONDS:
        return kept[1]
    return await read(db)


def known() -> Switch:
    """The switch as this process last read it, without a read (never read here: on), for what cannot wait; its
    callers read it first (`current`: a page's guard, a turn's checks before each step)."""
    kept = state.current().ai_switch
    return kept[1] if kept is not None else NEVER_FLIPPED


async def turn(db: AsyncDatabase, *, on: bool, actor_id: str) -> tuple[Switch, bool]:
    """Turn the switch `on` or off as `actor_id`; the switch after, and whether this call flipped it.

    Turned off, it tells this process's bus ("switch", with `STOPPED`): the copilot's turns here stop at once.
    """
    fields = {"on": on, "changedBy": actor_id, "changedAt": now()}
    flipped = await _switch(db).find_one_and_update(
        {"_id": SWITCH_ID, "on": {"$ne": on}}, {"$set": fields}, return_document=ReturnDocument.AFTER
    )
    if flipped is None and not on:  # never stored: the first time it is turned off
        with contextlib.suppress(DuplicateKeyError):  # another admin's off went first: off already
            await _switch(db).insert_one({"_id": SWITCH_ID, **fields})
            flipped = {"_id": SWITCH_ID, **fields}
    if flipped is None:
        return await read(db), False  # so already: no change, nothing to audit
    after = await _seen(_from(flipped))
    if not on:
        await state.current().bus.publish("switch", None, STOPPED)
    return after, True


def _from(doc: dict | None) -> Switch:
    if doc is None:
        return NEVER_FLIPPED
    return Switch(on=bool(doc.get("on", True)), changed_by=doc.get("changedBy"), changed_at=doc.get("changedAt"))


async def _seen(switch: Switch) -> Switch:
    """Keep `switch` as this process's latest read; turned the other way than the last one, tell the bus."""
    before = known()
    state.current().ai_switch = (time.monotonic(), switch)
    if switch.on != before.on:
        await state.current().bus.publish("ai_switch", None, switch)
    return switch
