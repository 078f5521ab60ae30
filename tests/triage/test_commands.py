"""What one triage pass costs the database: the commands it sends, counted at the driver (bench/triage.py's floor)."""

from collections import Counter

from pymongo import AsyncMongoClient, monitoring

from desk.agent.triage import policy
from desk.agent.triage import task as triage_task
from tests.conftest import TEST_DB
from tests.triage.conftest import proposal

# Suggest mode, 18: the look before the claim (the policy and the kill switch, one find; it stands for the pass's
# read before its model call, AGT-9, being a moment old), the claim and a desk-wide slot (AGENT_CONCURRENCY across
# workers); the order, then its requester and owner (one find; a `$lookup` aggregate doing both was several times
# slower on the embedded engine); the spend reserved (both scopes, one command); the run; before the store, side by
# side, the lease, the kill switch (unless the watcher read it during the call) and the ledger's settling; the
# suggestion and its change-feed entry (2); the prompt with the answer (one insert) and its tool call; the run's
# end (with its usage); the ack; the slot let go. 17 before issue 41, which added the slot (2), the reservation
# and the switch, and took out the spend check before the claim (the reservation refuses past a cap), the second
# policy read and the prompt's own insert.
PASS_COMMANDS = 18
FIRST = 3  # the worker's first claim puts lapsed jobs back (1); the desk's first slot taken makes its slots (2)
LOOK = 2  # the poll looking for more (the policy and switch, a claim finding nothing): its second slot's, the last
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


async def test_a_pass_in_suggest_mode_sends_eighteen_commands(
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
