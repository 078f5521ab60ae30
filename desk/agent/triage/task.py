"""The triage agent's tasks (AGT-2, AGT-5, AGT-9): the pass over a new order's job, and the reconcile pass.

`task(settings)` is the queue's `Function` for `work_order.created` jobs: desk/tasks.py hands it to the
worker, which claims, leases, fences, retries and gives up (desk/jobs/). Before a claim it reads the
desk-wide kill switch and the triage agent's own switch (a look that stands for the same poll's next claims
for `LOOK_KEPT_SECONDS`), checks the working hours, and asks the provider's breaker (an outage: only its
probe is claimed): while any says no, jobs wait, pending; the spend caps are the pass's (its reservation).
With AI_ENABLED=false nothing is claimed and no model is called. What a pass came to is the triage's
business (desk/agent/triage/run.py); here it becomes what the queue does with the job.
"""

import asyncio
import logging
from datetime import timedelta
from typing import assert_never

from bson import ObjectId
from pymongo.asynchronous.database import AsyncDatabase

from desk.actors import SYSTEM_TRIAGE
from desk.agent.core import budget, switch
from desk.agent.core.breaker import Breaker
from desk.agent.core.provider import Provider
from desk.agent.triage import policy
from desk.agent.triage import repository as triage_repo
from desk.agent.triage.run import Outcome, triage
from desk.clock import SYSTEM_CLOCK, Clock
from desk.config import Settings
from desk.jobs import queue
from desk.jobs.table import Context, Done, Failed, Function, Job, Later, Result, Retry, Skipped
from desk.jobs.worker import Worker
from desk.schema import now
from desk.work_orders import outbox as order_jobs
from desk.work_orders import triage_door as work_orders
from desk.work_orders.models import CLOSED

log = logging.getLogger("desk.triage")
RECONCILE_BATCH = 500
FRESH_LOOK_SECONDS = 1.0  # how old the look before a claim may be to stand for the pass's own read
# How long a look stands for the next claims of the same poll (a backlog drains one claim after another): a flip of
# the kill switch in another process is seen by the claims at most this late. What such a claim starts is cut off
# by the pass's watcher, and its answer is refused by the switch read before the store, as for any pass.
LOOK_KEPT_SECONDS = 0.25
INVALID_ANSWER_TRIES = 2  # an invalid answer is tried once more, then given up (issue 41)
RATE_LIMITED = "status 429"  # the provider's failure kind when it asks the desk to slow down
# The dead letter of an order the provider failed on AGENT_MAX_ATTEMPTS times (transiently) while it answered others
FAILS_ON_THIS_ORDER = "provider_fails_on_order"


def task(settings: Settings, *, provider: Provider | None = None, clock: Clock = SYSTEM_CLOCK) -> Function:
    """The triage pass as the queue runs it; `provider` (built on first use by default) is the model's client.

    While the desk's provider breaker is open (desk/agent/core/breaker.py) no pass is claimed but its probe.
    """
    providers = [provider] if provider else []  # one connection pool per worker process, made when first needed
    breaker = Breaker(settings, clock=clock)
    unsettled = budget.Unsettled()  # each pass's call settled with the next pass's reservation, or at the poll's end

    told: list[bool] = []  # the policy's word over the environment, said at this worker's first look
    looked: list[tuple[float, dict]] = []  # the last look before a claim: when (monotonic seconds), the policy read
    kept: list[tuple[object, float]] = []  # the poll whose claims it stands for, until when (monotonic seconds)

    async def run(ctx: Context, job: Job) -> Result:
        if not providers:
            providers.append(Provider.from_settings(ctx.settings))
        # the look before this claim, a moment ago, is the pass's read before its model call (AGT-9): not again
        fresh = looked and clock.monotonic() - looked[0][0] < FRESH_LOOK_SECONDS
        config = looked[0][1] if fresh else None
        return await triage_pass(ctx, job, providers[0], breaker, config=config, unsettled=unsettled)

    async def idle(ctx: Context) -> None:
        await unsettled.settle(ctx.db)

    async def ready(ctx: Context) -> bool:
        at = clock.monotonic()
        if kept and kept[0][0] is ctx.poll and at < kept[0][1] and switch.known().on:
            config = looked[0][1] if policy.in_working_hours(looked[0][1], now()) else None  # a flip here: known
        else:
            config = await may_claim(ctx, told=told)
            kept.clear()
            if config is not None:
                looked[:] = [(at, config)]
                kept.append((ctx.poll, at + LOOK_KEPT_SECONDS))
        if config is None:
            return False
        return await breaker.allows(ctx.db)  # the breaker last: a probe is taken only to be used

    lease = timedelta(milliseconds=settings.agent_lease_ms)
    return Function(
        order_jobs.CREATED,
        run,
        max_tries=settings.agent_max_attempts,
        lease=lease,
        ready=ready,
        desk_concurrency=settings.agent_concurrency,  # passes at once across every worker process
        idle=idle,
    )


async def process_due(
    db: AsyncDatabase, settings: Settings, *, provider: Provider | None = None, stop: asyncio.Event | None = None
) -> int:
    """A worker with the triage task alone, over what is due (burst mode: the tests' and the benchmark's way in);
    returns how many jobs it claimed."""
    worker = Worker(functions=[task(settings, provider=provider)], **limits(settings))
    return await worker.run_due(Context(db=db, settings=settings, stopping=stop or asyncio.Event()))


def limits(settings: Settings) -> dict[str, float]:
    """The worker's limits the triage settings name: passes at once (AGENT_CONCURRENCY), and the poll's delay."""
    return {"concurrency": settings.agent_concurrency, "poll_delay": settings.agent_poll_interval_ms / 1000}


async def may_claim(ctx: Context, *, told: list[bool] | None = None) -> dict | None:
    """The policy, when a pass may start now: AI on (the environment, then the admins' switch, read with the policy
    in one command), the policy enabled and in its working hours; None: not now. The spend caps are the pass's:
    it reserves its call's cost before making it, and a cap reached makes the job wait (`Later`).

    `told` empty: this worker's first look, which also says which environment keys the stored policy overrules
    (from the policy read here, so the notice costs no command of its own)."""
    if not ctx.settings.ai_enabled:
        return None  # the hard kill (AGT-9): no claim, no model call
    # fresh: a worker is another process than the admin who flips the switch
    config, desk = await policy.current_with_switch(ctx.db, ctx.settings)
    if told is not None and not told:
        told.append(True)
        say_policy_wins(config, ctx.settings)
    if not desk.on or not config["enabled"] or not policy.in_working_hours(config, now()):
        return None  # jobs wait, pending
    return config


def say_policy_wins(config: dict, settings: Settings) -> None:
    """The environment keys the stored policy overrules, by name, in the log (values are the admins' business).

    The environment seeds the policy once, at first start; from then on it is the admins', and a changed
    AGENT_TRIAGE_MODE (say) would otherwise seem to be ignored without a word.
    """
    if differ := policy.overruled(config, settings):
        log.info(
            "triage policy: the stored policy wins over the environment for %s (change it on the agents page)",
            ", ".join(differ),
        )


async def triage_pass(
    ctx: Context,
    job: Job,
    provider: Provider,
    breaker: Breaker,
    *,
    config: dict | None = None,
    unsettled: budget.Unsettled | None = None,
) -> Result:
    """One pass over the job's order, and what the queue does with the job after it; the breaker hears how the
    provider did. `config`: the policy as read a moment ago (None: the pass reads it); `unsettled`: where its
    call's settling waits for the next pass's reservation (None: settled at once)."""
    outcome = await triage(
        db=ctx.db,
        settings=ctx.settings,
        provider=provider,
        order_id=str(job.key),
        still_ours=job.still_ours,
        event_id=job.id,
        config=config,
        unsettled=unsettled,
    )
    failure, outage = outcome.failure, False
    if failure is not None and failure.transient:
        outage = await breaker.failed(ctx.db, error=failure.kind, retry_after=failure.retry_after)
    elif failure is not None or outcome.kind in ("suggested", "applied", "retry"):
        await breaker.answered(ctx.db)  # it answered, or refused: it is up
    return _as_result(outcome, job, outage=outage)


def _as_result(outcome: Outcome, job: Job, *, outage: bool = False) -> Result:
    match outcome.kind:
        case "lease_lost":
            # the job, or its desk-wide slot, is another worker's now: back in line (a fenced write, a no-op when the
            # job is not ours); a pass that holds it later finishes what this one stored
            return Later()
        case "suggested" | "applied" | "duplicate":
            return Done()  # duplicate: an earlier pass stored this event's suggestion and finished it
        case "skipped":
            return Skipped(outcome.error)
        case "disabled" | "over_budget":
            return Later()  # not the job's fault: it waits, its attempt not counted
        case "retry":
            return _after_failure(outcome, job, outage=outage)
        case _:
            assert_never(outcome.kind)


def _after_failure(outcome: Outcome, job: Job, *, outage: bool) -> Result:
    """A transient failure waits, uncounted (a strike unless the provider is down or slowing the desk down); a
    refusal, or a second invalid answer, is given up at once; else a retry."""
    error, failure = outcome.error or "unknown", outcome.failure
    if failure is not None and failure.transient:  # it waits at least as long as the provider asked
        after = timedelta(seconds=failure.retry_after) if failure.retry_after else None
        # The breaker open: an outage, nobody's fault. A 429: the desk's pace, not the order. Else the provider is
        # up as far as the desk knows, and this order may be one it fails on every time (a poison order): a strike.
        desk_wide = outage or failure.kind == RATE_LIMITED
        return Later(error, after=after, strike=None if desk_wide else FAILS_ON_THIS_ORDER)
    if failure is not None:
        return Failed(error)  # the provider refused the request as it stands: the same request would fail again
    if error == "invalid_output" and job.attempts >= INVALID_ANSWER_TRIES:
        return Failed(error)  # a model that answered badly twice will not do better a third time
    return Retry(error)


async def reconcile_job(ctx: Context) -> None:
    """The reconcile job: jobs for orders that have none (a crash between the order's insert and its job's)."""
    if emitted := await reconcile(ctx.db, ctx.settings):
        log.info("reconcile: %d work orders had no outbox event; emitted", emitted)


async def reconcile(db: AsyncDatabase, settings: Settings) -> int:
    """Enqueue jobs for open orders older than AGENT_RECONCILE_AFTER_MS and younger than AGENT_RECONCILE_MAX_AGE
    with neither a job nor a suggestion.

    Walks the orders in creation order from where the last pass stopped (a watermark), a batch at a
    time, so a pass costs the same on a desk of any size; returns how many jobs it enqueued. Orders
    older than the max age are history: never reconciled (nor paid for), however far behind the mark is.
    """
    moment = now()
    cutoff = moment - timedelta(milliseconds=settings.agent_reconcile_after_ms)
    oldest = (moment - settings.agent_reconcile_max_age, ObjectId("0" * 24))
    emitted = 0
    while True:
        mark = await triage_repo.reconciled_until(db)
        after = max((mark["createdAt"], mark["orderId"]), oldest) if mark is not None else oldest
        orders = await work_orders.triage_backlog(
            db=db, actor=SYSTEM_TRIAGE, created_by=cutoff, after=after, limit=RECONCILE_BATCH
        )
        if not orders:
            return emitted
        ids: list[ObjectId] = [order["_id"] for order in orders]
        known = await queue.enqueued(db, order_jobs.CREATED, ids) | await triage_repo.triaged(db, ids)
        for order in orders:
            if order["_id"] in known or order["status"] in CLOSED:  # a closed order is never triaged
                continue
            if await order_jobs.emit_created(db, order):
                emitted += 1
        await triage_repo.mark_reconciled(db, orders[-1]["createdAt"], orders[-1]["_id"])
        if len(orders) < RECONCILE_BATCH:
            return emitted
