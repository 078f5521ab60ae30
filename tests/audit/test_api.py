"""The desk-wide audit log, admins only: deletions, what admins did to people, API tokens made and revoked."""

from datetime import timedelta

from bson import ObjectId

from desk.audit import repository
from desk.schema import now

NEW_PASSWORD = "a brand new passphrase 2026"


async def _log(client, **params) -> list[dict]:
    response = await client.get("/api/v1/admin/audit", params=params)
    assert response.status_code == 200, response.text
    return response.json()["items"]


async def test_a_deleted_order_leaves_who_when_and_the_order_as_it_was(make_user, client_for, make_order):
    admin, sam = await make_user("admin"), await make_user("user")
    order = await make_order(sam, "Leaking tap", description="Kitchen, cold tap")
    sams = await client_for(sam)
    assert (await sams.delete(f"/api/v1/work-orders/{order.id}", params={"version": 1})).status_code == 204

    (entry,) = await _log(await client_for(admin))
    assert entry["action"] == "work_order_deleted" and entry["actorId"] == sam["id"] and entry["subjectId"] == order.id
    kept = entry["details"]["order"]
    assert (kept["title"], kept["description"], kept["version"]) == ("Leaking tap", "Kitchen, cold tap", 1)
    assert now() - timedelta(minutes=1) < now().fromisoformat(entry["at"]) <= now()


async def test_role_activation_password_reset_and_token_revocations_are_logged(make_user, client_for):
    admin, sam = await make_user("admin"), await make_user("user")
    admins, sams = await client_for(admin), await client_for(sam)
    token = (await sams.post("/api/v1/auth/tokens", json={"name": "script"})).json()
    await sams.delete(f"/api/v1/auth/tokens/{token['id']}")
    await sams.post("/api/v1/auth/tokens", json={"name": "kept"})
    users = f"/api/v1/admin/users/{sam['id']}"
    await admins.patch(users, json={"role": "viewer"})
    await admins.patch(users, json={"active": False})  # revokes the kept token
    await admins.patch(users, json={"password": NEW_PASSWORD})  # no token left: nothing revoked, no entry for it

    entries = await _log(admins)
    actions = [e["action"] for e in entries]
    assert actions == [
        "password_reset",
        "activation_changed",
        "tokens_revoked",
        "role_changed",
        "token_created",
        "token_revoked",
        "token_created",
    ]
    assert entries[2]["details"] == {"count": 1}
    assert entries[3]["details"] | {"name": None} == {"name": None, "before": "user", "after": "viewer"}
    assert {e["subjectId"] for e in entries} == {sam["id"]} and entries[5]["actorId"] == sam["id"]
    named = {"tokenId": token["id"], "name": "script", "prefix": token["prefix"]}
    assert entries[5]["details"] == named  # which token, as its owner sees it
    made = entries[6]["details"]
    assert made == named | {"scopes": ["read", "write"], "expiresAt": made["expiresAt"]}  # and what it may do
    expires = now().fromisoformat(made["expiresAt"]) - now().fromisoformat(token["expiresAt"])
    assert timedelta(0) >= expires > -timedelta(milliseconds=1)  # until when (stored to the millisecond)
    assert NEW_PASSWORD not in str(entries) and token["secret"] not in str(entries)
    only = await _log(admins, action="role_changed")
    assert [e["action"] for e in only] == ["role_changed"]


async def test_the_log_filters_by_who_did_it_and_to_whom_together(make_user, client_for):
    dana, ola, sam, lee = [await make_user(role) for role in ("admin", "admin", "user", "user")]
    danas, olas = await client_for(dana), await client_for(ola)
    await danas.patch(f"/api/v1/admin/users/{sam['id']}", json={"role": "viewer"})
    await danas.patch(f"/api/v1/admin/users/{lee['id']}", json={"role": "viewer"})
    await olas.patch(f"/api/v1/admin/users/{sam['id']}", json={"active": False})

    by_dana = await _log(olas, actorId=dana["id"])
    to_sam = await _log(olas, subjectId=sam["id"].upper())
    both = await danas.get("/api/v1/admin/audit", params={"actorId": dana["id"], "subjectId": sam["id"]})
    none = await danas.get("/api/v1/admin/audit", params={"actorId": ola["id"], "action": "role_changed"})
    malformed = await danas.get("/api/v1/admin/audit", params={"subjectId": "sam"})

    assert [(e["action"], e["subjectId"]) for e in by_dana] == [
        ("role_changed", lee["id"]),
        ("role_changed", sam["id"]),
    ]
    assert [(e["action"], e["actorId"]) for e in to_sam] == [
        ("activation_changed", ola["id"]),
        ("role_changed", dana["id"]),
    ]
    assert [(e["actorId"], e["subjectId"]) for e in both.json()["items"]] == [(dana["id"], sam["id"])]
    assert (both.json()["total"], none.json()["total"], none.json()["items"]) == (1, 0, [])
    assert malformed.status_code == 400


async def test_a_person_added_renamed_given_a_new_email_and_unlocked_by_an_admin_is_logged(make_user, client_for, db):
    admin = await make_user("admin")
    admins = await client_for(admin)
    person = {"email": "new.hire@example.com", "name": "New Hire", "role": "admin", "password": NEW_PASSWORD}
    made = (await admins.post("/api/v1/admin/users", json=person)).json()
    users = f"/api/v1/admin/users/{made['id']}"
    await admins.patch(users, json={"name": "Nia Hire", "email": "nia.hire@example.com"})
    await admins.patch(users, json={"name": "Nia Hire", "email": "nia.hire@example.com"})  # nothing new: no entry
    await db["users"].update_one({"_id": ObjectId(made["id"])}, {"$set": {"lockedUntil": now() + timedelta(minutes=9)}})
    await admins.post(f"{users}/unlock")

    unlocked, edited, added = await _log(admins)
    assert {e["actorId"] for e in (unlocked, edited, added)} == {admin["id"]}
    assert {e["subjectId"] for e in (unlocked, edited, added)} == {made["id"]}
    assert added["action"] == "user_created"
    assert added["details"] == {"name": "New Hire", "email": "new.hire@example.com", "role": "admin"}
    assert edited["action"] == "user_details_changed"
    assert edited["details"] == {
        "name": "New Hire",
        "before": {"name": "New Hire", "email": "new.hire@example.com"},
        "after": {"name": "Nia Hire", "email": "nia.hire@example.com"},
    }
    assert unlocked["action"] == "account_unlocked" and unlocked["details"] == {"name": "Nia Hire"}
    assert NEW_PASSWORD not in str([unlocked, edited, added])


async def test_only_admins_read_it_and_nobody_can_change_it(make_user, client_for, make_order):
    admin, sam = await make_user("admin"), await make_user("user")
    sams = await client_for(sam)
    assert (await sams.get("/api/v1/admin/audit")).status_code == 403
    admins = await client_for(admin)
    for method in ("post", "put", "patch", "delete"):
        assert (await admins.request(method, "/api/v1/admin/audit")).status_code == 405


async def test_entries_are_kept_a_year(db):
    await repository.ensure_indexes(db)
    indexes = (await db["audit_log"].index_information()).values()
    ttl = [i["expireAfterSeconds"] for i in indexes if i["key"][0][0] == "at" and "expireAfterSeconds" in i]
    assert ttl == [365 * 24 * 3600]  # by key: the embedded engine names indexes its own way


async def test_an_admin_turning_ai_off_and_on_for_someone_is_logged_but_their_own_switch_is_not(make_user, client_for):
    admin, sam = await make_user("admin"), await make_user("user")
    admins, sams = await client_for(admin), await client_for(sam)
    users = f"/api/v1/admin/users/{sam['id']}"
    await admins.patch(users, json={"aiEnabled": False})
    await admins.patch(users, json={"aiEnabled": False})  # already off: nothing changed, no entry
    await admins.patch(users, json={"aiEnabled": True})
    own = await sams.patch("/api/v1/auth/me", json={"aiEnabled": False})  # the person's own preference

    entries = await _log(admins)

    assert own.status_code == 200 and own.json()["aiEnabled"] is False
    assert [(e["action"], e["actorId"], e["subjectId"], e["details"]["aiEnabled"]) for e in entries] == [
        ("ai_access_changed", admin["id"], sam["id"], True),
        ("ai_access_changed", admin["id"], sam["id"], False),
    ]
