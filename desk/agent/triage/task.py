"""The triage agent's tasks (AGT-2, AGT-5, AGT-9): the pass over a new order's job, and the reconcile pass.

`task(settings)` is the queue's `Function` for `work_order.created` jobs: desk/tasks.py hands it to the
worker, which claims, leases, fences, retries and gives up (desk/jobs/). Before every claim it re-reads
the desk-wide kill switch, the triage agent's own switch, the working hours and the spend caps: while
any says no, jobs wait, pending. With AI_ENABLED=false nothing is claimed and no model is called.
What a pass came to is the triage's business (desk/agent/triage/run.py); here it becomes what the
queue does with the job.
"""

import asyncio
import logging
from datetime import timedelta
from typing import assert_never

from bson import ObjectId
from pymongo.asynchronous.database import AsyncDatabase

from desk.actors import SYSTEM_TRIAGE
from desk.agent.core import budget, switch
from desk.agent.core.provider import Provider
from desk.agent.triage import policy
from desk.agent.triage import repository as triage_repo
from desk.agent.triage.run import Outcome, triage
from desk.config import Settings
from desk.jobs import queue
from desk.jobs.table import Context, Done, Function, Job, Later, Result, Retry, Skipped
from desk.jobs.worker import Worker
from desk.schema import now
from desk.work_orders import outbox as order_jobs
from desk.work_orders import triage_door as work_orders
from desk.work_orders.models import CLOSED

log = logging.getLogger("desk.triage")
RECONCILE_BATCH = 500


def task(settings: Settings, *, provider: Provider | None = None) -> Function:
    """The triage pass as the queue runs it; `provider` (built on first use by default) is the model's client."""
    providers = [provider] if provider else []  # one connection pool per worker process, made when first needed

    async def run(ctx: Context, job: Job) -> Result:
        if not providers:
            providers.append(Provider.from_settings(ctx.settings))
        return await triage_pass(ctx, job, providers[0])

    told: list[bool] = []  # the policy's word over the environment, said at this worker's first look

    async def ready(ctx: Context) -> bool:
        return await may_claim(ctx, told=told)

    lease = timedelta(milliseconds=settings.agent_lease_ms)
    return Function(
        order_jobs.CREATED,
        run,
        max_tries=settings.agent_max_attempts,
        lease=lease,
        ready=ready,
        desk_concurrency=settings.agent_concurrency,  # passes at once across every worker process
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


async def may_claim(ctx: Context, *, told: list[bool] | None = None) -> bool:
    """Whether a pass may start now: AI on (the environment, then the admins' switch), the policy enabled and in its
    working hours, the spend caps not reached (today in the policy's time zone). The pass's spend check before its
    claim; the pass reserves its call's.

    `told` empty: this worker's first look, which also says which environment keys the stored policy overrules
    (from the policy read here, so the notice costs no command of its own)."""
    if not ctx.settings.ai_enabled:
        return False  # the hard kill (AGT-9): no claim, no model call
    config, desk = await asyncio.gather(
        policy.current(ctx.db, ctx.settings),
        switch.read(ctx.db),  # fresh: a worker is another process than the admin who flips it
    )
    if told is not None and not told:
        told.append(True)
        say_policy_wins(config, ctx.settings)
    if not desk.on or not config["enabled"] or not policy.in_working_hours(config, now()):
        return False  # jobs wait, pending
    try:
        await budget.check(ctx.db, ctx.settings, user_id=None, agent=policy.AGENT, zone=policy.zone(config))
    except budget.BudgetExceeded:
        return False  # over a spend cap: jobs wait for the next day
    return True


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


async def triage_pass(ctx: Context, job: Job, provider: Provider) -> Result:
    """One pass over the job's order, and what the queue does with the job after it."""
    outcome = await triage(
        db=ctx.db,
        settings=ctx.settings,
        provider=provider,
        order_id=str(job.key),
        still_ours=job.still_ours,
        event_id=job.id,
    )
    return _as_result(outcome)


def _as_result(outcome: Outcome) -> Result:
    match outcome.kind:
        case "suggested" | "applied" | "lost":
            return Done()  # lost: someone else's pass stored it; the fenced write is a no-op if not ours
        case "skipped":
            return Skipped(outcome.error)
        case "disabled" | "over_budget":
            return Later()  # not the job's fault: it waits, its attempt not counted
        case "retry":
            return Retry(outcome.error or "unknown")
        case _:
            assert_never(outcome.kind)


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
