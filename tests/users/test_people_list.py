"""An admin's people list: sorted by name, searched by name or email, names and emails editable, last login kept."""

from datetime import datetime, timedelta

from desk.schema import now


async def test_people_are_sorted_by_name_and_found_by_name_or_email(make_user, client_for):
    admin = await make_user("admin", name="Dana Admin")
    await make_user("user", name="Sam Rivera", email="sam@example.com")
    await make_user("user", name="priya Shah", email="p.shah@plumbers.example")
    await make_user("viewer", name="Lee Chen", email="lee@example.com")
    client = await client_for(admin)

    everyone = (await client.get("/api/v1/admin/users")).json()
    assert [p["name"] for p in everyone["items"]] == ["Dana Admin", "Lee Chen", "Sam Rivera", "priya Shah"]
    found = (await client.get("/api/v1/admin/users", params={"q": "PLUMB"})).json()
    assert [p["name"] for p in found["items"]] == ["priya Shah"] and found["total"] == 1
    by_name = (await client.get("/api/v1/admin/users", params={"q": "ee c"})).json()
    assert [p["name"] for p in by_name["items"]] == ["Lee Chen"]
    odd = (await client.get("/api/v1/admin/users", params={"q": ".*"})).json()  # text, not a pattern
    assert odd["items"] == [] and odd["total"] == 0


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
