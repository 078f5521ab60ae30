"""A manual triage run (AGT-8): an admin triages one order now, as the System Actor under the policy.

It takes the order's event as a worker claims it, so a manual run and the worker never triage one order at
once: one pass, one bill, one suggestion. It also takes one of the triage's desk-wide slots (desk/jobs/slots.py),
as a worker's pass does, so AGENT_CONCURRENCY holds for manual runs too. Decision: with every slot held, the run
is refused at once (429 RATE_LIMITED, with a Retry-After), not queued: the admin's request would otherwise wait
through other passes' model calls, and the button can simply be pressed again.
"""

import asyncio
from contextlib import asynccontextmanager
from datetime import timedelta

from bson import ObjectId
from pymongo.asynchronous.database import AsyncDatabase

from desk.access import require_admin, require_ai_on_desk
from desk.actors import Actor
from desk.agent.core import budget, switch
from desk.agent.core.provider import Provider
from desk.agent.triage import policy
from desk.agent.triage.models import ManualRunOut, TriageSuggestionRead
from desk.agent.triage.run import triage
from desk.config import Settings
from desk.errors import Conflict, NotFound, RateLimited
from desk.jobs import queue as outbox
from desk.jobs import slots
from desk.schema import now
from desk.work_orders import service as work_orders
from desk.work_orders.outbox import CREATED


async def manual_run(
    *, db: AsyncDatabase, settings: Settings, provider: Provider, actor: Actor, order_id: str
) -> ManualRunOut:
    """Triage one order now, as the System Actor under the policy, billed like any pass; audited as the admin's.

    It takes the order's event like a worker claims it: while a worker holds it, Conflict; meanwhile no worker can
    claim it, so one order gets one pass, one bill, one suggestion.
    """
    require_admin(actor, "see or run the agents")
    require_ai_on_desk(settings, await switch.read(db))
    config = await policy.current(db, settings)
    if not config["enabled"]:
        raise Conflict("The triage agent is turned off. Turn it on to run it.")
    await budget.check(db, settings, user_id=None, agent=policy.AGENT, zone=policy.zone(config))
    async with _event_held(db, settings, actor=actor, order_id=order_id) as (job, still_ours, settled):
        outcome = await triage(
            db=db, settings=settings, provider=provider, order_id=order_id, still_ours=still_ours, triggered_by=actor.id
        )
        # lease_lost: someone else holds the event now (settling it is a fenced no-op, as giving it back would be)
        settled.append(outcome.kind in ("suggested", "applied", "duplicate", "lease_lost"))
    if outcome.kind == "skipped" and outcome.error == "order_deleted":
        raise NotFound("No such work order.")
    kind = {"retry": "failed", "disabled": "disabled", "over_budget": "over_budget"}.get(outcome.kind, outcome.kind)
    run_id = str(outcome.run_id) if outcome.run_id else None
    after = {"workOrderId": order_id, "runId": run_id, "outcome": kind, "error": outcome.error, "eventId": str(job)}
    await policy.record(db, agent=policy.AGENT, actor_id=actor.id, action="manual_run", after=after)
    suggestion = TriageSuggestionRead.model_validate(outcome.suggestion) if outcome.suggestion else None
    return ManualRunOut(outcome=kind, run_id=run_id, error=outcome.error, suggestion=suggestion)


SLOTS_BUSY = "The triage agent is running as many passes at once as this desk allows (AGENT_CONCURRENCY)"
SLOT_WAIT_SECONDS = 5  # about one pass: when a slot is likely free again


@asynccontextmanager
async def _event_held(db: AsyncDatabase, settings: Settings, *, actor: Actor, order_id: str):
    """The order's event, taken for a manual pass (made if it has none) with a desk-wide slot, both renewed through
    `still_ours`; afterwards the event is done if the pass stored its suggestion (the block appends True to
    `settled`), else given back as it was, and the slot is let go."""
    order = await work_orders.get_or_raise(db=db, actor=actor, order_id=order_id)
    lease = timedelta(milliseconds=settings.agent_lease_ms)
    owner = f"manual:{actor.id}"
    slot = await slots.take(db, CREATED, settings.agent_concurrency, owner=owner, lease=lease, at=now())
    if slot is None:
        raise RateLimited(SLOTS_BUSY, retry_after=SLOT_WAIT_SECONDS)
    try:
        held = await outbox.take(db, CREATED, ObjectId(order.id), owner=owner, lease=lease, born=order.created_at)
        if held is None:
            raise Conflict(
                "The triage agent is working on this work order right now; its suggestion will show shortly."
            )
        before, job = held

        async def still_ours() -> bool:
            ours, kept = await asyncio.gather(outbox.renew(db, job, lease), slots.renew(db, slot, lease, at=now()))
            return ours and kept  # a slot that lapsed is a worker's now: the pass stops like a lost lease

        settled: list[bool] = []
        try:
            yield job["_id"], still_ours, settled
        finally:
            done = outbox.settle(db, job, "done") if settled and settled[0] else outbox.hand_back(db, job, before)
            await asyncio.shield(done)  # a request that went away still lets go of the event
    finally:
        await asyncio.shield(slots.release(db, slot))
