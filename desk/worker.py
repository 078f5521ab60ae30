"""The worker process (`scheduler.py`): APScheduler jobs beside the web app; the triage agent joins later."""

import asyncio
import logging
import os
import signal

from apscheduler.schedulers.asyncio import AsyncIOScheduler

from desk.agent.sweeper import sweep
from desk.config import Settings, load_settings
from desk.db.client import connect
from desk.logs import configure_logging, never_log

log = logging.getLogger("desk.worker")


async def serve(settings: Settings, uri: str, *, stop: asyncio.Event | None = None) -> None:
    """Run the jobs until `stop` is set (or SIGTERM/SIGINT)."""
    db = connect(uri, settings.mongodb_db)
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    passes: set[asyncio.Task] = set()  # sweep passes in progress: stopping lets them finish first

    async def sweep_job() -> None:
        sweeping = asyncio.create_task(sweep_pass())
        passes.add(sweeping)
        sweeping.add_done_callback(passes.discard)
        try:
            await asyncio.shield(sweeping)
        except asyncio.CancelledError:
            # Stopping, APScheduler 3's asyncio executor cancels a running job (it cannot wait) and logs the
            # cancel as the job's error: the pass goes on, and `serve` awaits it before closing the client.
            if not stop.is_set():
                raise

    async def sweep_pass() -> None:
        swept = await sweep(db)
        if swept.stale_runs or swept.expired_approvals or swept.freed_sessions:
            log.info(
                "sweeper: %d stale runs ended, %d approvals expired, %d stuck sessions freed",
                swept.stale_runs,
                swept.expired_approvals,
                swept.freed_sessions,
            )

    scheduler = AsyncIOScheduler()
    # coalesce + one instance: a slow pass is never run twice at once or caught up in a burst
    scheduler.add_job(
        sweep_job,
        "interval",
        seconds=settings.agent_sweep_interval_ms / 1000,
        id="sweep",
        coalesce=True,
        max_instances=1,
        # no next_run_time: APScheduler reads None as "add paused", and the job would never run again
    )
    scheduler.start()
    watchdog = None
    if os.environ.get("DESK_WORKER_PARENT"):  # started by `desk run`: never outlive it
        watchdog = asyncio.create_task(_exit_with_parent(int(os.environ["DESK_WORKER_PARENT"]), stop))
    log.info("worker started")
    try:
        await sweep_pass()
        await stop.wait()
    finally:
        if watchdog is not None:
            watchdog.cancel()
        scheduler.shutdown(wait=False)
        for sig in (signal.SIGTERM, signal.SIGINT):  # the loop may outlive us (tests, an embedding process)
            loop.remove_signal_handler(sig)
        try:
            for failed in await asyncio.gather(*passes, return_exceptions=True):  # cut off from its job: log here
                if isinstance(failed, Exception):
                    log.error("sweeper pass failed", exc_info=failed)
        finally:
            await db.client.close()
            log.info("worker stopped")


async def _exit_with_parent(parent: int, stop: asyncio.Event) -> None:
    while os.getppid() == parent:  # noqa: ASYNC110 - nothing signals a parent's death; polling is the way
        await asyncio.sleep(1)
    stop.set()


def main() -> None:
    configure_logging()
    settings = load_settings()
    never_log(*settings.secrets())
    if settings.mongodb_uri is None:
        raise SystemExit(
            "config error: MONGODB_URI: the worker needs the database the web app uses "
            "(`desk run` passes it when it starts the worker)"
        )
    asyncio.run(serve(settings, settings.mongodb_uri.get_secret_value()))


if __name__ == "__main__":
    main()
