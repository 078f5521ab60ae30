"""Who hears about a change to an order, and in what words: the fan-out every notifying write goes through.

A write (desk/work_orders/service.py, the triage agent's flag) describes itself (`order_created` ... `flagged`: the
news), and its fan-out job (desk/notifications/outbox.py) turns the news into events (`tell`); `fan_out` drops those
for the person who caused them (the copilot and the triage agent count as someone else: a person should hear what their
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


# What a write tells `outbox.announce`, stored in its fan-out job: who did it, and the order as the events need it
# (as it was then, not as it may be when a retried job runs). `created`/`changed`/`commented` name the write's
# timeline entry, the proof that the write was made; `flagged` is made after its write.
SNAPSHOT = ("_id", "title", "status", "ownerId", "requesterId")


def snapshot(order: Doc) -> Doc:
    """The fields of an order its events read: its words, and who may see it (`permissions.person_sees`)."""
    return {key: order.get(key) for key in SNAPSHOT}


def order_created(*, actor: Actor, order: Doc, entry: ObjectId, run_id: str | None) -> Doc | None:
    """An order made for someone else to work on: they were given it. None: the write tells no one."""
    return _news("created", actor, snapshot(order), entry=entry, run_id=run_id)


def order_changed(*, actor: Actor, before: Doc, after: Doc, entry: ObjectId, run_id: str | None) -> Doc | None:
    """A change to be saved: an owner given or taken away, a status its requester should know of."""
    return _news("changed", actor, snapshot(after), entry=entry, run_id=run_id, before=snapshot(before))


def commented(*, actor: Actor, order: Doc, entry: ObjectId, text: str) -> Doc | None:
    """A comment: its requester, its owner and whoever commented on it before hear of it."""
    return _news("commented", actor, snapshot(order), entry=entry, run_id=None, text=text)


def flagged(*, actor: Actor, order_id: str) -> Doc | None:
    """The triage agent flagged an order for the dispatcher (stored already): the admins who asked to hear of it."""
    return _news("flagged", actor, {"_id": ObjectId(order_id)}, entry=None, run_id=None)


def _news(
    kind: str, actor: Actor, order: Doc, *, entry: ObjectId | None, run_id: str | None, **more: Any
) -> Doc | None:
    news = {
        "event": kind,
        "actor": {"id": actor.id, "kind": actor.kind},
        "runId": run_id,
        "order": order,
        "entry": entry,
    }
    news |= more
    if kind in ("created", "changed") and not _for_others(actor, _changes(news), run_id):
        return None  # nobody else to tell: no job (a person's own order, an edit of its words)
    return news


def _for_others(actor: Actor, events: list["Event"], run_id: str | None) -> list["Event"]:
    """The events minus a person's own doing (their assistant's is news to them)."""
    if actor.is_human and run_id is None:
        return [event for event in events if str(event.to) != actor.id]
    return events


def _changes(news: Doc) -> list["Event"]:
    """A creation's or a change's events, read from the news alone."""
    after = news["order"]
    if news["event"] == "created":
        return [_given(after, after["ownerId"])] if after.get("ownerId") is not None else []
    before, events = news["before"], []
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
    return events


async def tell(db: AsyncDatabase, news: Doc, *, source: ObjectId, again: bool) -> list[Doc]:
    """Store the notifications `news` owes (its fan-out job's, keyed `source`); `again`: it may have run before."""
    actor = Actor(id=news["actor"]["id"], role=None, kind=news["actor"]["kind"])
    order, kind = news["order"], news["event"]
    if kind in ("created", "changed"):
        events = _changes(news)
    elif kind == "commented":
        people = {order.get("requesterId"), order.get("ownerId"), *await orders_repo.commenters(db, order["_id"])}
        text = news["text"]
        quoted = text if len(text) <= QUOTE else text[: QUOTE - 1] + "…"
        title = order["title"]
        words = lambda who: f"{who} commented on “{title}”: {quoted}"  # noqa: E731
        events = [Event("commented", person, words, order) for person in people if person is not None]
    else:
        found = await orders_repo.get(db, order["_id"])
        if found is None:  # deleted since
            return []
        order, title = snapshot(found), found["title"]
        words = lambda who: f"{who} flagged “{title}” for the dispatcher."  # noqa: E731
        events = [Event("flagged", admin, words, order) for admin in await users_repo.active_admins(db)]
    return await fan_out(db, actor, order, events, run_id=news["runId"], source=source, again=again)


def _given(order: Doc, owner: ObjectId) -> Event:
    title = order["title"]
    return Event("assigned", owner, lambda who: f"{who} gave you “{title}”.", order)


async def fan_out(
    db: AsyncDatabase,
    actor: Actor,
    order: Doc,
    events: list[Event],
    *,
    run_id: str | None,
    source: ObjectId,
    again: bool = False,
) -> list[Doc]:
    """Store the notifications these events owe, in a constant number of round trips; returns them.

    Idempotent by `source` (the fan-out's job): a notification is stored once per source, person and kind, so a
    retried job stores none twice and mails none twice (its emails are owed by the stored notifications).
    """
    events = _for_others(actor, events, run_id)
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
                    "source": source,
                }
            )
    stored, repeated = await repo.insert_once(db, stored)
    if repeated:  # a retry after some were stored: what this source stored, the earlier run's too
        stored = await repo.of_source(db, source)
    bells = {str(doc["userId"]) for doc in stored if doc["shown"]}
    if bells:
        await changes.ring(db, bells)
    await mail_queue.schedule(db, [doc for doc in stored if doc["mail"] == "due"], people, again=again or repeated)
    return stored


def _who(actor: Actor, people: dict[ObjectId, Doc], run_id: str | None) -> str:
    """Who caused the events, as the people told of them read it."""
    if not actor.is_human:
        return "The triage agent"
    person = people.get(ObjectId(actor.id))
    name = person["name"] if person else "Someone"
    return f"{name}’s assistant" if run_id is not None else name
