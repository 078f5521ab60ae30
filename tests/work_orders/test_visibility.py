"""Who sees and changes what, in the services, cell by cell (DESIGN §2, the team model).

Relations: someone else asked for it and a third person works on it ("other"), the person asked for
it ("requester"), works on it ("owner"), or it waits unassigned ("queue").
"""

import pytest
from bson import ObjectId

from desk.actors import SYSTEM_TRIAGE
from desk.errors import Conflict, Forbidden, NotFound
from desk.work_orders import repository as repo
from desk.work_orders import service, triage_door
from desk.work_orders.models import CommentCreate, WorkOrderCreate, WorkOrderQuery, WorkOrderUpdate
from tests.helpers import actor

OK, HIDDEN, REFUSED = "ok", "hidden", "refused"
ACTIONS = ("get", "activity", "comments", "comment", "update", "take", "take+edit", "delete", "listed")
WRITES = {"update", "take", "take+edit", "delete"}
MATRIX = {  # (role, relation) -> what each action gives the person
    ("admin", "other"): dict.fromkeys(ACTIONS, OK),
    ("admin", "queue"): dict.fromkeys(ACTIONS, OK),
    # reassigning is for admins
    ("user", "requester"): dict.fromkeys(ACTIONS, OK) | {"take": REFUSED, "take+edit": REFUSED},
    ("user", "requester, queued"): dict.fromkeys(ACTIONS, OK),
    ("user", "owner"): dict.fromkeys(ACTIONS, OK),
    # a take changes the owner alone: the rest is for once the order is theirs
    ("user", "queue"): dict.fromkeys(ACTIONS, OK) | {"update": REFUSED, "take+edit": REFUSED, "delete": REFUSED},
    ("user", "other"): dict.fromkeys(ACTIONS, HIDDEN),
    ("viewer", "other"): dict.fromkeys(ACTIONS, OK) | dict.fromkeys(WRITES, REFUSED),
    ("viewer", "queue"): dict.fromkeys(ACTIONS, OK) | dict.fromkeys(WRITES, REFUSED),
}
CELLS = [(role, rel, action, want) for (role, rel), row in MATRIX.items() for action, want in row.items()]


async def _order_for(relation: str, person: dict, make_user, db):
    """An order in `relation` to `person`, made through the service by whoever asked for it."""
    asker, worker = await make_user("user"), await make_user("user")
    requester = person if relation.startswith("requester") else asker
    owner = {"owner": person, "queue": None, "requester, queued": None}.get(relation, worker)
    data = WorkOrderCreate.model_validate({"title": "Leaking tap", "ownerId": None})
    order = await service.create(db=db, actor=actor(requester), data=data)
    if owner is not None:
        admin = await make_user("admin")
        update = WorkOrderUpdate(version=1, ownerId=owner["id"])
        order = await service.update(db=db, actor=actor(admin), order_id=order.id, data=update)
    return order


async def _attempt(action: str, who, order, db):
    at = {"db": db, "actor": who, "order_id": order.id}
    attempts = {
        "get": lambda: service.get_or_raise(**at),
        "activity": lambda: service.activity(**at),
        "comments": lambda: service.comments(**at),
        "comment": lambda: service.add_comment(**at, data=CommentCreate(text="On it")),
        "update": lambda: service.update(**at, data=WorkOrderUpdate(version=order.version, title="Changed")),
        "take": lambda: service.update(**at, data=WorkOrderUpdate(version=order.version, ownerId=who.id)),
        "take+edit": lambda: service.update(
            **at, data=WorkOrderUpdate(version=order.version, ownerId=who.id, title="Changed")
        ),
        "delete": lambda: service.delete(**at, version=order.version),
    }
    if action in attempts:
        return await attempts[action]()
    page = await service.list_orders(db=db, actor=who, query=WorkOrderQuery())
    if order.id not in {o.id for o in page.items}:
        raise NotFound("not listed")
    assert page.total == len(page.items)  # the counters agree with what the list shows
    return page


@pytest.mark.parametrize(("role", "relation", "action", "expected"), CELLS)
async def test_visibility_cell(role, relation, action, expected, make_user, change_user, db):
    person = await make_user("user" if role == "viewer" else role)
    order = await _order_for(relation, person, make_user, db)
    if role == "viewer":
        person = await change_user(person, role="viewer")
    before = await db["work_orders"].find_one({"_id": ObjectId(order.id)})

    outcome = OK
    try:
        await _attempt(action, actor(person), order, db)
    except NotFound:
        outcome = HIDDEN
    except Forbidden:
        outcome = REFUSED

    assert outcome == expected
    after = await db["work_orders"].find_one({"_id": ObjectId(order.id)})
    if outcome != OK or action in ("get", "activity", "comments", "comment", "listed"):
        assert after == before  # nothing written (a comment is on the timeline, not the order)
    elif action == "update":
        assert after["title"] == "Changed"
    elif action == "take":
        assert after["ownerId"] == ObjectId(person["id"])
    elif action == "take+edit":
        assert (after["ownerId"], after["title"]) == (ObjectId(person["id"]), "Changed")
    elif action == "delete":
        assert after is None


async def test_a_user_lists_what_they_asked_for_work_on_and_the_queue_with_right_totals(make_user, db):
    sam, priya, admin = await make_user("user"), await make_user("user"), await make_user("admin")
    queued = WorkOrderCreate.model_validate({"title": "Queued by Priya", "ownerId": None})
    await service.create(db=db, actor=actor(priya), data=queued)
    await service.create(db=db, actor=actor(priya), data=WorkOrderCreate(title="Priya's own"))
    await service.create(db=db, actor=actor(sam), data=WorkOrderCreate(title="Sam's own", priority="high"))
    handed = await service.create(db=db, actor=actor(sam), data=WorkOrderCreate(title="Asked by Sam"))
    update = WorkOrderUpdate(version=1, ownerId=priya["id"])
    await service.update(db=db, actor=actor(admin), order_id=handed.id, data=update)
    given = await service.create(
        db=db, actor=actor(admin), data=WorkOrderCreate(title="Given to Sam", ownerId=sam["id"])
    )

    async def titles(who, mine=False, **filters):
        page = await service.list_orders(db=db, actor=actor(who), query=WorkOrderQuery(**filters), mine=mine)
        assert page.total == len(page.items)
        return {o.title for o in page.items}

    assert await titles(sam) == {"Queued by Priya", "Sam's own", "Asked by Sam", "Given to Sam"}
    assert await titles(sam, priority="high") == {"Sam's own"}
    assert await titles(sam, ownerId="none") == {"Queued by Priya"}
    assert await titles(sam, ownerId=sam["id"]) == {"Sam's own", "Given to Sam"}
    assert await titles(sam, mine=True) == {"Sam's own", "Asked by Sam", "Given to Sam"}  # the copilot's "own"
    assert await titles(priya) == {"Queued by Priya", "Priya's own", "Asked by Sam"}
    assert await titles(priya, mine=True) == {"Queued by Priya", "Priya's own", "Asked by Sam"}  # her queued ask too
    assert await titles(admin, ownerId="none") == {"Queued by Priya"}
    assert len(await titles(admin)) == 5
    with pytest.raises(Forbidden):
        await titles(sam, ownerId=priya["id"])
    assert given.requester_id == admin["id"] and given.owner_id == sam["id"]


async def test_two_people_taking_the_same_order_one_wins_the_other_is_told(make_user, db):
    sam, priya, lee = await make_user("user"), await make_user("user"), await make_user("user")
    order = await service.create(
        db=db, actor=actor(lee), data=WorkOrderCreate.model_validate({"title": "Queued", "ownerId": None})
    )
    await service.update(db=db, actor=actor(sam), order_id=order.id, data=WorkOrderUpdate(version=1, ownerId=sam["id"]))

    with pytest.raises(Conflict) as lost:
        await service.update(
            db=db, actor=actor(priya), order_id=order.id, data=WorkOrderUpdate(version=1, ownerId=priya["id"])
        )

    assert lost.value.message == "Someone else took this work order first; it is no longer in the queue."
    assert (await db["work_orders"].find_one({}))["ownerId"] == ObjectId(sam["id"])


async def test_losing_a_take_at_the_same_moment_shows_nothing_of_the_order(make_user, db, monkeypatch):
    sam, priya, lee = await make_user("user"), await make_user("user"), await make_user("user")
    order = await service.create(
        db=db, actor=actor(lee), data=WorkOrderCreate.model_validate({"title": "Queued", "ownerId": None})
    )
    original = repo.update

    async def sam_saves_first(*args, **kwargs):  # Sam's take lands between Priya's read and her write
        monkeypatch.setattr(repo, "update", original)
        await service.update(
            db=db, actor=actor(sam), order_id=order.id, data=WorkOrderUpdate(version=1, ownerId=sam["id"])
        )
        return await original(*args, **kwargs)

    monkeypatch.setattr(repo, "update", sam_saves_first)
    with pytest.raises(Conflict) as lost:
        await service.update(
            db=db, actor=actor(priya), order_id=order.id, data=WorkOrderUpdate(version=1, ownerId=priya["id"])
        )

    assert lost.value.message == "Someone else took this work order first; it is no longer in the queue."
    assert lost.value.details is None  # the order is Sam's now: not hers to see
    assert (await db["work_orders"].find_one({}))["ownerId"] == ObjectId(sam["id"])


async def test_an_id_alone_never_tells_that_someones_order_exists(make_user, db):
    sam, lee = await make_user("user"), await make_user("user")
    private = await service.create(db=db, actor=actor(sam), data=WorkOrderCreate(title="Sam's own"))
    for version in (1, 2):
        await service.update(
            db=db,
            actor=actor(sam),
            order_id=private.id,
            data=WorkOrderUpdate(version=version, priority="high" if version == 1 else "low"),
        )

    with pytest.raises(NotFound):  # never in the queue: as missing as a made-up id, at any version sent
        await service.update(
            db=db, actor=actor(lee), order_id=private.id, data=WorkOrderUpdate(version=1, ownerId=lee["id"])
        )


async def test_a_conflict_says_what_happened_whoever_saved(make_user, db):
    sam = await make_user("user")
    order = await service.create(db=db, actor=actor(sam), data=WorkOrderCreate(title="Leaking tap"))
    await service.update(db=db, actor=actor(sam), order_id=order.id, data=WorkOrderUpdate(version=1, priority="high"))

    with pytest.raises(Conflict) as retried:  # Sam's own save, sent again after a timeout
        await service.update(
            db=db, actor=actor(sam), order_id=order.id, data=WorkOrderUpdate(version=1, priority="high")
        )
    with pytest.raises(Conflict) as ahead:
        await service.update(
            db=db, actor=actor(sam), order_id=order.id, data=WorkOrderUpdate(version=99, priority="low")
        )

    assert retried.value.message == (
        "This work order was saved since the version you have (1; it is at 2 now). "
        "Reload to see what changed, then apply yours again."
    )
    assert ahead.value.message == "This work order is at version 2; there is no version 99 of it yet."
    assert retried.value.details["current"]["version"] == ahead.value.details["current"]["version"] == 2


async def test_a_person_cannot_take_an_order_from_a_colleague(make_user, db):
    sam, priya = await make_user("user"), await make_user("user")
    order = await service.create(db=db, actor=actor(sam), data=WorkOrderCreate(title="Sam's"))

    with pytest.raises(NotFound):  # not theirs to see at all
        await service.update(
            db=db, actor=actor(priya), order_id=order.id, data=WorkOrderUpdate(version=1, ownerId=priya["id"])
        )


async def test_the_ai_opt_out_covers_the_requester_and_the_owner(make_user, change_user, db):
    sam, priya, admin = await make_user("user"), await make_user("user"), await make_user("admin")
    queued = WorkOrderCreate.model_validate({"title": "Queued", "ownerId": None})
    order = await service.create(db=db, actor=actor(sam), data=queued)
    update = WorkOrderUpdate(version=1, ownerId=priya["id"])
    await service.update(db=db, actor=actor(admin), order_id=order.id, data=update)

    async def allowed() -> bool:
        return (await triage_door.triage_read(db=db, actor=SYSTEM_TRIAGE, order_id=order.id)).ai_allowed

    assert await allowed()
    await change_user(priya, aiEnabled=False)  # the owner
    assert not await allowed()
    await change_user(priya, aiEnabled=True)
    await change_user(sam, aiEnabled=False)  # the requester, whose words would go to the model
    assert not await allowed()
