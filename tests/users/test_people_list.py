"""An admin's people list: sorted by name, searched by name or email, names and emails editable, last login kept."""

from datetime import datetime, timedelta

from desk.schema import now
from desk.users import repository as users_repo
from desk.work_orders import service as work_orders_service
from tests.helpers import actor


async def test_people_are_sorted_by_name_and_found_by_name_or_email(make_user, client_for):
    admin = await make_user("admin", name="Dana Admin")
    await make_user("user", name="Sam Rivera", email="sam@example.com")
    await make_user("user", name="priya Shah", email="p.shah@plumbers.example")
    await make_user("viewer", name="Lee Chen", email="lee@example.com")
    await make_user("user", name="Élodie Martin", email="elodie@example.com")
    client = await client_for(admin)

    everyone = (await client.get("/api/v1/admin/users")).json()
    # as a person reads names: a lower-case or accented first letter files with its letter, not after "Z"
    names = ["Dana Admin", "Élodie Martin", "Lee Chen", "priya Shah", "Sam Rivera"]
    assert [p["name"] for p in everyone["items"]] == names
    found = (await client.get("/api/v1/admin/users", params={"q": "PLUMB"})).json()
    assert [p["name"] for p in found["items"]] == ["priya Shah"] and found["total"] == 1
    by_name = (await client.get("/api/v1/admin/users", params={"q": "ee c"})).json()
    assert [p["name"] for p in by_name["items"]] == ["Lee Chen"]
    odd = (await client.get("/api/v1/admin/users", params={"q": ".*"})).json()  # text, not a pattern
    assert odd["items"] == [] and odd["total"] == 0


async def test_a_renamed_person_moves_to_their_new_place_in_every_list_of_people(make_user, client_for, db):
    admin = await make_user("admin", name="Dana Admin")
    zoe = await make_user("user", name="Zoe Park")
    await make_user("user", name="Mo Ali")
    client = await client_for(admin)

    await client.patch(f"/api/v1/admin/users/{zoe['id']}", json={"name": "ángela Park"})

    assert [p["name"] for p in (await client.get("/api/v1/admin/users")).json()["items"]] == [
        "ángela Park",
        "Dana Admin",
        "Mo Ali",
    ]
    assert [p["name"] for p in (await client.get("/api/v1/people")).json()] == ["ángela Park", "Dana Admin", "Mo Ali"]
    names, assignable, _ = await work_orders_service.owner_choices(db=db, actor=actor(admin))  # the owner pickers
    assert list(names.values()) == list(assignable.values()) == ["ángela Park", "Dana Admin", "Mo Ali"]


async def test_people_stored_before_the_name_key_are_sorted_once_the_desk_starts(make_user, client_for, db):
    admin = await make_user("admin", name="Dana Admin")
    await make_user("user", name="bea Stone")
    await make_user("user", name="Carl Ode")
    await db["users"].update_many({}, {"$unset": {"nameKey": ""}})  # as an older desk stored them
    await db["users"].drop_index([("nameKey", 1), ("_id", 1)])
    await db["users"].create_index([("name", 1), ("_id", 1)], name="by_name")

    await users_repo.ensure_indexes(db)  # what every start runs

    listed = (await (await client_for(admin)).get("/api/v1/admin/users")).json()
    assert [p["name"] for p in listed["items"]] == ["bea Stone", "Carl Ode", "Dana Admin"]
    keys = [spec["key"] for spec in (await db["users"].index_information()).values()]
    assert [("nameKey", 1), ("_id", 1)] in keys and [("name", 1), ("_id", 1)] not in keys  # the old index is gone


async def test_an_admin_edits_name_and_email_lower_cased_and_unique(make_user, client_for, anonymous):
    admin, sam = await make_user("admin"), await make_user("user", email="sam@example.com")
    await make_user("user", email="taken@example.com")
    client = await client_for(admin)
    path = f"/api/v1/admin/users/{sam['id']}"

    changed = await client.patch(path, json={"name": "Samuel Rivera", "email": "Samuel.Rivera@Example.com"})
    assert changed.status_code == 200
    assert (changed.json()["name"], changed.json()["email"]) == ("Samuel Rivera", "samuel.rivera@example.com")
    taken = await client.patch(path, json={"email": "TAKEN@example.com"})
    assert taken.status_code == 409 and "has that email" in taken.json()["error"]["message"]
    assert (await client.get("/api/v1/admin/users", params={"q": "samuel"})).json()["total"] == 1

    login = await anonymous.post(
        "/api/v1/auth/login",
        json={"email": "samuel.rivera@example.com", "password": sam["password"]},
        headers={"X-Desk-CSRF": "1"},
    )
    assert login.status_code == 200  # the new email logs in


async def test_last_login_is_kept(make_user, client_for, anonymous):
    admin, sam = await make_user("admin"), await make_user("user")
    client = await client_for(admin)

    def last_login(people: dict) -> str | None:
        return next(p for p in people["items"] if p["id"] == sam["id"])["lastLoginAt"]

    assert last_login((await client.get("/api/v1/admin/users")).json()) is None
    response = await anonymous.post(
        "/api/v1/auth/login", json={"email": sam["email"], "password": sam["password"]}, headers={"X-Desk-CSRF": "1"}
    )
    assert response.status_code == 200
    seen = datetime.fromisoformat(last_login((await client.get("/api/v1/admin/users")).json()))
    assert now() - timedelta(minutes=1) < seen <= now()
