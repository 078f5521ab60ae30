"""The process's Desk: what it holds, and the tasks nobody awaits."""

import asyncio
import logging

from desk import state
from desk.config import get_settings, use_settings
from desk.db.client import get_db, use_database


async def test_a_failed_task_the_desk_holds_is_logged_by_what_failed_never_by_its_words(settings, caplog):
    async def store():
        raise RuntimeError("Ann's private message")

    with caplog.at_level(logging.ERROR, logger="desk.state"):
        task = state.current().keep(asyncio.ensure_future(store()), failure="could not store a copilot run")
        assert task in state.current().tasks  # held: the event loop keeps only a weak reference
        await asyncio.gather(task, return_exceptions=True)
        await asyncio.sleep(0)  # its done-callback runs on the next turn of the loop

    assert task not in state.current().tasks
    assert "could not store a copilot run (RuntimeError" in caplog.text and "private" not in caplog.text


async def test_settings_and_database_are_the_installed_desks_and_a_teardown_forgets_them(settings, db):
    desk = state.current()
    assert get_settings() is settings is desk.settings
    use_database(db)
    assert get_db() is db is desk.db

    use_settings(None)
    assert state.peek() is None  # the next reader builds a fresh Desk, with nothing of the last one's
    use_settings(settings)
    assert state.current() is not desk and state.current().db is None
