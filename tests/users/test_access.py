"""Losing access stops the person's copilot, whichever service call took it away (one hook, no caller can forget)."""

import asyncio

import pytest
from bson import ObjectId

from desk import state
from desk.agent.copilot import hooks
from desk.agent.copilot.sessions import current_session
from desk.agent.copilot.start import begin
from desk.auth import service as auth_service
from desk.users import service as users_service
from desk.users.models import UserAdminUpdate
from tests.fake_provider import Turn
from tests.helpers import actor, until


@pytest.fixture
def running(db, ai_settings, provider, fake_provider):
    """Start a slow copilot turn for a person and keep it streaming in the background; returns the task."""
    hooks.install(state.current().bus)  # what the app's assembly does (desk/app.py wire)
    tasks: list[asyncio.Task] = []

    async def run(person: dict) -> asyncio.Task:
        fake_provider.script(Turn.slow("Let me look at every order in turn", delay=0.2, chunks=40))
        session = await current_session(db=db, settings=ai_settings, actor=actor(person))
        turn = await begin(
            db=db, settings=ai_settings, provider=provider, actor=actor(person),
            session_id=session.id, content="Summarise everything", ip="127.0.0.1",
        )  # fmt: skip
        task = asyncio.create_task(_drain(turn))
        tasks.append(task)
        await until(lambda: db["agent_runs"].count_documents({"status": "running"}), what="the run to start")
        return task

    yield run
    for task in tasks:
        task.cancel()


async def _drain(turn) -> list:
    return [event async for event in turn.events()]


async def _status(db) -> str:
    return (await db["agent_runs"].find_one({}))["status"]


@pytest.mark.parametrize(
    "change",
    [
        {"active": False},
        {"password": "a brand new passphrase"},
        {"ai_enabled": False},
        {"role": "viewer"},
    ],
    ids=["deactivated", "password reset", "AI off", "demoted"],
)
async def test_an_admin_taking_access_away_stops_the_running_copilot(change, running, make_user, db):
    boss, sam = await make_user("admin"), await make_user("user")
    streaming = await running(sam)

    await users_service.update_user(db=db, actor=actor(boss), user_id=sam["id"], data=UserAdminUpdate(**change))

    assert await _status(db) == "aborted"
    events = await asyncio.wait_for(streaming, 10)
    assert events[-1].kind == "message_done" and events[-1].status == "aborted"


async def test_a_change_that_takes_nothing_away_leaves_the_copilot_running(running, make_user, db):
    boss, sam = await make_user("admin"), await make_user("viewer")
    await running(sam)

    await users_service.update_user(
        db=db, actor=actor(boss), user_id=sam["id"], data=UserAdminUpdate(role="user", name="Sam R.")
    )

    assert await _status(db) == "running"


async def test_turning_ones_own_ai_off_stops_the_running_copilot(running, make_user, db):
    sam = await make_user("user")
    await running(sam)

    await users_service.set_own_ai(db=db, actor=actor(sam), enabled=False)

    assert await _status(db) == "aborted"


async def test_logging_out_stops_the_running_copilot(running, make_user, db):
    sam = await make_user("user")
    secret = await auth_service.open_session(db=db, user_id=ObjectId(sam["id"]))
    await running(sam)

    await auth_service.logout(db=db, secret=secret)

    assert await _status(db) == "aborted"
