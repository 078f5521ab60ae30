"""Demo data: a handful of people across the three roles and 200 realistic work orders over 60 days.

Orders are asked for by the admin and the users; about one in eight waits unassigned in the queue,
the others are worked on by someone who can work (the viewer works on nothing and reads everything).
Each order's timeline starts with its creation, and some carry a comment or two.
"""

import asyncio
import random
from contextlib import suppress
from datetime import timedelta

from bson import ObjectId
from pymongo.asynchronous.database import AsyncDatabase

from desk.errors import Conflict
from desk.schema import now
from desk.users import repository as users_repo
from desk.users import service as users_service
from desk.users.models import UserCreate
from desk.work_orders import repository as orders_repo
from desk.work_orders.models import CLOSED
from desk.work_orders.service import TRACKED

DEMO_PASSWORD = "desk-demo-2026"  # noqa: S105 - printed to the person who asked for demo data
PEOPLE = [
    ("dana.admin@example.com", "Dana Okafor", "admin"),
    ("sam.rivera@example.com", "Sam Rivera", "user"),
    ("priya.shah@example.com", "Priya Shah", "user"),
    ("lee.chen@example.com", "Lee Chen", "user"),
    ("vic.moreau@example.com", "Vic Moreau", "viewer"),
]
PLACES = [
    "kitchen",
    "2nd floor restroom",
    "meeting room B",
    "reception",
    "server room",
    "loading dock",
    "break room",
    "north stairwell",
    "parking garage",
    "room 214",
    "print corner",
    "lobby",
]
PROBLEMS = [
    ("Leaking tap in the {p}", "Water drips constantly from the cold tap in the {p}; a bucket is catching it for now."),
    ("Flickering lights in the {p}", "Two ceiling panels in the {p} flicker all day. People are getting headaches."),
    (
        "Broken door handle, {p}",
        "The handle on the main door of the {p} came off. The door still closes but won't latch.",
    ),
    ("Heating not working in the {p}", "It's 16°C in the {p} this morning. The radiator valve seems stuck."),
    ("Replace toner for the printer near the {p}", "The printer by the {p} shows 'toner low' and prints faded pages."),
    ("Wi-Fi drops in the {p}", "Laptops lose the connection every few minutes in the {p}; wired is fine."),
    ("Blocked sink in the {p}", "The sink in the {p} drains very slowly and smells. Please send a plumber."),
    (
        "Projector won't turn on in the {p}",
        "The projector in the {p} shows a red light and doesn't start. Client demo Friday.",
    ),
    ("Window won't close in the {p}", "A window in the {p} is stuck half open; rain came in last night."),
    ("Air conditioning too loud in the {p}", "The AC unit in the {p} rattles loudly. Hard to take calls."),
    ("Order new chairs for the {p}", "Three chairs in the {p} have broken gas lifts. Need replacements."),
    ("Badge reader failing at the {p}", "The badge reader at the {p} rejects valid badges about half of the time."),
]
PRIORITY_WEIGHTS = {"low": 3, "medium": 5, "high": 3, "urgent": 1}
QUEUE_SHARE = 0.12  # of demo orders left unassigned
COMMENT_SHARE = 0.3  # of demo orders with comments
WRITERS = 4  # demo orders written at once (more gained nothing: the database is then the one busy)
COMMENTS = [
    "I had a look: it needs a part we don't stock. Ordered it today.",
    "Still happening this morning.",
    "Facilities said they can come on Thursday after 2pm.",
    "Thanks, works again!",
    "Is there a workaround until then?",
    "Moved the meeting to room 214 in the meantime.",
]


async def seed_demo(db: AsyncDatabase, *, count: int = 200, only_if_empty: bool = False) -> str:
    """Add demo users (password DEMO_PASSWORD) and `count` work orders; returns what was done, in words."""
    if only_if_empty and await db["work_orders"].estimated_document_count():
        return "Demo data not added: the desk already has work orders."
    people = await _people(db)
    workers = [oid for oid, role in people if role != "viewer"]
    rng = random.Random(2026)  # noqa: S311 - the same demo every time; nothing secret
    moment = now()
    # Drawn in order (the same demo every time), then written a few at a time: one by one, the writes
    # of 200 orders and their timelines took 6.6 s of a first `dev.py run --demo`, four at a time 4 s.
    everyone, demo = [oid for oid, _ in people], []
    for _ in range(count):
        order = _order(rng, workers, moment, requesters=workers, queue_share=QUEUE_SHARE)
        demo.append((order, _history(rng, order, everyone)))
    at_once = asyncio.Semaphore(WRITERS)

    async def write(order: dict, history: list[dict]) -> None:
        async with at_once:
            stored = await orders_repo.insert(db, order, untriaged="seeded")  # history: no model call, no bill
            for entry in history:
                await orders_repo.append_activity(db, {**entry, "workOrderId": stored["_id"]})

    await asyncio.gather(*(write(order, history) for order, history in demo))
    emails = ", ".join(f"{email} ({role})" for email, _, role in PEOPLE)  # which one to try each role as
    return f"Added {count} demo work orders. Demo people ({emails}) log in with the password {DEMO_PASSWORD}."


async def _people(db: AsyncDatabase) -> list[tuple[ObjectId, str]]:
    """The demo users' ids and roles (creating those missing)."""
    ids = []
    for email, name, role in PEOPLE:
        with suppress(Conflict):  # seeded before: keep them as they are
            data = UserCreate(email=email, name=name, role=role, password=DEMO_PASSWORD)
            await users_service.register(db=db, data=data)
        user = await users_repo.get_by_email(db, email)
        assert user is not None
        ids.append((user["_id"], user["role"]))
    return ids


def _history(rng: random.Random, order: dict, people: list[ObjectId]) -> list[dict]:
    """The order's timeline: its creation and, for some, comments by people who can see it."""
    created = {key: str(order[key]) if key == "ownerId" and order[key] else order.get(key) for key in TRACKED}
    entry = {"actorKind": "human", "runId": None, "before": None}
    history = [
        {**entry, "actorId": str(order["requesterId"]), "action": "created", "after": created, "at": order["createdAt"]}
    ]
    if rng.random() < COMMENT_SHARE:
        for n in range(rng.randint(1, 2)):
            at = min(order["createdAt"] + timedelta(hours=rng.uniform(1, 48) * (n + 1)), order["updatedAt"])
            author = rng.choice([order["requesterId"], order["ownerId"] or rng.choice(people)])
            text = rng.choice(COMMENTS)
            history.append(
                {**entry, "actorId": str(author), "action": "commented", "text": text, "after": None, "at": at}
            )
    return history


def _order(
    rng: random.Random,
    owners: list[ObjectId],
    moment,
    *,
    requesters: list[ObjectId] | None = None,
    queue_share: float = 0.0,
) -> dict:
    """One realistic order; without `requesters` each is asked for by its owner (the bench relies on this)."""
    title, description = rng.choice(PROBLEMS)
    place = rng.choice(PLACES)
    created = moment - timedelta(days=rng.uniform(0, 60))
    age_days = (moment - created).total_seconds() / 86400
    status = rng.choices(["pending", "in_progress", "done", "cancelled"], weights=[3, 3, 5 if age_days > 3 else 1, 1])[
        0
    ]
    closed = created + timedelta(hours=rng.uniform(2, min(age_days * 24, 240))) if status in CLOSED else None
    updated = closed or created + timedelta(hours=rng.uniform(0, min(age_days * 24, 48)))
    owner = rng.choice(owners)
    requester = rng.choice(requesters) if requesters else owner
    if queue_share and status == "pending" and rng.random() < queue_share * 3:  # the queue holds new orders
        owner = None
    return {
        "title": title.format(p=place),
        "description": description.format(p=place),
        "priority": rng.choices(list(PRIORITY_WEIGHTS), weights=list(PRIORITY_WEIGHTS.values()))[0],
        "status": status,
        "requesterId": requester,
        "ownerId": owner,
        "version": 1,
        "createdAt": created.replace(microsecond=created.microsecond // 1000 * 1000),
        "updatedAt": min(updated, moment),
        "closedAt": closed,
    }
