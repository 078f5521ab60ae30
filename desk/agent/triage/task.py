"""The triage worker's jobs (AGT-2, AGT-5, AGT-9): poll the outbox, and reconcile what it missed.

`triage_poll` claims one event at a time while a slot is free (at most AGENT_CONCURRENCY passes in
flight per process, however many polls overlap: the start-up run and the scheduler's first tick do),
refilling a slot as soon as its pass ends, until nothing is due or the worker stops; it waits for
its passes before it returns, so a stopping worker finishes them before the database closes. Before
every claim it re-reads the kill switch, the working hours and the spend caps: while any says no,
events wait, pending. With AI_ENABLED=false nothing is claimed and no model is called. `process_due`
without a stop is the same loop (burst mode: the tests' and the benchmark's way in).
"""

import asyncio
import logging
import os
import random
import socket
import uuid
from datetime import timedelta
from typing import Any

from bson import ObjectId
from pymongo.asynchronous.database import AsyncDatabase

from desk.actors import SYSTEM_TRIAGE
from desk.agent.core import budget
from desk.agent.core.provider import Provider
from desk.agent.triage import policy
from desk.agent.triage import repository as triage_repo
from desk.agent.triage.run import Outcome, triage
from desk.config import Settings
from desk.logs import failure
from desk.outbox import repository as outbox
from desk.schema import now
from desk.work_orders import triage_door as work_orders

log = logging.getLogger("desk.triage")
BACKOFF_BASE_SECONDS = 2.0  # the first retry waits 1-2 s, then 2-4 s, 4-8 s ... (full jitter on the upper half)
BACKOFF_MAX_SECONDS = 600.0
RECONCILE_BATCH = 500
OWNER = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"  # this process, as leases name it
_provider: Provider | None = None
_busy = 0  # this process's slots taken: passes in flight, and claims on their way to becoming one


async def triage_poll(ctx: Any) -> None:
    """The poll job: triage what is due, a slot refilled as soon as a pass ends, until none is due or we stop."""
    await process_due(ctx.db, ctx.settings, stop=ctx.stopping)


async def reconcile_job(ctx: Any) -> None:
    """The reconcile job: events for orders that have none (a crash between the order's insert and its event's)."""
    if emitted := await reconcile(ctx.db, ctx.settings):
        log.info("reconcile: %d work orders had no outbox event; emitted", emitted)


async def process_due(
    db: AsyncDatabase, settings: Settings, *, provider: Provider | None = None, stop: asyncio.Event | None = None
) -> int:
    """Claim and triage due events, at most AGENT_CONCURRENCY at once, until none is due (or `stop` is set);
    waits for every pass it started; returns how many events it claimed."""
    if not settings.ai_enabled:
        return 0  # the hard kill (AGT-9): no claim, no model call
    provider = provider or _shared_provider(settings)
    recheck = settings.agent_poll_interval_ms / 1000
    in_flight: set[asyncio.Task] = set()
    claimed = 0
    try:
        while True:
            event = None
            if not (stop is not None and stop.is_set()) and _take_slot(settings):
                try:
                    event = await _claim(db, settings)
                finally:
                    if event is None:
                        _free_slot()
            if event is not None:
                claimed += 1
                task = asyncio.create_task(_process(db, settings, provider, event))
                task.add_done_callback(_free_slot)
                in_flight.add(task)
                continue
            if not in_flight:
                return claimed
            # A slot is refilled as soon as its pass ends: a run that stopped claiming after a fixed window
            # left the worker idle until the scheduler's next tick (skipped while it ran: up to two intervals).
            # With a slot free and nothing due yet, look again after a poll interval.
            _, in_flight = await asyncio.wait(in_flight, timeout=recheck, return_when=asyncio.FIRST_COMPLETED)
    finally:
        if in_flight:  # cancelled (the worker stops hard): the passes stop too; their leases lapse
            for task in in_flight:
                task.cancel()
            await asyncio.gather(*in_flight, return_exceptions=True)


def _take_slot(settings: Settings) -> bool:
    """One of the process's AGENT_CONCURRENCY slots, taken before the claim (no await in between), or False."""
    global _busy  # noqa: PLW0603 - the limit is the process's, not one poll's
    if _busy >= settings.agent_concurrency:
        return False
    _busy += 1
    return True


def _free_slot(_: object = None) -> None:
    global _busy  # noqa: PLW0603
    _busy -= 1


async def _claim(db: AsyncDatabase, settings: Settings) -> dict | None:
    """One event, if the policy read now lets triage run at all, and the spend caps have room (read side by side).

    The pass's one spend check: `triage` does not check again (a manual run checks before it starts).
    """
    config, spend = await asyncio.gather(
        policy.current(db, settings),
        budget.check(db, settings, user_id=None, agent=policy.AGENT),
        return_exceptions=True,
    )
    if isinstance(config, BaseException):
        raise config
    if not config["enabled"] or not policy.in_working_hours(config, now()):
        return None  # events wait, pending
    if isinstance(spend, budget.BudgetExceeded):
        return None  # over a spend cap: events wait for the next day
    if isinstance(spend, BaseException):
        raise spend
    event = await outbox.claim(db, owner=OWNER, lease=timedelta(milliseconds=settings.agent_lease_ms))
    if event is not None and event["attempts"] > settings.agent_max_attempts:
        # its leases kept lapsing (a worker dying on it each time): a dead letter, not another try
        await outbox.settle(db, event, "failed", error=event.get("lastError") or "lease_expired")
        return await _claim(db, settings)
    return event


async def _process(db: AsyncDatabase, settings: Settings, provider: Provider, event: dict) -> None:
    lease = timedelta(milliseconds=settings.agent_lease_ms)

    async def still_ours() -> bool:
        return await outbox.renew(db, event, lease)

    try:
        outcome = await triage(
            db=db,
            settings=settings,
            provider=provider,
            order_id=str(event["payloadRef"]),
            still_ours=still_ours,
            event_id=event["_id"],
        )
    except Exception as error:  # a database hiccup or a bug: a failed attempt, retried like any other
        log.error("triage pass failed (%s)", failure(error))  # never the message: it may quote text
        outcome = Outcome("retry", error="internal")
    await _settle(db, settings, event, outcome)


async def _settle(db: AsyncDatabase, settings: Settings, event: dict, outcome: Outcome) -> None:
    """Write what the pass came to, fenced: a worker that lost the event writes nothing."""
    match outcome.kind:
        case "suggested" | "applied" | "lost":
            await outbox.settle(db, event, "done")  # lost: someone else's pass stored it; no-op if not ours
        case "skipped":
            await outbox.settle(db, event, "skipped", error=outcome.error)
        case "disabled" | "over_budget":
            await outbox.put_back(db, event)  # not the event's fault: it waits, its attempt not counted
        case "retry":
            error = outcome.error or "unknown"
            if event["attempts"] >= settings.agent_max_attempts:
                await outbox.settle(db, event, "failed", error=error)
                log.warning("triage gave up on an event after %d attempts (%s)", event["attempts"], error)
            else:
                await outbox.retry_at(db, event, now() + timedelta(seconds=backoff(event["attempts"])), error=error)


def backoff(attempts: int) -> float:
    """Seconds before the next try: exponential in the attempts made, with jitter so workers spread out."""
    ceiling = min(BACKOFF_MAX_SECONDS, BACKOFF_BASE_SECONDS * 2 ** max(0, attempts - 1))
    return ceiling / 2 + random.random() * ceiling / 2  # noqa: S311 - jitter, not a secret


async def reconcile(db: AsyncDatabase, settings: Settings) -> int:
    """Emit events for orders older than AGENT_RECONCILE_AFTER_MS with neither an event nor a suggestion.

    Walks the orders in creation order from where the last pass stopped (a watermark), a batch at a
    time, so a pass costs the same on a desk of any size; returns how many events it emitted.
    """
    cutoff = now() - timedelta(milliseconds=settings.agent_reconcile_after_ms)
    emitted = 0
    while True:
        mark = await outbox.reconciled_until(db)
        after = (mark["createdAt"], mark["orderId"]) if mark is not None else None
        orders = await work_orders.triage_backlog(
            db=db, actor=SYSTEM_TRIAGE, created_by=cutoff, after=after, limit=RECONCILE_BATCH
        )
        if not orders:
            return emitted
        ids: list[ObjectId] = [order["_id"] for order in orders]
        known = await outbox.emitted(db, ids) | await triage_repo.triaged(db, ids)
        for order in orders:
            if order["_id"] not in known and await outbox.emit_created(db, order):
                emitted += 1
        await outbox.mark_reconciled(db, orders[-1]["createdAt"], orders[-1]["_id"])
        if len(orders) < RECONCILE_BATCH:
            return emitted


def _shared_provider(settings: Settings) -> Provider:
    """This process's provider client, built on first use."""
    global _provider  # noqa: PLW0603 - one connection pool per worker process
    if _provider is None:
        _provider = Provider.from_settings(settings)
    return _provider


def use_provider(provider: Provider | None) -> None:
    """Replace the worker's provider (tests point it at the scripted fake)."""
    global _provider  # noqa: PLW0603
    _provider = provider
