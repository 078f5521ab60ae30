"""Spend and pace: the daily ledger (one atomic $inc per LLM call), the caps, and the per-minute message limit.

Ledger keys are `user:<id>:<day>`, `agent:<name>:<day>` and `global:<day>`, days of the desk's time zone
(the triage policy's `timeZone`, mirrored here as the `zone` document by desk/agent/triage/policy.py, so
the copilot, which does not read the triage policy, counts the same days). Checking then
calling can overshoot a cap by the calls in flight, one per worker slot and per process; so an agent
working on its own reserves first (`reserve`): the most its call can cost (its prompt and the most
output tokens allowed, at the configured prices), counted against every scope by a conditional $inc
that refuses once the scope reached its cap; the call's real cost settles it afterwards (`settle`).
The desk then overshoots a cap by at most one call in total, however many workers run.

The person's day document also counts their message starts per minute and address (spec §4.7:
the AI limiter keys on user + IP), so letting a message in is one atomic $inc-and-read of that
document beside one read of the agent's and the desk's spend: two round trips, side by side.

A run bills its model calls through a `Meter`: the copilot's to the person and `global` (the `agent:`
scope and AGENT_DAILY_SPEND_USD are for autonomous agents); an agent working on its own (no person)
to `agent:<name>` and `global`.
"""

import asyncio
import hashlib
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from bson import ObjectId
from pymongo import ASCENDING, ReturnDocument, UpdateOne
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import BulkWriteError

from desk import zone as desk_zones
from desk.agent.core.provider import Usage
from desk.agent.core.state import together
from desk.agent.core.store import agent_runs
from desk.clock import Clock
from desk.config import Settings
from desk.errors import DeskError, ErrorCode, RateLimited
from desk.schema import now

DUPLICATE_KEY = 11000
ZONE = desk_zones.ZONE  # the document naming the desk's time zone
KEEP_SPEND = timedelta(days=400)  # a year of days and a month over, for a year-on-year look
CAP_OWNERS = {"user": "your", "agent": "the assistant's", "global": "the desk's"}
TOO_MANY_MESSAGES = "That was a lot of messages in a short time. Wait a minute, then ask again."


class BudgetExceeded(DeskError):
    code = ErrorCode.AI_BUDGET_EXCEEDED
    default_message = "Today's AI budget is used up. It resets at midnight UTC; the desk works as usual."

    def __init__(self, message: str | None = None, *, zone: str = "UTC") -> None:
        """With Retry-After (and `details.retryAfter`): the seconds until the ledger's day ends, midnight in `zone`."""
        moment = now()
        local = ZoneInfo(zone)
        midnight = datetime.combine(moment.astimezone(local).date() + timedelta(days=1), time(), tzinfo=local)
        retry_after = max(1, int((midnight - moment).total_seconds()))
        super().__init__(message, headers={"Retry-After": str(retry_after)}, details={"retryAfter": retry_after})


@dataclass(frozen=True)
class Reservation:
    """What a call may cost at most, already counted against `keys` (its day's scopes)."""

    keys: tuple[str, ...]
    usd: float


@dataclass(frozen=True)
class Admission:
    """A message let in; `stale` are the person's start counters of earlier minutes, dropped at the next charge."""

    stale: tuple[str, ...] = ()
    zone: str = "UTC"  # the desk's time zone as read: the turn's bills count the same day


async def ensure_indexes(db: AsyncDatabase) -> None:
    await db["agent_spend"].create_index([("day", ASCENDING)], name="day")
    await db["agent_spend"].create_index([("expiresAt", ASCENDING)], expireAfterSeconds=0, name="ttl")


def _dated(day: str) -> dict:
    """A ledger document's day (ISO) and when it is deleted: KEEP_SPEND after that day began (the TTL's date)."""
    began = datetime.combine(date.fromisoformat(day), time(), tzinfo=UTC)
    return {"day": day, "expiresAt": began + KEEP_SPEND}


def keys(*, user_id: str | None, agent: str, moment: datetime | None = None, zone: str = "UTC") -> list[str]:
    """A person's turn counts against them and the desk; an agent working on its own against itself and the desk.

    Not the copilot's `agent:` scope: one person reaching their own cap would block it for everyone.
    The day is `moment`'s (default: now) in `zone`, the desk's time zone (`desk_zone`).
    """
    day = day_of(moment or now(), zone)
    return [f"user:{user_id}:{day}" if user_id else f"agent:{agent}:{day}", f"global:{day}"]


def day_of(moment: datetime, zone: str) -> str:
    """The ledger's day (ISO) of `moment`, in `zone`."""
    return moment.astimezone(ZoneInfo(zone)).date().isoformat()


desk_zone = desk_zones.desk_zone  # the desk's time zone, whose days the ledger counts (read by the lists too)


async def set_desk_zone(db: AsyncDatabase, zone: str) -> None:
    """Name the desk's time zone (the triage policy, whenever its `timeZone` is stored)."""
    await db["agent_spend"].update_one({"_id": ZONE}, {"$set": {"zone": zone}}, upsert=True)


async def admit(db: AsyncDatabase, settings: Settings, *, user_id: str, agent: str, ip: str, clock: Clock) -> Admission:
    """Count one message start; BudgetExceeded past a daily cap, else RateLimited past the per-minute limit.

    The minute, and the day whose ledger is read, are the `clock`'s; the day in the desk's zone, which the
    admission carries for the turn's bills.
    """
    moment = clock.now()
    zone = await desk_zone(db)
    person_key, *shared_keys = keys(user_id=user_id, agent=agent, moment=moment, zone=zone)
    window = _window(moment, ip)
    person, shared = await asyncio.gather(
        db["agent_spend"].find_one_and_update(
            {"_id": person_key},
            # $set, not $setOnInsert: the embedded engine drops $setOnInsert on a find-and-modify upsert
            {"$inc": {f"starts.{window}": 1, "spentUsd": 0}, "$set": _dated(day_of(moment, zone))},
            upsert=True,
            return_document=ReturnDocument.AFTER,
        ),
        db["agent_spend"].find({"_id": {"$in": shared_keys}}).to_list(),
    )
    spent = {person_key: float(person.get("spentUsd", 0.0))} | {doc["_id"]: float(doc["spentUsd"]) for doc in shared}
    starts = person.get("starts", {})
    stale = tuple(name for name in starts if not name.startswith(f"{moment:%H%M}-"))
    try:
        _within_caps(settings, spent, [person_key, *shared_keys], zone)
        if starts[window] > settings.ai_rate_limit_max:
            window_end = moment.replace(second=0, microsecond=0) + timedelta(minutes=1)
            retry_after = max(1, int((window_end - moment).total_seconds()))
            raise RateLimited(TOO_MANY_MESSAGES, retry_after=retry_after)
    except DeskError:
        if stale:  # no charge follows a refusal to tidy them
            await db["agent_spend"].update_one({"_id": person_key}, {"$unset": _fields(stale)})
        raise
    return Admission(stale=stale, zone=zone)


async def charge(
    db: AsyncDatabase, *, user_id: str | None, agent: str, usd: float, tidy: Iterable[str] = (), zone: str = "UTC"
) -> None:
    """Add one call's cost to every scope it counts against (one round trip, each an atomic $inc), today in `zone`.

    `tidy` names start counters of earlier minutes to drop from the person's document on the way.
    """
    moment = now()
    day = day_of(moment, zone)
    ops = []
    for key in keys(user_id=user_id, agent=agent, moment=moment, zone=zone):
        update = {"$inc": {"spentUsd": usd}, "$setOnInsert": _dated(day)}
        if tidy and key.startswith("user:"):
            update["$unset"] = _fields(tidy)
        ops.append(UpdateOne({"_id": key}, update, upsert=True))
    await db["agent_spend"].bulk_write(ops, ordered=False)


async def reserve(
    db: AsyncDatabase,
    settings: Settings,
    *,
    user_id: str | None,
    agent: str,
    usd: float,
    zone: str = "UTC",
    settling: Iterable[tuple[Reservation, float]] = (),
) -> Reservation:
    """Count `usd` (the most a call can cost) against every scope before the call; BudgetExceeded, with nothing
    counted, when a scope's spend has reached its cap. Each scope is one conditional $inc, all in one round trip:
    of the calls that race for a scope's last cents, all but the one that crosses the cap are refused.

    `settling`: earlier calls' reservations and what those calls cost, settled in the same round trip (first:
    the caps are checked against what was spent, as far as the database runs a batch in order)."""
    moment = now()
    scopes, day = keys(user_id=user_id, agent=agent, moment=moment, zone=zone), day_of(moment, zone)
    caps = _caps(settings)
    ops = [op for held, cost in settling for op in _settling(held, cost)]
    first = len(ops)  # where this reservation's own ops begin
    for key in scopes:
        # every ledger document has `spentUsd` (a person's from their first message on, see `admit`). No `$or`
        # for a missing one: beside `_id`, the embedded engine matched it on any document of the collection.
        under = {"_id": key, "spentUsd": {"$lt": caps[key.split(":", 1)[0]]}}
        ops.append(UpdateOne(under, {"$inc": {"spentUsd": usd}, "$setOnInsert": _dated(day)}, upsert=True))
    try:  # at or over a cap the filter matches nothing, and the upsert's insert meets the existing key
        await asyncio.shield(db["agent_spend"].bulk_write(ops, ordered=False))
    except BulkWriteError as error:
        failures = error.details["writeErrors"]
        refused = {failure["index"] - first for failure in failures if failure["code"] == DUPLICATE_KEY}
        if len(refused) != len(failures) or min(refused) < 0:
            raise
        if counted := [key for n, key in enumerate(scopes) if n not in refused]:
            await asyncio.shield(_add(db, counted, -usd))
        raise BudgetExceeded(_exceeded(scopes[min(refused)].split(":", 1)[0], zone), zone=zone) from None
    return Reservation(tuple(scopes), usd)


async def settle(db: AsyncDatabase, reservation: Reservation, usd: float, *, tidy: Iterable[str] = ()) -> None:
    """The call's real cost in place of its reservation (0: the call was never made), on the reservation's day."""
    await _add(db, list(reservation.keys), usd - reservation.usd, tidy=tidy)


def _settling(reservation: Reservation, usd: float) -> list[UpdateOne]:
    return [UpdateOne({"_id": key}, {"$inc": {"spentUsd": usd - reservation.usd}}) for key in reservation.keys]


class Unsettled:
    """Calls made whose reservations are not settled yet: an agent that makes one call after another (the triage
    worker draining a backlog) settles each with its next reservation, in the same round trip, and the rest once
    it stops (`settle`). Until then a call counts at its most: the ledger is high, never low, and a process that
    dies first leaves it so, as for a call cut off."""

    def __init__(self) -> None:
        self.calls: list[tuple[Reservation, float]] = []

    def take(self) -> list[tuple[Reservation, float]]:
        calls, self.calls = self.calls, []
        return calls

    async def settle(self, db: AsyncDatabase) -> None:
        """Settle every call waiting (one round trip; none: none)."""
        if calls := self.take():
            await asyncio.shield(db["agent_spend"].bulk_write([op for c in calls for op in _settling(*c)]))


async def _add(db: AsyncDatabase, scopes: list[str], usd: float, *, tidy: Iterable[str] = ()) -> None:
    ops = []
    for key in scopes:
        update: dict = {"$inc": {"spentUsd": usd}}
        if tidy and key.startswith("user:"):
            update["$unset"] = _fields(tidy)
        ops.append(UpdateOne({"_id": key}, update))
    await db["agent_spend"].bulk_write(ops, ordered=False)


async def spent(db: AsyncDatabase, key: str) -> float:
    doc = await db["agent_spend"].find_one({"_id": key})
    return float(doc.get("spentUsd", 0.0)) if doc else 0.0


async def spent_by_day(db: AsyncDatabase, first_day: str) -> dict[str, dict[str, float]]:
    """Spend per UTC day (ISO) and shared scope (`agent:<name>`, `global`) from `first_day` on; not people's own."""
    found: dict[str, dict[str, float]] = {}
    async for doc in db["agent_spend"].find({"day": {"$gte": first_day}}, {"spentUsd": 1, "day": 1}):
        scope = doc["_id"].rsplit(":", 1)[0]
        if not scope.startswith("user:"):  # a person's spend is theirs, not a scope of the desk's
            found.setdefault(doc["day"], {})[scope] = float(doc.get("spentUsd", 0.0))
    return found


async def check(db: AsyncDatabase, settings: Settings, *, user_id: str | None, agent: str, zone: str = "UTC") -> None:
    """BudgetExceeded when today's spend (today in `zone`) reached the user's, the agent's or the global cap."""
    scopes = keys(user_id=user_id, agent=agent, zone=zone)
    docs = await db["agent_spend"].find({"_id": {"$in": scopes}}).to_list()
    found = {doc["_id"]: float(doc.get("spentUsd", 0.0)) for doc in docs}
    _within_caps(settings, found, scopes, zone)


class Meter:
    """One run's model calls billed: to the ledger's scopes (`keys`) at once, to the run's record with its next write.

    Every bill is shielded: a call made is a call paid, even when the listener leaves meanwhile.
    """

    def __init__(
        self,
        db: AsyncDatabase,
        *,
        cost: Callable[[Usage], float],
        user_id: str | None,
        agent: str,
        tidy: Iterable[str] = (),
        zone: str = "UTC",
        unsettled: Unsettled | None = None,
    ) -> None:
        """`unsettled`: where a reserved call's settling waits for the next reservation (None: settled at once)."""
        self.db, self.cost, self.user_id, self.agent, self.zone = db, cost, user_id, agent, zone
        self.unsettled = unsettled
        self.tidy = tuple(tidy)  # the person's stale start counters, dropped with the first charge
        self.unrecorded: Usage | None = None  # the last call, charged to the ledger but not yet to its run
        self.reservation: Reservation | None = None  # the next call's, counted before it is made

    async def reserve(self, settings: Settings, most: Usage) -> None:
        """Count the next call at the most it can cost (`most`) before making it; BudgetExceeded past a cap."""
        usd = self.cost(most)
        settling = self.unsettled.take() if self.unsettled is not None else []
        self.reservation = await reserve(
            self.db, settings, user_id=self.user_id, agent=self.agent, usd=usd, zone=self.zone, settling=settling
        )

    async def release(self) -> None:
        """The reserved call was never made: its reservation is given back."""
        held, self.reservation = self.reservation, None
        if held is not None:
            await asyncio.shield(settle(self.db, held, 0.0))

    async def charge(self, usage: Usage) -> None:
        """The spend ledger, for one model call (the first also drops the person's stale rate counters); a reserved
        call settles its reservation to what it cost."""
        tidy, self.tidy = self.tidy, ()
        usd = self.cost(usage)
        held, self.reservation = self.reservation, None
        if held is not None and self.unsettled is not None and not tidy:
            self.unsettled.calls.append((held, usd))  # settled with the next reservation
            return
        if held is not None:
            await asyncio.shield(settle(self.db, held, usd, tidy=tidy))
            return
        bill = charge(self.db, user_id=self.user_id, agent=self.agent, usd=usd, tidy=tidy, zone=self.zone)
        await asyncio.shield(bill)

    def charge_for_later(self, usage: Usage) -> Awaitable[None]:
        """The ledger now; the run with its next write (`record_pending`, or `take_pending` for its end)."""
        self.unrecorded = usage  # before anything is awaited: a cancel during the charge must not lose it
        return asyncio.shield(self.charge(usage))

    async def bill(self, usage: Usage, *, run_id: ObjectId | None) -> None:
        """One model call, to the ledger and to its run (`run_id`: None while the run is not stored)."""
        writes = [self.charge(usage)]
        if run_id is not None:
            writes.append(agent_runs.record_usage(self.db, run_id, self.usage(usage)))
        await asyncio.shield(together(*writes))

    async def record_pending(self, *, run_id: ObjectId | None) -> None:
        """Add the call already charged to the ledger to its run."""
        usage, self.unrecorded = self.unrecorded, None
        if usage is not None and run_id is not None:
            await asyncio.shield(agent_runs.record_usage(self.db, run_id, self.usage(usage)))

    def take_pending(self) -> dict | None:
        """The call charged but not yet recorded on its run, as `agent_runs.finish_run` adds it; it is then taken."""
        usage, self.unrecorded = self.unrecorded, None
        return self.usage(usage) if usage is not None else None

    def usage(self, usage: Usage) -> dict:
        return {"inputTokens": usage.input_tokens, "outputTokens": usage.output_tokens, "costUsd": self.cost(usage)}


def _caps(settings: Settings) -> dict[str, float]:
    return {
        "user": settings.ai_daily_spend_usd,
        "agent": settings.agent_daily_spend_usd,
        "global": settings.ai_global_daily_spend_usd,
    }


def _within_caps(settings: Settings, spent: dict[str, float], scopes: list[str], zone: str) -> None:
    caps = _caps(settings)
    for key in scopes:
        scope = key.split(":", 1)[0]
        if spent.get(key, 0.0) >= caps[scope]:
            raise BudgetExceeded(_exceeded(scope, zone), zone=zone)


def _exceeded(scope: str, zone: str) -> str:
    return (
        f"Today's AI budget ({CAP_OWNERS[scope]} daily limit) is used up. It resets at midnight {zone}; "
        "the desk works as usual."
    )


def _window(moment: datetime, ip: str) -> str:
    """This calendar minute at this address; hashed: no dots (a path separator) and no address stored."""
    return f"{moment:%H%M}-{hashlib.blake2s(ip.encode(), digest_size=6).hexdigest()}"


def _fields(windows: Iterable[str]) -> dict[str, str]:
    return {f"starts.{window}": "" for window in windows}
