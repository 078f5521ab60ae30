"""Who hears about a change to an order, and in what words: the fan-out every notifying write goes through.

A write (desk/work_orders/service.py, the triage agent's flag) names its events; `fan_out` drops those for the
person who caused them (the copilot and the triage agent count as someone else: a person should hear what their
assistant did), for deactivated people and for people who cannot see the order, applies everyone's
preferences, and stores what is left in one round trip, whatever the number of people. The bell hears of it
through the change feed (kind "notified"), in every web process; owed emails are handed to `mail_queue`.
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bson import ObjectId
from pymongo.asynchronous.database import AsyncDatabase

from desk.actors import Actor, Role
from desk.config import get_settings
from desk.labels import STATUS_LABELS
from desk.notifications import mail_queue, preferences
from desk.notifications import repository as repo
from desk.notifications.models import Kind
from desk.schema import now
from desk.users import repository as users_repo
from desk.work_orders import changes, permissions
from desk.work_orders import repository as orders_repo

Doc = dict[str, Any]
QUOTE = 200  # characters of a comment quoted in its notification


@dataclass(frozen=True)
class Event:
    kind: Kind
    to: ObjectId
    text: Callable[[str], str]  # the words, given who caused it
    seen_in: Doc  # the order as it must be visible to them (as it was, for an order taken from them)


async def order_created(*, db: AsyncDatabase, actor: Actor, order: Doc, run_id: str | None) -> None:
    """An order made for someone else to work on: they were given it."""
    owner = order.get("ownerId")
    if owner is not None:
        await fan_out(db, actor, order, [_given(order, owner)], run_id=run_id)


async def order_changed(*, db: AsyncDatabase, actor: Actor, before: Doc, after: Doc, run_id: str | None) -> None:
    """A saved change: an owner given or taken away, a status its requester should know of."""
    events = []
    old, new = before.get("ownerId"), after.get("ownerId")
    if old != new and new is not None:
        events.append(_given(after, new))
    if old != new and old is not None:
        title = before["title"]  # the order as they could see it: a title given in the same change is not theirs
        events.append(Event("assigned", old, lambda who: f"{who} took “{title}” off you.", before))
    if before["status"] != after["status"] and (requester := after.get("requesterId")) is not None:
        was, now_ = STATUS_LABELS[before["status"]], STATUS_LABELS[after["status"]]
        title = after["title"]
        text = lambda who: f"{who} changed “{title}” from {was} to {now_}."  # noqa: E731
        events.append(Event("statusChanged", requester, text, after))
    if events:
        await fan_out(db, actor, after, events, run_id=run_id)


async def commented(*, db: AsyncDatabase, actor: Actor, order: Doc, text: str) -> None:
    """A comment: its requester, its owner and whoever commented on it before hear of it."""
    people = {order.get("requesterId"), order.get("ownerId"), *await orders_repo.commenters(db, order["_id"])}
    quoted = text if len(text) <= QUOTE else text[: QUOTE - 1] + "…"
    title = order["title"]
    words = lambda who: f"{who} commented on “{title}”: {quoted}"  # noqa: E731
    events = [Event("commented", person, words, order) for person in people if person is not None]
    await fan_out(db, actor, order, events, run_id=None)


async def flagged(*, db: AsyncDatabase, actor: Actor, order_id: str) -> None:
    """The triage agent flagged an order for the dispatcher: the admins who asked to hear of it."""
    order = await orders_repo.get(db, ObjectId(order_id))
    if order is None:  # deleted while the pass ran
        return
    title = order["title"]
    words = lambda who: f"{who} flagged “{title}” for the dispatcher."  # noqa: E731
    events = [Event("flagged", admin, words, order) for admin in await users_repo.active_admins(db)]
    await fan_out(db, actor, order, events, run_id=None)


def _given(order: Doc, owner: ObjectId) -> Event:
    title = order["title"]
    return Event("assigned", owner, lambda who: f"{who} gave you “{title}”.", order)


async def fan_out(db: AsyncDatabase, actor: Actor, order: Doc, events: list[Event], *, run_id: str | None) -> list[Doc]:
    """Store the notifications these events owe, in a constant number of round trips; returns them."""
    if actor.is_human and run_id is None:  # a person's own doing; their assistant's is news to them
        events = [event for event in events if str(event.to) != actor.id]
    if not events:
        return []
    ids = list({event.to for event in events} | ({ObjectId(actor.id)} if actor.is_human else set()))
    people = {doc["_id"]: doc for doc in await users_repo.contacts(db, ids)}
    switches = await preferences.effective(db, [event.to for event in events])
    mailing = get_settings().mail_enabled
    moment, stored = now(), []
    who = _who(actor, people, run_id)
    for event in events:
        person = people.get(event.to)
        if person is None or not person.get("active", True) or not permissions.person_sees(person, event.seen_in):
            continue
        kinds = switches[event.to]
        shown, mailed = kinds["inApp"][event.kind], mailing and kinds["email"][event.kind]
        if event.kind == "flagged" and person["role"] != Role.ADMIN:  # an admin demoted since: not theirs now
            continue
        if shown or mailed:
            stored.append(
                {
                    "userId": event.to,
                    "kind": event.kind,
                    "workOrderId": order["_id"],
                    "text": event.text(who),
                    "read": not shown,  # kept for its email alone: never counted in the bell
                    "shown": shown,
                    "mail": "due" if mailed else None,
                    # told of an order they no longer see (taken off it): its email goes out all the same
                    "leftOrder": event.seen_in is not order,
                    "createdAt": moment,
                }
            )
    stored = await repo.insert_many(db, stored)
    bells = {str(doc["userId"]) for doc in stored if doc["shown"]}
    if bells:
        await changes.ring(db, bells)
    await mail_queue.schedule(db, [doc for doc in stored if doc["mail"] == "due"], people)
    return stored


def _who(actor: Actor, people: dict[ObjectId, Doc], run_id: str | None) -> str:
    """Who caused the events, as the people told of them read it."""
    if not actor.is_human:
        return "The triage agent"
    person = people.get(ObjectId(actor.id))
    name = person["name"] if person else "Someone"
    return f"{name}’s assistant" if run_id is not None else name
