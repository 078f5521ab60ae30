"""/api/v1/notifications, /api/v1/auth/me/notifications and the desk's defaults, as an API client sees them."""

from bson import ObjectId

from desk.notifications import unsubscribe


async def test_the_bell_over_the_api(client_for, make_user, make_order):
    admin, lee = await make_user("admin", name="Ada"), await make_user()
    order = await make_order(admin, "Leaking tap", owner_id=lee["id"])
    await make_order(admin, "Broken window", owner_id=lee["id"])
    client = await client_for(lee)

    body = (await client.get("/api/v1/notifications", params={"limit": 1})).json()
    assert body["total"] == 2 and body["unread"] == 2
    (item,) = body["items"]
    assert set(item) == {"id", "kind", "workOrderId", "text", "read", "createdAt"}
    assert item["text"] == "Ada gave you “Broken window”." and item["read"] is False  # newest first

    answer = await client.post("/api/v1/notifications/read", json={"ids": [item["id"]]})
    assert answer.status_code == 200 and answer.json() == {"unread": 1}
    unread = (await client.get("/api/v1/notifications", params={"unread": "true"})).json()
    assert [i["workOrderId"] for i in unread["items"]] == [order.id] and unread["total"] == 1
    assert (await client.post("/api/v1/notifications/read", json={"all": True})).json() == {"unread": 0}


async def test_marking_read_takes_ids_or_all_but_not_both(client_for, make_user):
    client = await client_for(await make_user())
    for body in ({}, {"ids": [], "all": True}, {"ids": [str(ObjectId())], "all": True}, {"all": False}, {"ids": ["x"]}):
        answer = await client.post("/api/v1/notifications/read", json=body)
        assert answer.status_code == 400 and answer.json()["error"]["code"] == "VALIDATION_ERROR", body
    assert (await client.get("/api/v1/notifications", params={"limit": 101})).status_code == 400


async def test_the_bell_needs_a_login(anonymous):
    answer = await anonymous.get("/api/v1/notifications")
    assert answer.status_code == 401 and answer.json()["error"]["code"] == "UNAUTHORIZED"


async def test_preferences_start_at_the_desks_defaults_and_change_one_switch_at_a_time(client_for, make_user):
    admin, lee = await make_user("admin"), await make_user()
    mine, admins = await client_for(lee), await client_for(admin)
    on = {"assigned": True, "commented": True, "statusChanged": True, "flagged": False}
    assert (await mine.get("/api/v1/auth/me/notifications")).json() == {"email": on, "inApp": on}

    changed = await admins.patch("/api/v1/admin/notifications/defaults", json={"email": {"commented": False}})
    assert changed.status_code == 200 and changed.json()["email"]["commented"] is False
    answer = await mine.patch("/api/v1/auth/me/notifications", json={"inApp": {"statusChanged": False}})
    assert answer.json() == {"email": on | {"commented": False}, "inApp": on | {"statusChanged": False}}

    refused = await mine.patch("/api/v1/admin/notifications/defaults", json={"email": {"assigned": False}})
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "FORBIDDEN"
    for body in (
        {},
        {"email": {"assigned": "yes"}},
        {"email": {"nope": True}},
        {"sms": {}},
        {"email": {"flagged": True}, "inApp": {}},
    ):
        assert (await mine.patch("/api/v1/auth/me/notifications", json=body)).status_code == 400, body


async def test_the_unsubscribe_link_works_with_no_login_and_only_when_signed(anonymous, client_for, make_user, db):
    lee = await make_user()
    token = await unsubscribe.token(db, ObjectId(lee["id"]), ["commented"])
    page = await anonymous.get(f"/api/v1/notifications/unsubscribe/{token}")  # a link scanner: nothing changes
    assert page.status_code == 200 and 'method="post"' in page.text

    forged = token[:-2] + ("AA" if not token.endswith("AA") else "BB")
    other = await unsubscribe.token(db, ObjectId(lee["id"]), ["assigned"])
    tampered = other.split(".")[0] + "." + token.split(".")[1]  # assigned, under commented's signature
    for bad in (forged, tampered, "nonsense", token.split(".")[0] + ".%C3%A9"):  # a signature of any text: no 500
        refused = await anonymous.post(f"/api/v1/notifications/unsubscribe/{bad}")
        assert refused.status_code == 404 and refused.json()["error"]["code"] == "NOT_FOUND"

    done = await anonymous.post(
        f"/api/v1/notifications/unsubscribe/{token}",
        content="List-Unsubscribe=One-Click",
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert done.status_code == 200 and done.json() == {"kinds": ["commented"]}
    prefs = (await (await client_for(lee)).get("/api/v1/auth/me/notifications")).json()
    assert prefs["email"]["commented"] is False and prefs["email"]["assigned"] is True
    assert prefs["inApp"]["commented"] is True
