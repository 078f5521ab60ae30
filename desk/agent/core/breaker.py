"""The desk-wide circuit breaker for the AI provider (issue 41): an outage pauses the agents' work, it does not fail it.

One document in `provider_breaker`, shared by every worker process. Each transient failure of a model
call (faults.py: no connection, a timeout, 408, 429, 5xx) counts; an answer, or a refusal (the provider
is up, it said no), clears the count. After THRESHOLD transient failures in a row the breaker opens: the
provider is unreachable `since` then. While open, claims stop (the agent's `ready` asks `allows`), so no
attempt is spent and no dead letter is made; the provider is probed instead, at a growing interval
(AI_PROBE_INTERVAL_MS, doubling up to AI_PROBE_MAX_INTERVAL_MS, and never before a `Retry-After`): the
first claim at or after the probe time takes the probe, in one atomic write, so one worker of the desk
makes it. Its answer closes the breaker, and claims resume by themselves; its failure waits for the next.

THRESHOLD is 3: a pass at a time per worker slot means a blip (one dropped connection, a 503 during a
provider's deploy) fails one or two calls in flight together; three in a row with no answer between is
an outage, and at a pass a second it is seen within seconds, having wasted at most those three calls.

Reads are cached for a moment (FRESH_SECONDS) while the breaker is closed, so a desk at full speed pays
no extra database command per claim; a worker learns of another's verdict that much later, and what it
starts meanwhile only fails again, transiently, which costs it nothing but the call.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from pymongo import ReturnDocument
from pymongo.asynchronous.database import AsyncDatabase

from desk.clock import SYSTEM_CLOCK, Clock
from desk.config import Settings

THRESHOLD = 3
FRESH_SECONDS = 1.0
ID = "provider"
Doc = dict[str, Any]


def _breakers(db: AsyncDatabase):
    return db["provider_breaker"]


@dataclass(frozen=True)
class ProviderState:
    """The provider as the desk's agents last found it: `unreachable` (the breaker is open) since when, and why."""

    unreachable: bool
    since: datetime | None
    last_error: str | None


async def state(db: AsyncDatabase) -> ProviderState:
    """The breaker as stored now (every process's verdict)."""
    doc = await _breakers(db).find_one({"_id": ID}) or {}
    return ProviderState(bool(doc.get("open")), doc.get("since"), doc.get("lastError"))


class Breaker:
    """One process's handle on the desk's breaker: `allows` before a claim, then `failed` or `answered` after a call."""

    def __init__(self, settings: Settings, *, clock: Clock = SYSTEM_CLOCK) -> None:
        self.clock = clock
        self.first_wait = settings.ai_probe_interval_ms / 1000
        self.longest_wait = settings.ai_probe_max_interval_ms / 1000
        self._view: Doc = {}
        self._read_at: float | None = None

    async def allows(self, db: AsyncDatabase) -> bool:
        """Whether a claim may start: the breaker is closed, or it is time for a probe and this claim takes it."""
        view = await self._read(db)
        if not view.get("open"):
            return True
        now = self.clock.now()
        if now < view["probeAt"]:
            return False
        every = min(self.longest_wait, max(self.first_wait, view.get("probeEvery", 0) * 2))
        # the probe is this claim's if the probe time is still the one we read: one worker of the desk wins it
        taken = await _breakers(db).find_one_and_update(
            {"_id": ID, "open": True, "probeAt": view["probeAt"]},
            {"$set": {"probeAt": now + timedelta(seconds=every), "probeEvery": every, "probedAt": now}},
            return_document=ReturnDocument.AFTER,
        )
        self._keep(taken or await _breakers(db).find_one({"_id": ID}) or {})
        return taken is not None

    async def failed(self, db: AsyncDatabase, *, error: str, retry_after: float | None = None) -> bool:
        """A call failed transiently: counted; the THRESHOLD-th in a row opens the breaker; a wait asked for holds.

        Whether the breaker is open now, after this failure (an outage, as the desk knows it)."""
        now = self.clock.now()
        not_before = now + timedelta(seconds=max(self.first_wait, retry_after or 0.0))
        counted = await _breakers(db).find_one_and_update(
            {"_id": ID},
            {"$inc": {"failures": 1}, "$set": {"lastError": error, "failedAt": now}},
            upsert=True,
            return_document=ReturnDocument.AFTER,
        )
        if not counted.get("open") and counted["failures"] >= THRESHOLD:
            fields = {"open": True, "since": now, "probeAt": not_before, "probeEvery": self.first_wait}
            # opened by whoever counted last: a worker whose count is already stale leaves it to that one
            counted = await _breakers(db).find_one_and_update(
                {"_id": ID, "failures": counted["failures"]}, {"$set": fields}, return_document=ReturnDocument.AFTER
            ) or await _breakers(db).find_one({"_id": ID})
        elif counted.get("open") and retry_after and counted["probeAt"] < not_before:
            # the provider said when to come back: no probe before then
            counted = await _breakers(db).find_one_and_update(
                {"_id": ID}, {"$max": {"probeAt": not_before}}, return_document=ReturnDocument.AFTER
            )
        self._keep(counted or {})
        return bool(self._view.get("open"))

    async def answered(self, db: AsyncDatabase) -> None:
        """The provider answered (well or not, it is up): the count starts again and an open breaker closes.

        Written only when the view holds something to clear: the usual pass costs no command.
        """
        if not (self._view.get("failures") or self._view.get("open")):
            return
        fields = {"failures": 0, "open": False, "since": None, "probeAt": None, "probeEvery": 0}
        closed = await _breakers(db).find_one_and_update(
            {"_id": ID}, {"$set": {**fields, "closedAt": self.clock.now()}}, return_document=ReturnDocument.AFTER
        )
        self._keep(closed or {})

    async def _read(self, db: AsyncDatabase) -> Doc:
        fresh = self._read_at is not None and self.clock.monotonic() - self._read_at < FRESH_SECONDS
        if not (fresh and not self._view.get("open")):  # open: read every time, the probe time may have moved
            self._keep(await _breakers(db).find_one({"_id": ID}) or {})
        return self._view

    def _keep(self, doc: Doc) -> None:
        self._view, self._read_at = doc, self.clock.monotonic()
