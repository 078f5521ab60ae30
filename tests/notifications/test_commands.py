"""What telling many people costs the database: a comment on an order concerning 50 people sends as many commands
as one concerning 5 (bench/notifications.py prints the figure), and what each email's job costs."""

from collections import Counter

from desk import state
from desk.jobs.table import Context, Done, Job
from desk.notifications import mail_queue
from desk.work_orders import service as orders
from desk.work_orders.models import CommentCreate
from tests.commands import watched
from tests.conftest import TEST_DB
from tests.helpers import actor, reconfigure

# The comment (6): the order read, the write limit (2), the comment, its change-feed entry (2); its fan-out job,
# stored before the comment (one insert) and settled after the fan-out (one update); then the fan-out: earlier
# commenters (distinct), the people (one find), their preferences and the desk's (one find), the notifications (one
# insert_many), the bells' change-feed entry (2), the mail windows open (one find) and new (one insert_many), their
# jobs (one insert_many, each carrying its mailing's person and order).
COMMENT_COMMANDS = 17
# An email's job (mail_queue.deliver), once the process has read the unsubscribe signing key (it keeps it): the
# notifications owed claimed (update_many, find), the person (one find), the order (one find), the preferences and
# the desk's (one find), the notifications marked mailed (one update). Its mailing's window is not read: the job
# carries its person and order. It was 8 with the window read and the key read at each email.
EMAIL_COMMANDS = 6


async def comment_commands(mongo_uri, db, make_user, make_order, people: int) -> Counter:
    asker = await make_user()
    order = await make_order(asker, "Heating off", owner_id=None)  # in the queue: everyone sees it
    for _ in range(people - 1):  # these take part in the conversation: the next comment concerns them all
        text = CommentCreate(text="Same here")
        await orders.add_comment(db=db, actor=actor(await make_user()), order_id=order.id, data=text)
    await db["mail_windows"].delete_many({})  # each person's first email of a new window: the costliest path
    stranger = await make_user("admin")  # an admin who never commented: concerns are the 50 others
    async with watched(mongo_uri, TEST_DB) as (counted, commands):
        await orders.add_comment(db=counted, actor=actor(stranger), order_id=order.id, data=CommentCreate(text="Fixed"))
    told = await db["notifications"].count_documents({"text": {"$regex": "Fixed$"}})
    assert told == people
    return Counter(command for command, _ in commands.sent)


async def test_a_comment_concerning_fifty_people_costs_what_one_concerning_five_does(
    mongo_uri, db, make_user, make_order, settings
):
    reconfigure(
        settings,
        desk_smtp_url="smtp://127.0.0.1:2525",
        desk_mail_from="desk@example.com",
        desk_public_url="https://desk.example.com",
    )
    five = await comment_commands(mongo_uri, db, make_user, make_order, 5)
    await db["notifications"].delete_many({})
    fifty = await comment_commands(mongo_uri, db, make_user, make_order, 50)
    assert fifty == five
    assert sum(fifty.values()) == COMMENT_COMMANDS, fifty


async def test_an_email_costs_six_commands_once_the_signing_key_is_read(
    mongo_uri, db, make_user, make_order, inbox, run_mail
):
    admin, lee = await make_user("admin", name="Ada"), await make_user(name="Lee")
    await make_order(admin, "Leaking tap", owner_id=lee["id"])
    await run_mail()  # the worker's first email: it reads the signing key, once
    await make_order(admin, "Broken window", owner_id=lee["id"])  # another order: a new window, its email due now
    (doc,) = (
        await db["outbox_events"].find({"type": mail_queue.TASK, "status": "pending"}).sort("availableAt", 1).to_list(1)
    )

    async def ours() -> bool:
        return True

    job = Job(id=doc["_id"], key=doc["payloadRef"], attempts=1, still_ours=ours, payload=doc.get("payload"))
    async with watched(mongo_uri, TEST_DB) as (counted, commands):
        result = await mail_queue.deliver(Context(db=counted, settings=state.current().settings), job)

    assert isinstance(result, Done) and len(inbox.mails) == 2
    assert inbox.mails[1]["Subject"] == "Ada gave you “Broken window”."
    sent = Counter(command for command, _ in commands.sent if command != "endSessions")
    assert sum(sent.values()) == EMAIL_COMMANDS, sent
