"""The worker's table: the tasks the queue runs and the jobs on a clock, assembled here.

This is the worker's composition root, as main.py is the web app's: desk/jobs/ runs what it is handed
and imports none of it (an import-linter contract checks that). It lives in desk/, not in main.py,
because `desk worker` must start without the web app's imports (NiceGUI, the pages).
"""

import logging

from desk.agent.copilot.sweeper import sweep
from desk.agent.core.provider import Provider
from desk.agent.triage import task as triage
from desk.attachments import pending, thumbnails
from desk.config import Settings
from desk.heartbeat import BEAT_SECONDS, beat, worker_name
from desk.jobs.table import Context, CronJob
from desk.jobs.worker import Worker
from desk.notifications import mail, mail_queue, outbox

log = logging.getLogger("desk.worker")


def worker(settings: Settings, *, burst: bool = False, provider: Provider | None = None) -> Worker:
    """The desk's worker: the triage pass per new order; the heartbeat, the sweeper and the reconcile pass on a clock.

    Mail delivery (desk/notifications/mail_queue.py) is here too, the notifications' fan-outs a writer could not
    finish (desk/notifications/outbox.py), thumbnails (desk/attachments/thumbnails.py) and the sweep of uploads
    that died half-way (desk/attachments/pending.py), each from its own package. `provider`: the model's client
    (tests hand theirs); by default the triage task builds one when it first needs it.
    """
    return Worker(
        functions=[
            triage.task(settings, provider=provider),
            *mail_queue.tasks(),
            *outbox.tasks(),
            *thumbnails.tasks(),
        ],
        cron_jobs=[
            CronJob("heartbeat", heartbeat, BEAT_SECONDS),
            CronJob("mail_idle", mail_queue.close_idle, mail.IDLE_SECONDS),
            CronJob("sweep", sweep_stale, settings.agent_sweep_interval_ms / 1000),
            CronJob("reconcile", triage.reconcile_job, settings.agent_reconcile_after_ms / 1000),
            CronJob("attachments_pending", pending.sweep, pending.SWEEP_SECONDS),
        ],
        # triage passes at once (each holds a model call; slots hold them to AGENT_CONCURRENCY desk-wide), emails,
        # and one thumbnail
        concurrency=settings.agent_concurrency + mail_queue.CONCURRENCY + 1,
        poll_delay=settings.agent_poll_interval_ms / 1000,
        burst=burst,
    )


async def heartbeat(ctx: Context) -> None:
    """The worker's heartbeat (desk/heartbeat.py): `desk worker --check`, the compose healthcheck, reads it."""
    await beat(ctx.db, worker=worker_name())


async def sweep_stale(ctx: Context) -> None:
    """The sweeper (spec §4.5): stale copilot runs end, overdue approvals expire, stuck sessions are freed."""
    swept = await sweep(ctx.db)
    if swept.stale_runs or swept.expired_approvals or swept.freed_sessions:
        log.info(
            "sweeper: %d stale runs ended, %d approvals expired, %d stuck sessions freed",
            swept.stale_runs,
            swept.expired_approvals,
            swept.freed_sessions,
        )
