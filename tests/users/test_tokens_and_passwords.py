"""Admins see and revoke anyone's API tokens; changing one's own password can revoke one's tokens, and its
check of the current password is rate-limited per account."""

from datetime import timedelta
from itertools import pairwise

from bson import ObjectId

from desk.http import CSRF_HEADER
from tests.helpers import PASSWORD

NEW_PASSWORD = "a lighthouse keeper's ledger"


async def test_an_admin_lists_anyones_tokens_with_their_last_use_and_revokes_one(make_user, client_for, anonymous):
    admin, sam = await make_user("admin"), await make_user("user")
    sams = await client_for(sam)
    used = (await sams.post("/api/v1/auth/tokens", json={"name": "reporting script"})).json()
    idle = (await sams.post("/api/v1/auth/tokens", json={"name": "old laptop"})).json()
    anonymous.headers["Authorization"] = f"Bearer {used['secret']}"
    del anonymous.headers[CSRF_HEADER]
    assert (await anonymous.get("/api/v1/work-orders")).status_code == 200
    admins = await client_for(admin)

    listed = await admins.get(f"/api/v1/admin/users/{sam['id']}/tokens")

    assert listed.status_code == 200
    by_name = {token["name"]: token for token in listed.json()}
    assert set(by_name) == {"reporting script", "old laptop"}
    assert by_name["reporting script"]["lastUsedAt"] is not None and by_name["old laptop"]["lastUsedAt"] is None
    assert "secret" not in str(listed.json()) and used["secret"] not in listed.text

    revoked = await admins.delete(f"/api/v1/admin/users/{sam['id']}/tokens/{used['id']}")

    assert revoked.status_code == 204
    assert (await anonymous.get("/api/v1/work-orders")).status_code == 401
    assert [t["id"] for t in (await admins.get(f"/api/v1/admin/users/{sam['id']}/tokens")).json()] == [idle["id"]]


async def test_only_admins_see_or_revoke_other_peoples_tokens(make_user, client_for, db):
    admin, sam, priya = await make_user("admin"), await make_user("user"), await make_user("user")
    token = (await (await client_for(sam)).post("/api/v1/auth/tokens", json={"name": "mine"})).json()
    priyas, admins = await client_for(priya), await client_for(admin)

    peeked = await priyas.get(f"/api/v1/admin/users/{sam['id']}/tokens")
    cut = await priyas.delete(f"/api/v1/admin/users/{sam['id']}/tokens/{token['id']}")
    wrong_owner = await admins.delete(f"/api/v1/admin/users/{priya['id']}/tokens/{token['id']}")
    nobody = await admins.get(f"/api/v1/admin/users/{ObjectId()}/tokens")

    assert (peeked.status_code, cut.status_code) == (403, 403)
    assert (wrong_owner.status_code, nobody.status_code) == (404, 404)
    assert await db["api_tokens"].count_documents({}) == 1


async def test_changing_ones_own_password_can_revoke_ones_tokens(make_user, client_for, anonymous, db):
    sam = await make_user("user", email="sam@example.com")
    browser = await client_for(sam)
    secret = (await browser.post("/api/v1/auth/tokens", json={"name": "script"})).json()["secret"]
    anonymous.headers["Authorization"] = f"Bearer {secret}"
    del anonymous.headers[CSRF_HEADER]

    kept = await browser.post("/api/v1/auth/password", json={"currentPassword": PASSWORD, "newPassword": NEW_PASSWORD})
    assert kept.status_code == 204, kept.text
    assert (await anonymous.get("/api/v1/work-orders")).status_code == 200  # not asked: the token stays

    revoked = await browser.post(
        "/api/v1/auth/password",
        json={"currentPassword": NEW_PASSWORD, "newPassword": "another long passphrase", "revokeTokens": True},
    )

    assert revoked.status_code == 204, revoked.text
    assert (await anonymous.get("/api/v1/work-orders")).status_code == 401
    assert (await browser.get("/api/v1/auth/me")).status_code == 200  # this browser stays logged in
    assert await db["api_tokens"].count_documents({}) == 0


async def test_an_api_token_cannot_change_the_password(make_user, client_for, anonymous):
    sam = await make_user("user")
    secret = (await (await client_for(sam)).post("/api/v1/auth/tokens", json={"name": "leaked"})).json()["secret"]
    anonymous.headers["Authorization"] = f"Bearer {secret}"

    response = await anonymous.post(
        "/api/v1/auth/password", json={"currentPassword": PASSWORD, "newPassword": NEW_PASSWORD}
    )

    assert response.status_code == 403


async def test_the_current_password_check_is_rate_limited_per_account(make_user, client_for, clock):
    sam, priya = await make_user("user"), await make_user("user")
    sams = await client_for(sam)
    wrong = {"currentPassword": "a guess at it, wrong", "newPassword": NEW_PASSWORD}

    guesses = [(await sams.post("/api/v1/auth/password", json=wrong)).status_code for _ in range(5)]
    right = await sams.post("/api/v1/auth/password", json={"currentPassword": PASSWORD, "newPassword": NEW_PASSWORD})
    other = await (await client_for(priya)).post(
        "/api/v1/auth/password", json={"currentPassword": PASSWORD, "newPassword": NEW_PASSWORD}
    )

    assert guesses == [403] * 5
    assert right.status_code == 429 and right.json()["error"]["code"] == "RATE_LIMITED"
    assert int(right.headers["Retry-After"]) == 60  # the test's clock stands at the top of its minute
    assert other.status_code == 204  # another account is not held up
    clock.move(timedelta(seconds=60))  # the next minute: its own five tries
    again = await sams.post("/api/v1/auth/password", json={"currentPassword": PASSWORD, "newPassword": NEW_PASSWORD})
    assert again.status_code == 204


async def test_only_wrong_tries_at_the_current_password_count_against_its_limit(make_user, client_for):
    sams = await client_for(await make_user("user"))
    passwords = [PASSWORD, NEW_PASSWORD] * 4  # changed back and forth: seven changes in a minute, each one right

    answers = [
        await sams.post("/api/v1/auth/password", json={"currentPassword": old, "newPassword": new})
        for old, new in pairwise(passwords)
    ]

    assert [answer.status_code for answer in answers] == [204] * 7


async def test_a_new_password_the_policy_refuses_is_named_as_the_field_it_came_in(make_user, client_for, anonymous):
    sam = await make_user("user")
    sams = await client_for(sam)

    refused = await sams.post("/api/v1/auth/password", json={"currentPassword": PASSWORD, "newPassword": "short"})

    assert refused.status_code == 400
    assert [problem["field"] for problem in refused.json()["error"]["details"]["fields"]] == ["newPassword"]
    login = {"email": sam["email"], "password": PASSWORD}
    assert (await anonymous.post("/api/v1/auth/login", json=login)).status_code == 200  # nothing changed


async def test_the_new_password_must_differ_from_the_current_one(make_user, client_for, db):
    # it answered "changed" and logged the person's other sessions out for nothing
    sam = await make_user("user")
    sams = await client_for(sam)
    before = (await db["users"].find_one({"email": sam["email"]}))["passwordHash"]

    same = await sams.post("/api/v1/auth/password", json={"currentPassword": PASSWORD, "newPassword": PASSWORD})

    assert same.status_code == 400
    error = same.json()["error"]
    assert error["message"] == "The new password is your current one; choose another."
    assert [problem["field"] for problem in error["details"]["fields"]] == ["newPassword"]
    assert (await db["users"].find_one({"email": sam["email"]}))["passwordHash"] == before


async def test_a_leaked_admin_token_cannot_reset_a_password_but_a_script_may_add_people(
    make_user, client_for, anonymous, db
):
    # found by an API QA pass: an admin's token reset its owner's password, holding the account for good
    admin, sam = await make_user("admin"), await make_user("user")
    admins = await client_for(admin)
    secret = (await admins.post("/api/v1/auth/tokens", json={"name": "provisioning"})).json()["secret"]
    anonymous.headers["Authorization"] = f"Bearer {secret}"
    del anonymous.headers[CSRF_HEADER]
    stored = await db["users"].find_one({"_id": ObjectId(admin["id"])})

    own = await anonymous.patch(f"/api/v1/admin/users/{admin['id']}", json={"password": NEW_PASSWORD})
    sams = await anonymous.patch(f"/api/v1/admin/users/{sam['id']}", json={"password": NEW_PASSWORD, "name": "S"})
    added = await anonymous.post(
        "/api/v1/admin/users", json={"email": "new@example.com", "name": "New Hire", "password": NEW_PASSWORD}
    )
    renamed = await anonymous.patch(f"/api/v1/admin/users/{sam['id']}", json={"name": "Sam L", "role": "viewer"})
    by_session = await admins.patch(f"/api/v1/admin/users/{sam['id']}", json={"password": NEW_PASSWORD})

    assert (own.status_code, sams.status_code) == (403, 403)
    assert "browser" in own.json()["error"]["message"]
    assert await db["users"].find_one({"_id": ObjectId(admin["id"])}) == stored
    assert (await db["users"].find_one({"_id": ObjectId(sam["id"])}))["name"] != "S"  # nothing of it was written
    assert added.status_code == 201  # a provisioning script adds people with their first password
    assert (renamed.status_code, renamed.json()["name"], renamed.json()["role"]) == (200, "Sam L", "viewer")
    assert by_session.status_code == 200
