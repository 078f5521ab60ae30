"""Who hears of what: every event reaches the people it concerns, never the one who caused it."""

from bson import ObjectId

from desk.actors import SYSTEM_TRIAGE
from desk.notifications import events, outbox, service
from desk.notifications.models import MarkRead, NotificationQuery, PreferencesUpdate
from desk.work_orders import service as orders
from desk.work_orders.models import CommentCreate, WorkOrderUpdate
from tests.helpers import actor


async def bell(db, user) -> list[tuple[str, str]]:
    page = await service.page(db=db, actor=actor(user), query=NotificationQuery())
    return [(item.kind, item.text) for item in page.items]


async def test_an_order_given_to_someone_tells_them_and_not_the_admin_who_gave_it(db, make_user, make_order):
    admin, lee = await make_user("admin", name="Ada Admin"), await make_user(name="Lee")
    order = await make_order(admin, "Leaking tap", owner_id=lee["id"])

    assert await bell(db, lee) == [("assigned", "Ada Admin gave you “Leaking tap”.")]
    assert await bell(db, admin) == []
    page = await service.page(db=db, actor=actor(lee), query=NotificationQuery())
    assert page.items[0].work_order_id == order.id and page.unread == 1 and page.total == 1


async def test_reassigning_tells_the_new_owner_and_the_one_it_was_taken_from(db, make_user, make_order):
    admin, lee, kim = await make_user("admin", name="Ada"), await make_user(), await make_user()
    order = await make_order(admin, "Broken window", owner_id=lee["id"])
    change = WorkOrderUpdate(version=order.version, ownerId=kim["id"])
    await orders.update(db=db, actor=actor(admin), order_id=order.id, data=change)

    assert await bell(db, kim) == [("assigned", "Ada gave you “Broken window”.")]
    assert (await bell(db, lee))[0] == ("assigned", "Ada took “Broken window” off you.")


async def test_taking_an_order_from_the_queue_tells_nobody_but_the_requester_hears_its_status(
    db, make_user, make_order
):
    asker, worker = await make_user(name="Asker"), await make_user(name="Worker")
    order = await make_order(asker, "Flickering light", owner_id=None)
    taken = await orders.update(
        db=db, actor=actor(worker), order_id=order.id, data=WorkOrderUpdate(version=order.version, ownerId=worker["id"])
    )
    assert await bell(db, worker) == [] and await bell(db, asker) == []

    change = WorkOrderUpdate(version=taken.version, status="done")
    await orders.update(db=db, actor=actor(worker), order_id=order.id, data=change)
    assert await bell(db, asker) == [("statusChanged", "Worker changed “Flickering light” from Pending to Done.")]
    assert await bell(db, worker) == []


async def test_a_comment_reaches_requester_owner_and_earlier_commenters_but_not_its_author(db, make_user, make_order):
    admin = await make_user("admin", name="Ada")
    asker, owner, viewer = await make_user(name="Asker"), await make_user(name="Owner"), await make_user("viewer")
    order = await make_order(asker, "Heating off", owner_id=None)
    await orders.update(
        db=db, actor=actor(admin), order_id=order.id, data=WorkOrderUpdate(version=order.version, ownerId=owner["id"])
    )
    await orders.add_comment(db=db, actor=actor(viewer), order_id=order.id, data=CommentCreate(text="Seen it too"))
    await orders.add_comment(db=db, actor=actor(owner), order_id=order.id, data=CommentCreate(text="On my way <b>"))

    said = ("commented", "Owner commented on “Heating off”: On my way <b>")
    assert (await bell(db, asker))[0] == said
    assert (await bell(db, viewer))[0] == said  # viewers see every order: they took part, they hear
    assert [kind for kind, _ in await bell(db, owner)] == ["commented", "assigned"]  # the viewer's comment
    assert await bell(db, admin) == []


async def test_deactivated_people_and_people_who_cannot_see_the_order_hear_nothing(
    db, make_user, make_order, change_user
):
    asker, owner, other = await make_user(), await make_user(), await make_user()
    order = await make_order(asker, "Door stuck", owner_id=None)
    # `other` commented while the order was in the queue (everyone saw it), then it went to `owner`
    await orders.add_comment(db=db, actor=actor(other), order_id=order.id, data=CommentCreate(text="Me too"))
    current = await orders.get_or_raise(db=db, actor=actor(asker), order_id=order.id)
    await orders.update(
        db=db, actor=actor(owner), order_id=order.id, data=WorkOrderUpdate(version=current.version, ownerId=owner["id"])
    )
    await change_user(asker, active=False)
    await orders.add_comment(db=db, actor=actor(owner), order_id=order.id, data=CommentCreate(text="Fixed"))

    assert await bell(db, other) == []
    assert [kind for kind, _ in await bell(db, asker)] == ["commented"]  # from before: none since deactivation


async def test_the_assistants_changes_are_news_to_the_person_it_acts_for(db, make_user, make_order):
    me = await make_user(name="Sam")
    order = await make_order(me, "Clean the gutters")
    change = WorkOrderUpdate(version=order.version, status="in_progress")
    await orders.update(db=db, actor=actor(me), order_id=order.id, data=change, run_id=str(ObjectId()))

    assert await bell(db, me) == [
        ("statusChanged", "Sam’s assistant changed “Clean the gutters” from Pending to In progress.")
    ]


async def test_flags_reach_only_the_admins_who_opted_in(db, make_user, make_order):
    keen, busy = await make_user("admin"), await make_user("admin")
    order = await make_order(await make_user(), "Smell of gas")
    await service.update_preferences(
        db=db, actor=actor(keen), data=PreferencesUpdate.model_validate({"inApp": {"flagged": True}})
    )
    await outbox.made(db, events.flagged(actor=SYSTEM_TRIAGE, order_id=order.id))

    assert await bell(db, keen) == [("flagged", "The triage agent flagged “Smell of gas” for the dispatcher.")]
    assert await bell(db, busy) == []


async def test_a_kind_switched_off_in_the_desk_stays_out_of_the_bell(db, make_user, make_order):
    admin, lee = await make_user("admin"), await make_user()
    await service.update_preferences(
        db=db, actor=actor(lee), data=PreferencesUpdate.model_validate({"inApp": {"assigned": False}})
    )
    await make_order(admin, owner_id=lee["id"])
    assert await bell(db, lee) == []


async def test_marking_read_one_then_all(db, make_user, make_order):
    admin, lee = await make_user("admin"), await make_user()
    first = await make_order(admin, "One", owner_id=lee["id"])
    await make_order(admin, "Two", owner_id=lee["id"])
    page = await service.page(db=db, actor=actor(lee), query=NotificationQuery())
    one = next(item for item in page.items if item.work_order_id == first.id)

    assert await service.mark_read(db=db, actor=actor(lee), data=MarkRead(ids=[one.id])) == 1
    assert await service.mark_read(db=db, actor=actor(admin), data=MarkRead(all=True)) == 0  # theirs, not lee's
    assert await service.unread(db=db, actor=actor(lee)) == 1
    unread = await service.page(db=db, actor=actor(lee), query=NotificationQuery(unread=True))
    assert [item.text.endswith("“Two”.") for item in unread.items] == [True]
    assert await service.mark_read(db=db, actor=actor(lee), data=MarkRead(all=True)) == 0
