"""Email on the desk's job queue: at most one email per person and order per batch window, the rest in a digest.

The first event about an order that a person should hear of by email opens a window of DESK_MAIL_BATCH_SECONDS
and makes two mailings of it (`mail_windows` documents, alike but for their ids) and a `mail.send` job for each:
one due at once, the other (the digest) when the window ends. One task for both: the queue's claim reads its index
in order for one task name, where two made it sort every waiting job at every claim. Events during the window wait
(their notifications stay owed, `mail: "due"`) and the digest sends them all in one email, listing each. An event
after the window opens a new one. While the mail server is down a send fails and is retried with backoff (the
queue's), long enough to ride out a restart, then becomes a dead letter that admins see and can retry.
"""

import logging
import smtplib
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

from bson import ObjectId
from pymongo import ASCENDING
from pymongo.asynchronous.database import AsyncDatabase

from desk import state
from desk.config import get_settings
from desk.jobs import queue
from desk.jobs.table import Context, Done, Failed, Function, Job, Result, Retry, Skipped
from desk.notifications import mail, preferences, unsubscribe
from desk.notifications import repository as repo
from desk.users import repository as users_repo
from desk.work_orders import permissions
from desk.work_orders import repository as orders_repo

TASK = "mail.send"
# 2 s, 4 s ... up to the queue's 10 minutes between tries: about an hour and a half before a dead letter
MAX_TRIES = 16
# Emails a worker sends at once, beside its triage passes: a send mostly waits on the mail server.
CONCURRENCY = 6
Doc = dict[str, Any]
log = logging.getLogger(__name__)


def _windows(db: AsyncDatabase):
    return db["mail_windows"]


async def ensure_indexes(db: AsyncDatabase) -> None:
    windows = _windows(db)
    await windows.create_index([("workOrderId", ASCENDING), ("userId", ASCENDING), ("until", ASCENDING)], name="open")
    await windows.create_index([("until", ASCENDING)], expireAfterSeconds=7 * 24 * 3600, name="ttl")


async def schedule(db: AsyncDatabase, owed: list[Doc], people: dict[ObjectId, Doc], *, again: bool = False) -> None:
    """Open a window (and its two jobs) for each person owed an email about this order who has none open yet:
    three round trips, whatever the number of people. `owed`: notifications of one order, `mail` due.

    `again`: a retried fan-out, which may have opened windows before it failed, and not given them their jobs yet:
    the open windows' jobs are made too (those that exist are left as they are), one more round trip."""
    if not owed:
        return
    at = state.current().clock.now()
    order_id, users = owed[0]["workOrderId"], list({doc["userId"] for doc in owed})
    shown = {"userId": 1, "due": 1}
    found = _windows(db).find({"workOrderId": order_id, "userId": {"$in": users}, "until": {"$gt": at}}, shown)
    open_ = await found.to_list()
    covered = {doc["userId"] for doc in open_}
    until = at + timedelta(seconds=get_settings().desk_mail_batch_seconds)
    opened = [user for user in users if user not in covered]
    mailings = [  # the first email, at once; the digest, at the window's end
        {"_id": ObjectId(), "userId": user, "workOrderId": order_id, "opened": at, "until": until, "due": due}
        for user in opened
        for due in (at, until)
    ]
    if mailings:
        await _windows(db).insert_many(mailings)
    jobs = mailings + (open_ if again else [])
    if jobs:  # each job carries its mailing's person and order: `deliver` reads no window
        made = [(TASK, m["_id"], m["due"], {"userId": m["userId"], "workOrderId": order_id}) for m in jobs]
        await queue.enqueue_many(db, made, at=at)


def tasks() -> list[Function]:
    """The worker's mail task; it waits while the desk sends no email."""
    return [Function(TASK, deliver, max_tries=MAX_TRIES, ready=_mail_on)]


async def close_idle(ctx: Context) -> None:
    """The worker's idle connections to the mail server closed (desk/notifications/mail.py, `Relay`)."""
    relay = state.current().mail_relay
    if relay is not None:
        await relay.close_idle()


async def _mail_on(ctx: Context) -> bool:
    return ctx.settings.mail_enabled


async def deliver(ctx: Context, job: Job) -> Result:
    """Send what a mailing owes its person: the first event at once, or the digest of the rest at the window's end."""
    db = ctx.db
    window = _mailing(job) or await _windows(db).find_one({"_id": job.key})  # a job queued before jobs carried it
    if window is None:
        return Skipped("window_gone")
    owed = await repo.claim_mail(db, window["userId"], window["workOrderId"], window["_id"])
    if not owed:
        return Skipped("nothing_owed")
    (person,) = await users_repo.contacts(db, [window["userId"]]) or [None]
    order = await orders_repo.get(db, window["workOrderId"])
    at = state.current().clock.now()
    sees = person is not None and order is not None and permissions.person_sees(person, order)
    theirs = [doc for doc in owed if sees or doc.get("leftOrder")]  # an order taken off them: they are told
    if person is None or not person.get("active", True) or order is None or not theirs:
        await repo.mark_mailed(db, [doc["_id"] for doc in owed], at=at)  # no longer theirs to hear of
        return Skipped("not_for_them")
    if len(theirs) < len(owed):
        await repo.mark_mailed(db, [doc["_id"] for doc in owed if doc not in theirs], at=at)
        owed = theirs
    switches = (await preferences.effective(db, [person["_id"]]))[person["_id"]]["email"]
    wanted = [doc for doc in owed if switches[doc["kind"]]]  # unsubscribed since: not sent
    if wanted:
        result = await _send(ctx, person, order, wanted)
        if result is not None:
            return result
    await repo.mark_mailed(db, [doc["_id"] for doc in owed], at=at)
    return Done() if wanted else Skipped("unsubscribed")


def _mailing(job: Job) -> Doc | None:
    """The mailing a job carries (its person and order), as its window would give them; None if it carries none."""
    carried = job.payload or {}
    if "userId" not in carried or "workOrderId" not in carried:
        return None
    return {"_id": job.key, "userId": carried["userId"], "workOrderId": carried["workOrderId"]}


async def _send(ctx: Context, person: Doc, order: Doc, owed: list[Doc]) -> Result | None:
    """Send one email for these notifications; None when the server took it, else what the queue should do."""
    public = ctx.settings.desk_public_url
    token = await unsubscribe.token(ctx.db, person["_id"], sorted({doc["kind"] for doc in owed}))
    letter = mail.Letter(
        to_name=person["name"],
        to_address=person["email"],
        title=order["title"],
        order_url=f"{public}/app/work-orders/{order['_id']}",
        unsubscribe_url=f"{public}/api/v1/notifications/unsubscribe/{token}",
        texts=[doc["text"] for doc in owed],
    )
    message = mail.compose(letter, sender=ctx.settings.desk_mail_from or "")
    try:
        await mail.send(ctx.settings.smtp(), message, helo=urlsplit(public or "").hostname or "localhost")
    except smtplib.SMTPResponseException as error:
        if 500 <= error.smtp_code < 600:  # refused for good (no such mailbox, a policy): retrying cannot mend it
            return Failed(f"mail refused ({error.smtp_code})")
        return Retry(f"mail deferred ({error.smtp_code})")
    except smtplib.SMTPRecipientsRefused as error:  # the one recipient, refused: for good (5xx) or for now
        code = max(code for code, _ in error.recipients.values())
        return Failed(f"mail refused ({code})") if code >= 500 else Retry(f"mail deferred ({code})")
    except (OSError, smtplib.SMTPException) as error:  # down, unreachable, TLS: the server's side, tried again later
        return Retry(f"mail server unavailable ({type(error).__name__})")
    return None
