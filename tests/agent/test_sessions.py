"""What the sessions service tells a person about their conversations, and only theirs."""

from desk.agent.copilot import sessions
from tests.fake_provider import Turn
from tests.helpers import actor


async def test_what_each_run_asked_is_told_to_its_person_only(copilot, fake_provider, make_user, db):
    sam, ann = await make_user("user"), await make_user("user")
    fake_provider.script(Turn.text("Two."), Turn.text("None."))
    await copilot(sam, "How many leaks are open?")
    await copilot(ann, "Anything for the lobby?")
    by_person = {str(run["userId"]): str(run["_id"]) async for run in db["agent_runs"].find({})}
    both = [by_person[sam["id"]], by_person[ann["id"]]]

    told = await sessions.asked_in(db=db, actor=actor(sam), run_ids=[*both, "not-an-id"])

    assert told == {by_person[sam["id"]]: "How many leaks are open?"}  # Ann's run, asked for by id, stays hers
