"""What telling many people costs the database: a comment on an order concerning 50 people sends as many commands
as one concerning 5 (bench/notifications.py prints the figure)."""

from collections import Counter

from desk.work_orders import service as orders
from desk.work_orders.models import CommentCreate
from tests.commands import watched
from tests.conftest import TEST_DB
from tests.helpers import actor, reconfigure

# The comment (6): the order read, the write limit (2), the comment, its change-feed entry (2); its fan-out job,
# stored before the comment (one insert) and settled after the fan-out (one update); then the fan-out: earlier
# commenters (distinct), the people (one find), their preferences and the desk's (one find), the notifications (one
# insert_many), the bells' change-feed entry (2), the mail windows open (one find) and new (one insert_many), their
# jobs (one insert_many).
COMMENT_COMMANDS = 17


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
