"""Admins run users: create, list, change role / AI access / active, reset passwords; profiles."""

import unicodedata

import pytest
from bson import ObjectId

from desk.auth.passwords import verify_password
from desk.errors import Forbidden
from desk.users import service
from tests.helpers import PASSWORD, actor


async def test_admin_creates_a_user_who_can_then_log_in(make_user, client_for, anonymous, db, owasp_hashing):
    admin = await make_user("admin")
    client = await client_for(admin)

    created = await client.post(
        "/api/v1/admin/users",
        json={"email": "New.Person@Example.com", "name": "New Person", "role": "viewer", "password": "tulip-orbit-42"},
    )
    login = await anonymous.post(
        "/api/v1/auth/login", json={"email": "new.person@example.com", "password": "tulip-orbit-42"}
    )

    assert created.status_code == 201
    assert created.json() | {"id": None, "createdAt": None, "updatedAt": None} == {
        "id": None,
        "email": "new.person@example.com",
        "name": "New Person",
        "role": "viewer",
        "aiEnabled": True,
        "active": True,
        "createdAt": None,
        "updatedAt": None,
        "lockedUntil": None,
        "lastLoginAt": None,
    }
    assert login.status_code == 200
    stored = await db["users"].find_one({"email": "new.person@example.com"})
    assert stored["passwordHash"].startswith("$argon2id$v=19$m=19456,t=2,p=1$")


async def test_duplicate_email_is_a_conflict(make_user, client_for):
    admin = await make_user("admin", email="admin@example.com")
    body = {"email": "ADMIN@example.com", "name": "Twin", "role": "user", "password": "tulip-orbit-42"}

    response = await (await client_for(admin)).post("/api/v1/admin/users", json=body)

    assert response.status_code == 409
    assert response.json()["error"]["details"] == {
        "fields": [{"field": "email", "message": "A user with that email already exists.", "type": "conflict"}]
    }


async def test_a_look_alike_address_is_the_same_address(make_user, client_for, anonymous, db):
    # "fi" as one ligature character, or full-width letters, read as finn: they were second accounts beside his
    admin = await make_user("admin")
    await make_user("user", email="finn@example.com")
    client = await client_for(admin)

    for look_alike in ("\ufb01nn@example.com", "\uff46\uff49\uff4e\uff4e@example.com", "FINN@\uff45xample.com"):
        body = {"email": look_alike, "name": "Twin", "role": "user", "password": "tulip-orbit-42"}
        response = await client.post("/api/v1/admin/users", json=body)
        assert response.status_code == 409, look_alike

    login = await anonymous.post("/api/v1/auth/login", json={"email": "\ufb01nn@example.com", "password": PASSWORD})
    assert login.status_code == 200 and login.json()["email"] == "finn@example.com"
    assert await db["users"].count_documents({"name": "Twin"}) == 0

    # an address stored as typed, before addresses were normalized, still logs in as typed
    await db["users"].update_one({"email": "finn@example.com"}, {"$set": {"email": "\ufb01nn@example.com"}})
    login = await anonymous.post("/api/v1/auth/login", json={"email": "\ufb01nn@example.com", "password": PASSWORD})
    assert login.status_code == 200


@pytest.mark.parametrize(
    ("password", "reason"),
    [
        ("short", "at least 12"),
        ("eleven char", "at least 12"),
        ("qwerty123456", "too common"),
        ("Q1W2E3R4T5Y6", "too common"),
        ("Password1234", "too common"),  # a common word with digits around it, to reach twelve
        ("!iloveyou2024", "too common"),
        ("123456789012", "too common"),  # nothing but digits
        ("x" * 129, "at most 128"),
        (" " * 12, "more in it than spaces"),
        ("\u200b" * 12, "more in it than spaces"),
        ("\t \u3164 " * 4, "more in it than spaces"),
        # judged in the NFKC form that is hashed too: it was let in, and "password1234" then logged in
        ("".join(chr(ord(c) + 0xFEE0) for c in "password1234"), "too common"),  # full-width letters and digits
        (unicodedata.normalize("NFD", "\u00e9" * 10 + "1"), "at least 12"),  # 21 code points, 11 characters
    ],
)
async def test_weak_passwords_are_refused(password, reason, make_user, client_for, db):
    admin = await make_user("admin")
    body = {"email": "weak@example.com", "name": "Weak", "role": "user", "password": password}

    response = await (await client_for(admin)).post("/api/v1/admin/users", json=body)

    assert response.status_code == 400
    assert reason in response.json()["error"]["message"]
    assert await db["users"].count_documents({"email": "weak@example.com"}) == 0


async def test_a_long_passphrase_is_fine(make_user, client_for, anonymous):
    admin = await make_user("admin")
    phrase = "the quick brown fox jumps over the lazy dog while the office kettle boils " * 1
    assert len(phrase) >= 64
    body = {"email": "long@example.com", "name": "Long", "role": "user", "password": phrase}

    assert (await (await client_for(admin)).post("/api/v1/admin/users", json=body)).status_code == 201
    assert (
        await anonymous.post("/api/v1/auth/login", json={"email": "long@example.com", "password": phrase})
    ).status_code == 200


async def test_an_admin_reads_one_person_by_id_and_no_one_else_may(make_user, client_for):
    # a script had to page the whole list to read one person (GET answered 405, "it takes PATCH")
    admin, sam = await make_user("admin"), await make_user("user", name="Sam Rivera")
    admins = await client_for(admin)

    found = await admins.get(f"/api/v1/admin/users/{sam['id']}")
    missing = await admins.get(f"/api/v1/admin/users/{ObjectId()}")
    not_an_id = await admins.get("/api/v1/admin/users/nobody")
    own = await (await client_for(sam)).get(f"/api/v1/admin/users/{sam['id']}")  # an admin route, even for oneself

    assert found.status_code == 200 and (found.json()["id"], found.json()["name"]) == (sam["id"], "Sam Rivera")
    assert "passwordHash" not in found.json()
    assert [missing.status_code, not_an_id.status_code, own.status_code] == [404, 404, 403]


async def test_admin_changes_role_ai_access_and_active(make_user, client_for):
    admin, sam = await make_user("admin"), await make_user("user")

    response = await (await client_for(admin)).patch(
        f"/api/v1/admin/users/{sam['id']}", json={"role": "viewer", "aiEnabled": False, "name": "Sam R."}
    )

    assert response.status_code == 200
    assert (response.json()["role"], response.json()["aiEnabled"], response.json()["name"]) == (
        "viewer",
        False,
        "Sam R.",
    )
    sams = await client_for(sam)
    assert (await sams.post("/api/v1/work-orders", json={"title": "x"})).status_code == 403


async def test_a_role_change_applies_to_open_sessions_on_their_next_request(make_user, client_for):
    admin, sam = await make_user("admin"), await make_user("user")
    sams, admins = await client_for(sam), await client_for(admin)
    assert (await sams.post("/api/v1/work-orders", json={"title": "Before"})).status_code == 201

    await admins.patch(f"/api/v1/admin/users/{sam['id']}", json={"role": "viewer"})
    assert (await sams.get("/api/v1/auth/me")).json()["role"] == "viewer"
    assert (await sams.post("/api/v1/work-orders", json={"title": "After"})).status_code == 403

    await admins.patch(f"/api/v1/admin/users/{sam['id']}", json={"role": "admin"})
    assert (await sams.get("/api/v1/admin/users")).status_code == 200


async def test_password_reset_lets_the_user_in_with_the_new_one_only(make_user, client_for, anonymous):
    admin, sam = await make_user("admin"), await make_user("user", email="sam@example.com")

    await (await client_for(admin)).patch(f"/api/v1/admin/users/{sam['id']}", json={"password": "fresh-start-2026"})

    old = await anonymous.post("/api/v1/auth/login", json={"email": "sam@example.com", "password": PASSWORD})
    new = await anonymous.post("/api/v1/auth/login", json={"email": "sam@example.com", "password": "fresh-start-2026"})
    assert (old.status_code, new.status_code) == (401, 200)


async def test_an_update_to_the_values_already_there_writes_nothing(make_user, client_for, db):
    admin, sam = await make_user("admin"), await make_user("user", name="Sam Rivera")
    before = await db["users"].find_one({"_id": ObjectId(sam["id"])})

    response = await (await client_for(admin)).patch(
        f"/api/v1/admin/users/{sam['id']}", json={"name": "Sam Rivera", "role": "user", "active": True}
    )

    assert response.status_code == 200 and response.json()["name"] == "Sam Rivera"
    assert await db["users"].find_one({"_id": ObjectId(sam["id"])}) == before


async def test_password_reset_by_an_admin_revokes_every_api_token(make_user, client_for, anonymous, db):
    admin, sam, priya = await make_user("admin"), await make_user("user"), await make_user("user")
    sams, priyas = await client_for(sam), await client_for(priya)
    for name in ("laptop script", "reporting"):
        await sams.post("/api/v1/auth/tokens", json={"name": name})
    kept = (await priyas.post("/api/v1/auth/tokens", json={"name": "kept"})).json()["secret"]
    secret = (await sams.post("/api/v1/auth/tokens", json={"name": "ci"})).json()["secret"]

    reset = await (await client_for(admin)).patch(
        f"/api/v1/admin/users/{sam['id']}", json={"password": "fresh-start-2026"}
    )

    assert reset.status_code == 200
    anonymous.headers["Authorization"] = f"Bearer {secret}"
    assert (await anonymous.get("/api/v1/work-orders")).status_code == 401
    anonymous.headers["Authorization"] = f"Bearer {kept}"
    assert (await anonymous.get("/api/v1/work-orders")).status_code == 200
    assert await db["api_tokens"].count_documents({"userId": ObjectId(sam["id"])}) == 0


async def test_changing_ones_own_password_keeps_ones_api_tokens(make_user, client_for, anonymous, db):
    # Like a personal access token elsewhere: a token is revoked on its own, a reset by an admin revokes them all.
    sam = await make_user("user")
    secret = (await (await client_for(sam)).post("/api/v1/auth/tokens", json={"name": "script"})).json()["secret"]

    await service.change_own_password(db=db, actor=actor(sam), current=PASSWORD, new="another passphrase")

    anonymous.headers["Authorization"] = f"Bearer {secret}"
    assert (await anonymous.get("/api/v1/work-orders")).status_code == 200


async def test_admins_cannot_demote_or_deactivate_themselves(make_user, client_for, db):
    admin = await make_user("admin")
    client = await client_for(admin)

    demote = await client.patch(f"/api/v1/admin/users/{admin['id']}", json={"role": "user"})
    deactivate = await client.patch(f"/api/v1/admin/users/{admin['id']}", json={"active": False})

    assert (demote.status_code, deactivate.status_code) == (403, 403)
    stored = await db["users"].find_one({"_id": ObjectId(admin["id"])})
    assert (stored["role"], stored["active"]) == ("admin", True)


async def test_user_list_is_for_admins_and_pages(make_user, client_for):
    admin = await make_user("admin")
    for _ in range(3):
        await make_user("user")

    page = (await (await client_for(admin)).get("/api/v1/admin/users", params={"limit": 2})).json()
    refused = await (await client_for(await make_user("user"))).get("/api/v1/admin/users")

    assert page["total"] == 4 and len(page["items"]) == 2
    assert all("passwordHash" not in item and "failedLoginCount" not in item for item in page["items"])
    assert refused.status_code == 403


@pytest.mark.parametrize("role", ["user", "viewer"])
async def test_non_admins_cannot_manage_users(role, make_user, client_for, db):
    person, other = await make_user(role), await make_user("user")
    client = await client_for(person)

    made = await client.post(
        "/api/v1/admin/users", json={"email": "x@example.com", "name": "X", "password": "tulip-orbit-42"}
    )
    changed = await client.patch(f"/api/v1/admin/users/{other['id']}", json={"role": "admin"})

    assert (made.status_code, changed.status_code) == (403, 403)
    assert (await db["users"].find_one({"_id": ObjectId(other["id"])}))["role"] == "user"


async def test_people_manage_their_own_profile(make_user, db):
    sam = await make_user("user", email="sam@example.com")

    off = await service.set_own_ai(db=db, actor=actor(sam), enabled=False)
    with pytest.raises(Forbidden):
        await service.change_own_password(db=db, actor=actor(sam), current="not it", new="another passphrase")
    await service.change_own_password(db=db, actor=actor(sam), current=PASSWORD, new="another passphrase")

    assert off.ai_enabled is False
    stored = await db["users"].find_one({"_id": ObjectId(sam["id"])})

    assert await verify_password(stored["passwordHash"], "another passphrase")


async def test_anyone_signed_in_reads_the_names_behind_an_orders_ids_and_no_more(
    make_user, change_user, client_for, anonymous
):
    sam = await make_user("user", name="Sam Rivera")
    priya = await make_user("user", name="Priya Shah")
    vic = await change_user(await make_user("user", name="Vic Viewer"), role="viewer")
    sams = await client_for(sam)
    order = (await sams.post("/api/v1/work-orders", json={"title": "Wobbly chair", "ownerId": None})).json()
    await (await client_for(priya)).patch(
        f"/api/v1/work-orders/{order['id']}", json={"version": 1, "ownerId": priya["id"]}
    )
    taken = (await sams.get(f"/api/v1/work-orders/{order['id']}")).json()

    people = await sams.get("/api/v1/people")
    by_viewer = await (await client_for(vic)).get("/api/v1/people")

    names = {person["id"]: person["name"] for person in people.json()}
    assert (names[taken["requesterId"]], names[taken["ownerId"]]) == ("Sam Rivera", "Priya Shah")
    assert all(set(person) == {"id", "name", "active"} for person in people.json())  # no email, no role
    assert [p["name"] for p in people.json()] == sorted(p["name"] for p in people.json())
    assert by_viewer.json() == people.json()
    assert (await anonymous.get("/api/v1/people")).status_code == 401
