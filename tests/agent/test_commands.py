"""What a copilot turn costs the database: the commands it sends, counted at the driver, for a script calling the API
with a token (bench/copilot.py prints the same figure, through tests/commands.py).

A change that adds a round trip to a turn says why here, beside the count.
"""

from collections import Counter

from tests.commands import api_watched, of_turn
from tests.conftest import TEST_DB
from tests.fake_provider import Turn

# A turn answered with text, 12: the token and its person (one aggregate); the conversation taken for this turn (one
# find-and-modify: one turn at a time per conversation); the desk-wide kill switch (one find, at most once a second
# per process: a turn in the same second as the last read sends 11; a turn lasting over a second, one more a
# second, the process's watch over its turns); the admission (the desk's time zone, whose day the ledger
# counts: one find; then side by side the person's start counter, one find-and-modify, and the desk-wide spend, one
# find); the run stored; the model call's spend (both scopes, one command); the person's message and the
# answer (2 inserts); the run's end (with its usage); the conversation let go (its last turn's time).
TURN = {
    ("aggregate", "api_tokens"): 1,
    ("findAndModify", "copilot_sessions"): 1,
    ("find", "agent_config"): 1,
    ("find", "agent_spend"): 2,
    ("findAndModify", "agent_spend"): 1,
    ("insert", "agent_runs"): 1,
    ("update", "agent_spend"): 1,
    ("insert", "agent_messages"): 2,
    ("update", "agent_runs"): 1,
    ("update", "copilot_sessions"): 1,
}


async def test_a_copilot_turn_sends_twelve_commands(app, provider, fake_provider, mongo_uri, make_user, client_for, db):
    sam = await make_user()
    token = (await (await client_for(sam)).post("/api/v1/auth/tokens", json={"name": "counted"})).json()["secret"]
    fake_provider.script(Turn.text("Nothing is open."))

    async with api_watched(app, mongo_uri, TEST_DB, token) as (client, commands):
        sent = await of_turn(client, commands)

    assert sent == Counter(TURN)
    assert sum(sent.values()) == 12
    (answer,) = await db["agent_messages"].find({"role": "assistant"}).to_list()
    assert answer["content"] == "Nothing is open."
