"""The worker's sweep of uploads that died half-way: their record written, their bytes perhaps, never confirmed."""

import logging
from datetime import timedelta

from desk import state
from desk.attachments import repository as repo
from desk.jobs.table import Context

log = logging.getLogger("desk.attachments")

# An upload confirms its record within seconds of writing it; one pending for an hour lost its process.
GIVEN_UP_AFTER = timedelta(hours=1)
SWEEP_SECONDS = 15 * 60  # a dead upload's bytes outlive it by at most an hour and a quarter


async def sweep(ctx: Context) -> None:
    """Delete the files (record and bytes) left pending for over GIVEN_UP_AFTER."""
    # the Desk's clock, which uploads mark their records by: a test moves it past the hour
    swept = await repo.sweep_pending(ctx.db, state.current().clock.now() - GIVEN_UP_AFTER)
    if swept:
        log.info("attachments: %d uploads that never finished deleted", swept)
