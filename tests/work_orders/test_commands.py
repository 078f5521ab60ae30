"""What each kind of work-order request costs the database: the commands it sends, counted at the driver, for a
script calling the API with a token (bench/api.py prints the same figures, through tests/commands.py).

A change that adds a round trip to one of these says why here, beside the count.
"""

from collections import Counter

import pytest

from tests.commands import api_watched, of_requests
from tests.conftest import TEST_DB

TOKEN = 1  # every request: the token and its person, one aggregate (the token's last use is written once a minute)
# A page of the list, 3: the token; the page (one find); its total, the sum of the person's disjoint counters (one
# find: what they asked for, what they own, the queue), whatever the desk's size.
LIST = {("aggregate", "api_tokens"): TOKEN, ("find", "work_orders"): 1, ("find", "counters"): 1}
# A one-word search of a word longer than search.PREFIX_LETTERS, 10: the token; the indexed words beginning with it,
# one index seek each and one finding no more (2 finds: only "kitchen" begins so here); then, side by side, for
# each of the person's 3 disjoint parts of the desk (asked for, owned, the queue), its first page of postings (a
# find) and its count (an aggregate: count_documents); the page's orders (one find).
SEARCH = {
    ("aggregate", "api_tokens"): TOKEN,
    ("find", "search_postings"): 2 + 3,
    ("aggregate", "search_postings"): 3,
    ("find", "work_orders"): 1,
}
# A create, 10: the token; the person's write limit (one update; their first write in two minutes starts its
# document, one insert more: sam has written before, as a busy person has); the order, its timeline line, the
# counters (one update for all the keys it moves), its search postings (one insert_many); its change-feed entry (2:
# the feed's counter, then the entry, after the timeline line: tests/work_orders/test_timeline_first.py); its triage
# job (2: whether its people allow AI, SEC-8, one find of users; the job). No fan-out: sam owns what he asked for.
CREATE = {
    ("aggregate", "api_tokens"): TOKEN,
    ("update", "rate_limits"): 1,
    ("insert", "work_orders"): 1,
    ("insert", "activity"): 1,
    ("update", "counters"): 1,
    ("insert", "search_postings"): 1,
    ("findAndModify", "counters"): 1,
    ("insert", "changes"): 1,
    ("find", "users"): 1,
    ("insert", "outbox_events"): 1,
}
# An update of the priority (of the order just created), 10: the token; the order read (is it theirs to see and to
# change: a 404 or 403 before the write limit counts); the write limit; the change at its version (one
# find-and-modify, answering the order before, for the timeline and the counters); its timeline line; the counters;
# its search postings replaced (a delete of the old, an insert of the new: a priority is a posting's sort key); its
# change-feed entry (2).
UPDATE = {
    ("aggregate", "api_tokens"): TOKEN,
    ("find", "work_orders"): 1,
    ("update", "rate_limits"): 1,
    ("findAndModify", "work_orders"): 1,
    ("insert", "activity"): 1,
    ("update", "counters"): 1,
    ("delete", "search_postings"): 1,
    ("insert", "search_postings"): 1,
    ("findAndModify", "counters"): 1,
    ("insert", "changes"): 1,
}


@pytest.mark.parametrize(
    ("kind", "expected", "total"),
    [("list", LIST, 3), ("search", SEARCH, 10), ("create", CREATE, 10), ("update", UPDATE, 10)],
    ids=["list", "search", "create", "update"],
)
async def test_a_request_sends_its_known_commands(
    app, mongo_uri, make_user, make_order, client_for, kind, expected, total
):
    sam = await make_user()
    await make_order(sam, "Kitchen tap drips")
    await make_order(sam, "Hall light out")
    sams = await client_for(sam)
    token = (await sams.post("/api/v1/auth/tokens", json={"name": "counted"})).json()["secret"]

    async with api_watched(app, mongo_uri, TEST_DB, token) as (client, commands):
        sent = await of_requests(client, commands, word="kitchen")

    assert sent[kind] == Counter(expected)
    assert sum(sent[kind].values()) == total
