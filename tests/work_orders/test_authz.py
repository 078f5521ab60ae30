"""The authorization matrix, cell by cell: admin / user / viewer x own / someone else's x every action."""

import pytest
from bson import ObjectId

from desk.actors import SYSTEM_TRIAGE
from desk.errors import Forbidden
from desk.work_orders import service
from desk.work_orders.models import WorkOrderCreate, WorkOrderQuery, WorkOrderUpdate

# (role, whose order, action) -> HTTP status the person gets
MATRIX = {
    ("admin", "own"): {"get": 200, "activity": 200, "update": 200, "delete": 204},
    ("admin", "other"): {"get": 200, "activity": 200, "update": 200, "delete": 204},
    ("user", "own"): {"get": 200, "activity": 200, "update": 200, "delete": 204},
    ("user", "other"): {"get": 404, "activity": 404, "update": 404, "delete": 404},
    ("viewer", "own"): {"get": 200, "activity": 200, "update": 403, "delete": 403},
    ("viewer", "other"): {"get": 404, "activity": 404, "update": 404, "delete": 404},
}
CELLS = [(role, whose, action, status) for (role, whose), row in MATRIX.items() for action, status in row.items()]


def _first_role(role: str) -> str:
    """A viewer owns orders given to them before they became one: orders are not given to viewers."""
    return "user" if role == "viewer" else role


@pytest.mark.parametrize(("role", "whose", "action", "expected"), CELLS)
async def test_matrix_cell(role, whose, action, expected, make_user, client_for, make_order, change_user, db):
    person, someone = await make_user(_first_role(role)), await make_user("user")
    admin = await make_user("admin")
    owner = person if whose == "own" else someone
    order = await make_order(admin, "Leaking tap", ownerId=owner["id"])
    if role == "viewer":
        person = await change_user(person, role="viewer")
    client = await client_for(person)
    url = f"/api/v1/work-orders/{order.id}"

    if action == "get":
        response = await client.get(url)
    elif action == "activity":
        response = await client.get(f"{url}/activity")
    elif action == "update":
        response = await client.patch(url, json={"version": 1, "title": "Changed"})
    else:
        response = await client.delete(url, params={"version": 1})

    assert response.status_code == expected
    stored = await db["work_orders"].find_one({"_id": ObjectId(order.id)})
    if expected >= 400:
        assert response.json()["error"]["code"] == {403: "FORBIDDEN", 404: "NOT_FOUND"}[expected]
        assert stored is not None and stored["title"] == "Leaking tap" and stored["version"] == 1
    elif action == "update":
        assert stored["title"] == "Changed"
    elif action == "delete":
        assert stored is None


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


@pytest.mark.parametrize("role", ["admin", "user", "viewer"])
async def test_lists_show_only_what_the_role_may_see(role, make_user, client_for, make_order, change_user):
    person, someone, admin = await make_user(_first_role(role)), await make_user("user"), await make_user("admin")
    await make_order(admin, "Mine", ownerId=person["id"])
    await make_order(admin, "Theirs", ownerId=someone["id"])
    if role == "viewer":
        person = await change_user(person, role="viewer")
    client = await client_for(person)

    titles = {o["title"] for o in (await client.get("/api/v1/work-orders")).json()["items"]}
    foreign = await client.get("/api/v1/work-orders", params={"ownerId": someone["id"]})

    if role == "admin":
        assert titles == {"Mine", "Theirs"}
        assert [o["title"] for o in foreign.json()["items"]] == ["Theirs"]
    else:
        assert titles == {"Mine"}
        assert foreign.status_code == 403


async def test_only_admins_reassign_an_order(make_user, client_for, make_order, db):
    sam, priya = await make_user("user"), await make_user("user")
    order = await make_order(sam)

    response = await (await client_for(sam)).patch(
        f"/api/v1/work-orders/{order.id}", json={"version": 1, "ownerId": priya["id"]}
    )

    assert response.status_code == 403
    assert (await db["work_orders"].find_one({}))["ownerId"] == ObjectId(sam["id"])


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
