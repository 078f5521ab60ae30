"""What one triage pass costs the database: the commands it sends, counted at the driver (bench/triage.py's floor)."""

from collections import Counter

import pytest

from desk.agent.core import budget
from tests.commands import of_one_poll
from tests.conftest import TEST_DB
from tests.triage.conftest import proposal

# A pass in suggest mode, 18: the look before the claim (the policy and the kill switch, one find; it stands for the
# pass's read before its model call, AGT-9, being a moment old), the claim and a desk-wide slot (AGENT_CONCURRENCY
# across workers); the order, then its requester and owner (one find; a `$lookup` aggregate doing both was several
# times slower on the embedded engine); the spend reserved (both scopes, one command); the run; before the store,
# side by side, the lease and the kill switch (unless the watcher read it during the call: a claim made just as an
# admin turned AI off is not one the switch took back); the suggestion and its change-feed entry (2: the feed's
# counter, the entry); the prompt with the answer (one insert) and its tool call; the run's end (with its usage);
# the ack; at the poll's end, the slot let go and the call's reservation settled (budget.Unsettled).
PASS_COMMANDS = 18
# Each further pass of a poll that drains a backlog, 14: the same but for the look, kept for the poll's next claims
# (up to task.LOOK_KEPT_SECONDS), the slot, handed from one job to the next (desk/jobs/worker.py, `spares`) and let
# go once, and the settling, sent with the next pass's reservation (one command for both).
NEXT_PASS_COMMANDS = PASS_COMMANDS - 4
FIRST = 3  # the worker's first claim puts lapsed jobs back (1); the desk's first slot taken makes its slots (2)
END = 1  # the poll's last claim, finding nothing (its look kept from the one before)
BREAKER = 1  # the provider's breaker, read at most once a second by a process (desk/agent/core/breaker.py): its first


async def test_a_pass_in_suggest_mode_sends_eighteen_commands(
    mongo_uri, make_user, make_order, fake_provider, triage_settings, provider, db
):
    await make_order(await make_user())

    sent = await commands_of_one_poll(mongo_uri, db, fake_provider, triage_settings, provider, orders=1)

    assert len(sent) == FIRST + BREAKER + PASS_COMMANDS + END, Counter(sent)


async def test_each_further_pass_of_a_backlog_sends_fourteen(
    mongo_uri, make_user, make_order, fake_provider, triage_settings, provider, db
):
    person = await make_user()
    for _ in range(4):
        await make_order(person)

    sent = await commands_of_one_poll(mongo_uri, db, fake_provider, triage_settings, provider, orders=4)

    assert len(sent) == FIRST + BREAKER + PASS_COMMANDS + 3 * NEXT_PASS_COMMANDS + END, Counter(sent)
    assert Counter(sent)[("update", "job_slots")] == 1  # one slot, handed from job to job and let go once
    assert Counter(sent)[("find", "agent_config")] == 1 + 4  # one look for the poll; the switch before each store
    assert Counter(sent)[("update", "agent_spend")] == 4 + 1  # a reservation each (with the last call's settling)
    runs = await db["agent_runs"].find({"agentName": "triage"}).to_list()  # and the ledger settled at the poll's end
    day = runs[0]["startedAt"].date().isoformat()
    assert await budget.spent(db, f"agent:triage:{day}") == pytest.approx(sum(run["costUsd"] for run in runs))


async def commands_of_one_poll(mongo_uri, db, fake_provider, settings, provider, *, orders: int) -> list:
    """The commands of one poll of a fresh worker over `orders` due orders, each triaged once (tests/commands.py)."""
    fake_provider.script(*[proposal() for _ in range(orders)])
    sent = await of_one_poll(mongo_uri, TEST_DB, settings, provider, orders=orders)
    assert await db["triage_suggestions"].count_documents({}) == orders
    return sent
