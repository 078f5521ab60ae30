"""What one triage pass costs the database: the commands it sends, counted at the driver (bench/triage.py's floor)."""

from collections import Counter

from pymongo import AsyncMongoClient, monitoring

from desk.agent.triage import policy
from desk.agent.triage import task as triage_task
from tests.conftest import TEST_DB
from tests.triage.conftest import proposal

# Suggest mode, 17: the policy, the spend and the claim; the order, the policy again (before the model call) and
# the owner; the run and its prompt; the lease and the ledger; the suggestion and its change-feed entry (2); the
# answer and its tool call; the run's end (with its usage); the ack. 23 before the pass used the shared run
# record, read the policy only where AGT-9 asks, checked the spend once and wrote the usage with the run's end.
# Then 2 for the desk-wide concurrency (AGENT_CONCURRENCY across workers): the slot taken after the claim, released
# after the ack (its lease is renewed only in a pass longer than a third of it); and 1 for the spend reserved before
# the model call (both scopes in one command), which the ledger's write after it settles; and 1 for the desk-wide
# kill switch, read beside the policy before the claim (its watcher reads nothing in a pass shorter than a second).
PASS_COMMANDS = 21
FIRST = 3  # the worker's first claim puts lapsed jobs back (1); the desk's first slot taken makes its slots (2)
LOOK = 4  # the poll looking for more (policy, switch, spend, a claim finding nothing): its second slot's, the last
BREAKER = 1  # the provider's breaker, read at most once a second by a process (desk/agent/core/breaker.py): its first


class Commands(monitoring.CommandListener):
    def __init__(self) -> None:
        self.sent: list[tuple[str, str]] = []

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        collection = event.command.get(event.command_name)
        self.sent.append((event.command_name, collection if isinstance(collection, str) else ""))

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        pass

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        pass


async def test_a_pass_in_suggest_mode_sends_twenty_one_commands(
    mongo_uri, db, make_user, make_order, fake_provider, triage_settings, provider
):
    await make_order(await make_user())
    await policy.current(db, triage_settings)  # seeded, as on any desk after its first pass
    fake_provider.script(proposal())
    commands = Commands()
    client = AsyncMongoClient(mongo_uri, tz_aware=True, event_listeners=[commands])
    try:
        watched = client[TEST_DB]
        await watched.command("ping")
        commands.sent.clear()

        assert await triage_task.process_due(watched, triage_settings, provider=provider) == 1
    finally:
        await client.close()

    sent = [c for c in commands.sent if c[0] != "endSessions"]
    assert len(sent) == FIRST + PASS_COMMANDS + 2 * LOOK + BREAKER, Counter(sent)
