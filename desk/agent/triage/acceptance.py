"""How the triage's suggestions fare with people, by week: accepted, dismissed, or overtaken by a person.

A suggestion is overtaken when nobody decided on it but a person set its order's priority to something else
since (or a person's edit beat the agent's apply). One applied by the agent, or still waiting, is not counted:
no person has answered it yet. Counted here from one bounded find, not a date aggregation, which the
embedded engine gets wrong (DESIGN §4); a week is Monday to Sunday, UTC, of when the suggestion was made.
"""

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Literal

from bson import ObjectId
from pymongo.asynchronous.database import AsyncDatabase

from desk.access import require_admin
from desk.actors import Actor
from desk.agent.triage import repository as repo
from desk.agent.triage.models import priority_overtaken
from desk.schema import midnight, now
from desk.work_orders import service as work_orders

Outcome = Literal["accepted", "dismissed", "overtaken"]
OUTCOMES: tuple[Outcome, ...] = ("accepted", "dismissed", "overtaken")
Priorities = Callable[[list[ObjectId]], Awaitable[dict[ObjectId, str]]]  # the orders' priorities now, by id


@dataclass(frozen=True)
class Week:
    start: date  # its Monday
    accepted: int
    dismissed: int
    overtaken: int

    @property
    def rate(self) -> float | None:
        """Accepted of those a person answered (None: nobody answered any that week)."""
        answered = self.accepted + self.dismissed + self.overtaken
        return self.accepted / answered if answered else None


async def by_week(*, db: AsyncDatabase, actor: Actor, weeks: int = 8) -> list[Week]:
    """The last `weeks` weeks, this one last."""
    require_admin(actor, "see or run the agents")

    async def priorities(ids: list[ObjectId]) -> dict[ObjectId, str]:
        return {
            oid: order.priority for oid, order in (await work_orders.by_ids(db=db, actor=actor, order_ids=ids)).items()
        }

    today = now().date()
    first = today - timedelta(days=today.weekday(), weeks=weeks - 1)
    counted = {first + timedelta(weeks=n): dict.fromkeys(OUTCOMES, 0) for n in range(weeks)}
    for made, outcome in await outcomes(db, midnight(first), priorities):
        counted[made - timedelta(days=made.weekday())][outcome] += 1
    return [Week(start, **counts) for start, counts in counted.items()]


async def outcomes(db: AsyncDatabase, start: datetime, priorities: Priorities) -> list[tuple[date, Outcome]]:
    """Each suggestion made since `start` that a person answered: the day it was made (UTC), and how."""
    docs = await repo.outcomes_since(db, start)
    open_ = list({doc["workOrderId"] for doc in docs if doc.get("decision") is None and not doc.get("applied")})
    current = await priorities(open_) if open_ else {}
    found = []
    for doc in docs:
        if (outcome := _outcome(doc, current.get(doc["workOrderId"]))) is not None:
            found.append((doc["createdAt"].date(), outcome))
    return found


def _outcome(doc: dict, priority_now: str | None) -> Outcome | None:
    decision = doc.get("decision")
    if decision in ("accepted", "dismissed"):
        return decision
    if doc.get("appliedNote") == "overtaken":
        return "overtaken"  # a person's edit landed before the agent's apply
    if doc.get("applied") or priority_now is None:
        return None  # the agent applied it, or its order is gone
    if priority_overtaken(doc.get("priorityBefore"), doc["suggestedPriority"], priority_now):
        return "overtaken"
    return None
