"""Email through a real SMTP server (aiosmtpd, on loopback, STARTTLS with the tests' certificate and a login), sent
by the worker's queue: batching, preferences, the unsubscribe link, a server that is down and comes back, escaping,
a deactivated person."""

import asyncio
from datetime import timedelta
from email.message import EmailMessage

from bson import ObjectId

from desk.notifications import mail_queue, service
from desk.notifications import repository as notes
from desk.notifications.models import NotificationQuery, PreferencesUpdate
from desk.work_orders import service as orders
from desk.work_orders.models import CommentCreate, WorkOrderUpdate
from tests.helpers import actor
from tests.notifications.conftest import REFUSED, SMTP_PASSWORD


def text_of(mail: EmailMessage) -> str:
    return mail.get_body(("plain",)).get_content()


def html_of(mail: EmailMessage) -> str:
    return mail.get_body(("html",)).get_content()


async def test_the_first_event_mails_at_once_and_the_rest_of_the_window_comes_in_one_digest(
    db, make_user, make_order, inbox, run_mail, clock
):
    admin, lee = await make_user("admin", name="Ada"), await make_user(name="Lee", email="lee@example.com")
    order = await make_order(admin, "Leaking tap", owner_id=lee["id"])
    await run_mail()
    (first,) = inbox.mails
    assert first["To"] == "Lee <lee@example.com>" and first["Subject"] == "Ada gave you “Leaking tap”."
    assert f"https://desk.example.com/app/work-orders/{order.id}" in text_of(first)

    for text in ("Parts ordered", "Plumber comes Monday"):
        await orders.add_comment(db=db, actor=actor(admin), order_id=order.id, data=CommentCreate(text=text))
    await run_mail()
    assert len(inbox.mails) == 1  # the window is still open: nothing more yet

    clock.move(timedelta(seconds=300))
    await run_mail()
    digest = inbox.mails[1]
    assert digest["Subject"] == "2 updates on “Leaking tap”"
    assert "- Ada commented on “Leaking tap”: Parts ordered" in text_of(digest)
    assert "- Ada commented on “Leaking tap”: Plumber comes Monday" in text_of(digest)

    clock.move(timedelta(seconds=1))  # the window is over: the next event opens a new one, and mails at once
    await orders.add_comment(db=db, actor=actor(admin), order_id=order.id, data=CommentCreate(text="Done?"))
    await run_mail()
    assert len(inbox.mails) == 3 and inbox.mails[2]["Subject"] == "Ada commented on “Leaking tap”: Done?"


async def test_the_person_an_order_is_taken_from_is_mailed_though_they_no_longer_see_it(
    db, make_user, make_order, inbox, run_mail, clock
):
    admin, lee = await make_user("admin", name="Ada"), await make_user(name="Lee", email="lee@example.com")
    priya = await make_user(name="Priya")
    order = await make_order(admin, "Leaking tap", owner_id=lee["id"])
    await run_mail()
    clock.move(timedelta(seconds=301))  # the first window is over: the next event mails at once
    change = WorkOrderUpdate(version=order.version, title="Leak, room 4", owner_id=priya["id"])
    await orders.update(db=db, actor=actor(admin), order_id=order.id, data=change)
    await run_mail()

    taken = [mail for mail in inbox.mails if mail["To"] == "Lee <lee@example.com>"][-1]
    assert taken["Subject"] == "Ada took “Leaking tap” off you."  # the title they knew, not the one given since


async def test_two_mailings_at_once_never_take_the_same_notification(db, make_user, make_order, inbox):
    admin, lee = await make_user("admin", name="Ada"), await make_user(name="Lee")
    order = await make_order(admin, "Leaking tap", owner_id=lee["id"])
    for text in ("Parts ordered", "Plumber comes Monday"):
        await orders.add_comment(db=db, actor=actor(admin), order_id=order.id, data=CommentCreate(text=text))
    first, digest = ObjectId(), ObjectId()  # say, the first email's retry and the window's digest

    taken = await asyncio.gather(
        *(notes.claim_mail(db, ObjectId(lee["id"]), ObjectId(order.id), mailing) for mailing in (first, digest))
    )

    ids = [{doc["_id"] for doc in docs} for docs in taken]
    assert not ids[0] & ids[1] and len(ids[0] | ids[1]) == 3  # each owed once: given, and the two comments
    again = await notes.claim_mail(db, ObjectId(lee["id"]), ObjectId(order.id), first)  # its own, on a retry
    assert {doc["_id"] for doc in again} == ids[0]


async def test_every_mail_has_text_and_html_escaped_and_the_one_click_unsubscribe_headers(
    db, make_user, make_order, inbox, run_mail
):
    admin = await make_user("admin", name="Ada <img src=x onerror=alert(1)>")
    lee = await make_user(name="Lee & <i>co</i>")
    await make_order(admin, "<script>alert('tap')</script>", owner_id=lee["id"])
    await run_mail()
    (mail,) = inbox.mails

    html = html_of(mail)
    assert "<script>" not in html and "&lt;script&gt;alert(&#x27;tap&#x27;)&lt;/script&gt;" in html
    assert "<img" not in html and "<i>" not in html and "Lee &amp; &lt;i&gt;co&lt;/i&gt;" in html
    assert "<script>alert('tap')</script>" in text_of(mail)  # plain text is shown as text
    url = mail["List-Unsubscribe"].strip("<>")
    assert url.startswith("https://desk.example.com/api/v1/notifications/unsubscribe/")
    assert mail["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    assert SMTP_PASSWORD not in mail.as_string()  # no secret rides along


async def test_the_unsubscribe_link_turns_that_kind_of_email_off_with_no_login(
    db, make_user, make_order, inbox, run_mail, anonymous, clock
):
    admin, lee = await make_user("admin", name="Ada"), await make_user(name="Lee", email="lee@example.com")
    order = await make_order(admin, "Leaking tap", owner_id=lee["id"])
    await run_mail()
    await orders.add_comment(db=db, actor=actor(admin), order_id=order.id, data=CommentCreate(text="Thanks"))
    await run_mail()
    (mail,) = inbox.mails  # about the assignment: the comment waits for the digest
    path = mail["List-Unsubscribe"].strip("<>").removeprefix("https://desk.example.com")

    answer = await anonymous.post(path, content="List-Unsubscribe=One-Click")
    assert answer.status_code == 200 and answer.json() == {"kinds": ["assigned"]}
    assert (await service.get_preferences(db=db, actor=actor(lee))).email.assigned is False

    clock.move(timedelta(seconds=300))
    await run_mail()
    assert "Ada commented on “Leaking tap”: Thanks" in text_of(inbox.mails[1])  # comments still come
    clock.move(timedelta(seconds=1))
    await make_order(admin, "Broken window", owner_id=lee["id"])
    await run_mail()
    assert len(inbox.mails) == 2  # assignments no longer do...
    bell = await service.page(db=db, actor=actor(lee), query=NotificationQuery())
    assert bell.items[0].text == "Ada gave you “Broken window”."  # ...but the bell still says so


async def test_a_mail_server_that_is_down_is_tried_again_until_it_is_back(
    db, make_user, make_order, inbox, run_mail, clock
):
    admin, lee = await make_user("admin"), await make_user()
    await make_order(admin, "Leaking tap", owner_id=lee["id"])
    inbox.stop()
    await run_mail()
    job = await db["outbox_events"].find_one({"type": mail_queue.TASK}, sort=[("availableAt", 1)])  # the first
    assert (job["status"], job["attempts"]) == ("pending", 1)
    assert job["lastError"] == "mail server unavailable (ConnectionRefusedError)"

    clock.move(timedelta(minutes=10))
    await run_mail()  # still down: a second try, later again
    assert (await db["outbox_events"].find_one({"_id": job["_id"]}))["attempts"] == 2
    inbox.start()
    clock.move(timedelta(minutes=10))
    await run_mail()
    assert len(inbox.mails) == 1  # once: by the retried send or the window's digest, whichever ran first
    mail_jobs = {"type": mail_queue.TASK}
    assert await db["outbox_events"].count_documents(mail_jobs | {"status": {"$in": ["pending", "failed"]}}) == 0


async def test_a_refused_mailbox_is_a_dead_letter_the_admins_see(
    db, make_user, make_order, inbox, run_mail, client_for
):
    admin, nobody = await make_user("admin"), await make_user(email=REFUSED)
    await make_order(admin, "Leaking tap", owner_id=nobody["id"])
    await run_mail()
    assert inbox.mails == []

    overview = (await (await client_for(admin)).get("/api/v1/admin/agents/triage")).json()
    (dead,) = overview["failed"]
    assert (dead["type"], dead["lastError"]) == (mail_queue.TASK, "mail refused (550)")


async def test_someone_deactivated_before_the_mail_goes_gets_none(
    db, make_user, make_order, change_user, inbox, run_mail
):
    admin, lee = await make_user("admin"), await make_user()
    await make_order(admin, "Leaking tap", owner_id=lee["id"])
    await change_user(lee, active=False)
    await run_mail()
    assert inbox.mails == []
    job = await db["outbox_events"].find_one({"type": mail_queue.TASK}, sort=[("availableAt", 1)])
    assert (job["status"], job["lastError"]) == ("skipped", "not_for_them")


async def test_email_switched_off_sends_nothing_and_keeps_the_bell(db, make_user, make_order, inbox, run_mail):
    admin, lee = await make_user("admin"), await make_user()
    switched = PreferencesUpdate.model_validate({"email": {"assigned": False}})
    await service.update_preferences(db=db, actor=actor(lee), data=switched)
    await make_order(admin, "Leaking tap", owner_id=lee["id"])
    await run_mail()
    assert inbox.mails == [] and await db["outbox_events"].count_documents({"type": mail_queue.TASK}) == 0
    assert await service.unread(db=db, actor=actor(lee)) == 1


async def test_with_no_smtp_url_nothing_is_queued(db, make_user, make_order, settings):
    admin, lee = await make_user("admin"), await make_user()
    await make_order(admin, "Leaking tap", owner_id=lee["id"])
    assert await db["outbox_events"].count_documents({"type": mail_queue.TASK}) == 0
    assert await db["notifications"].find_one({"userId": ObjectId(lee["id"])}, {"mail": 1}) | {"_id": 0} == {
        "_id": 0,
        "mail": None,
    }


async def test_a_batch_of_mailings_shares_one_connection_to_the_mail_server(db, make_user, make_order, inbox, run_mail):
    admin = await make_user("admin", name="Ada")
    people = [await make_user(name=f"Person {number}", email=f"p{number}@example.com") for number in range(5)]
    for person in people:
        await make_order(admin, "Leaking tap", owner_id=person["id"])

    assert await run_mail() == 5
    assert sorted(mail["To"] for mail in inbox.mails) == [f"Person {n} <p{n}@example.com>" for n in range(5)]
    assert (inbox.connections, inbox.logins) == (1, 1)  # one STARTTLS and one login for the five


async def test_a_connection_the_server_dropped_is_replaced_and_nothing_is_lost(
    db, make_user, make_order, inbox, run_mail
):
    admin, lee, kim = await make_user("admin", name="Ada"), await make_user(), await make_user()
    await make_order(admin, "Leaking tap", owner_id=lee["id"])
    await run_mail()
    inbox.stop()  # the mail server restarts between two batches: the desk's kept connection is dead
    inbox.start()
    await make_order(admin, "Broken window", owner_id=kim["id"])

    assert await run_mail() == 1
    assert [mail["Subject"] for mail in inbox.mails] == ["Ada gave you “Leaking tap”.", "Ada gave you “Broken window”."]
    assert inbox.connections == 2
    job = await db["outbox_events"].find_one({"type": mail_queue.TASK}, sort=[("availableAt", 1), ("_id", -1)])
    assert (job["status"], job["attempts"]) == ("done", 1)  # sent on a new connection at once, not retried later


async def test_a_refused_recipient_fails_alone_and_the_connection_carries_the_others(
    db, make_user, make_order, inbox, run_mail
):
    admin = await make_user("admin", name="Ada")
    lee, nobody, kim = await make_user(name="Lee"), await make_user(email=REFUSED), await make_user(name="Kim")
    for person in (lee, nobody, kim):
        await make_order(admin, "Leaking tap", owner_id=person["id"])

    assert await run_mail() == 3
    assert sorted(mail["To"].split(" <")[0] for mail in inbox.mails) == ["Kim", "Lee"]
    assert inbox.connections == 1
    dead = await db["outbox_events"].find({"type": mail_queue.TASK, "status": "failed"}).to_list()
    assert [job["lastError"] for job in dead] == ["mail refused (550)"]


async def test_a_mail_job_queued_before_jobs_carried_their_mailing_still_sends(
    db, make_user, make_order, inbox, run_mail
):
    """Jobs a desk queued before an upgrade name their mailing alone: its window is read, as it was then."""
    admin, lee = await make_user("admin", name="Ada"), await make_user(name="Lee", email="lee@example.com")
    await make_order(admin, "Leaking tap", owner_id=lee["id"])
    unset = await db["outbox_events"].update_many({"type": mail_queue.TASK}, {"$unset": {"payload": ""}})
    assert unset.modified_count == 2  # the first email's job and the digest's

    await run_mail()

    (first,) = inbox.mails
    assert first["To"] == "Lee <lee@example.com>" and first["Subject"] == "Ada gave you “Leaking tap”."
