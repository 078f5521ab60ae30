"""Creating, reassigning and the System Actor over HTTP (who sees what, cell by cell: test_visibility.py)."""

import pytest
from bson import ObjectId

from desk.actors import SYSTEM_TRIAGE
from desk.errors import Forbidden
from desk.work_orders import service
from desk.work_orders.models import WorkOrderCreate, WorkOrderQuery, WorkOrderUpdate
from tests.helpers import actor


@pytest.mark.parametrize(
    ("role", "for_other", "expected"),
    [
        ("admin", False, 201),
        ("admin", True, 201),
        ("user", False, 201),
        ("user", True, 403),
        ("viewer", False, 403),
        ("viewer", True, 403),
    ],
)
async def test_create_matrix(role, for_other, expected, make_user, client_for, db):
    person, someone = await make_user(role), await make_user("user")
    body = {"title": "New chairs"} | ({"ownerId": someone["id"]} if for_other else {})

    response = await (await client_for(person)).post("/api/v1/work-orders", json=body)

    assert response.status_code == expected
    assert await db["work_orders"].count_documents({}) == (1 if expected == 201 else 0)


async def test_only_admins_reassign_an_order(make_user, client_for, make_order, db):
    sam, priya = await make_user("user"), await make_user("user")
    order = await make_order(sam)

    response = await (await client_for(sam)).patch(
        f"/api/v1/work-orders/{order.id}", json={"version": 1, "ownerId": priya["id"]}
    )

    assert response.status_code == 403
    assert (await db["work_orders"].find_one({}))["ownerId"] == ObjectId(sam["id"])


@pytest.mark.parametrize(
    ("who", "expected"),
    [("owner", 200), ("admin", 200), ("requester", 403), ("colleague", 404), ("viewer", 403)],
)
async def test_its_owner_or_an_admin_puts_an_order_back_in_the_queue(
    who, expected, make_user, change_user, client_for, make_order, db
):
    """`ownerId: null`: the queue. Giving an order up is its owner's; taking it from someone, an admin's."""
    requester, owner, admin = await make_user("user"), await make_user("user"), await make_user("admin")
    order = await make_order(requester, ownerId=None)
    await service.update(
        db=db, actor=actor(admin), order_id=order.id, data=WorkOrderUpdate(version=1, ownerId=owner["id"])
    )
    person = {"owner": owner, "admin": admin, "requester": requester}.get(who) or await make_user("user")
    if who == "viewer":
        person = await change_user(person, role="viewer")

    response = await (await client_for(person)).patch(
        f"/api/v1/work-orders/{order.id}", json={"version": 2, "ownerId": None}
    )

    assert response.status_code == expected, response.text
    stored = await db["work_orders"].find_one({})
    assert stored["ownerId"] == (None if expected == 200 else ObjectId(owner["id"]))
    if expected == 200:
        queue = (await (await client_for(await make_user("user"))).get("/api/v1/work-orders?ownerId=none")).json()
        assert ([o["id"] for o in queue["items"]], queue["total"]) == ([order.id], 1)  # in everyone's queue now


async def test_the_system_actor_is_refused_on_every_general_path(make_user, make_order, db):
    sam = await make_user("user")
    order = await make_order(sam)
    attempts = [
        service.create(db=db, actor=SYSTEM_TRIAGE, data=WorkOrderCreate(title="x")),
        service.get(db=db, actor=SYSTEM_TRIAGE, order_id=order.id),
        service.list_orders(db=db, actor=SYSTEM_TRIAGE, query=WorkOrderQuery()),
        service.update(db=db, actor=SYSTEM_TRIAGE, order_id=order.id, data=WorkOrderUpdate(version=1, priority="low")),
        service.delete(db=db, actor=SYSTEM_TRIAGE, order_id=order.id, version=1),
        service.activity(db=db, actor=SYSTEM_TRIAGE, order_id=order.id),
    ]
    for attempt in attempts:
        with pytest.raises(Forbidden):
            await attempt
    stored = await db["work_orders"].find_one({})
    assert (stored["priority"], stored["version"]) == ("medium", 1)
    assert await db["work_orders"].count_documents({}) == 1


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"active": False}, "Sam Rivera is deactivated."),
        ({"role": "viewer"}, "Sam Rivera is a viewer and cannot work on orders."),
    ],
)
async def test_orders_are_given_only_to_people_who_can_work_on_them(
    change, message, make_user, client_for, make_order, change_user, db
):
    admin, sam = await make_user("admin"), await make_user("user", name="Sam Rivera")
    await change_user(sam, **change)
    order = await make_order(admin, "Leaking tap")
    client = await client_for(admin)

    created = await client.post("/api/v1/work-orders", json={"title": "New chairs", "ownerId": sam["id"]})
    moved = await client.patch(f"/api/v1/work-orders/{order.id}", json={"version": 1, "ownerId": sam["id"]})

    for response in (created, moved):  # a valid request that the person's state refuses: 409, not 400
        assert response.status_code == 409
        error = response.json()["error"]
        assert (error["code"], error["message"], error["details"]) == (
            "CONFLICT",
            message,
            {"fields": [{"field": "ownerId", "message": message, "type": "conflict"}]},
        )
    assert await db["work_orders"].count_documents({}) == 1
    stored = await db["work_orders"].find_one({})
    assert (stored["ownerId"], stored["version"]) == (ObjectId(admin["id"]), 1)


async def test_an_order_kept_by_someone_deactivated_later_can_still_be_edited(
    make_user, client_for, make_order, change_user
):
    admin, sam = await make_user("admin"), await make_user("user")
    order = await make_order(admin, "Leaking tap", ownerId=sam["id"])
    await change_user(sam, active=False)

    response = await (await client_for(admin)).patch(
        f"/api/v1/work-orders/{order.id}", json={"version": 1, "ownerId": sam["id"], "priority": "high"}
    )

    assert response.status_code == 200
    assert (response.json()["ownerId"], response.json()["priority"]) == (sam["id"], "high")
