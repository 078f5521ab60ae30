"""API tokens with limits: scopes chosen when made, an expiry, and the admin actions no token may do."""

from datetime import datetime, timedelta

import httpx
import pytest
from bson import ObjectId

from desk.app import ensure_indexes
from desk.auth.service import digest
from desk.http import CSRF_HEADER
from desk.schema import now

TOKENS = "/api/v1/auth/tokens"
USERS = "/api/v1/admin/users"


async def token_of(browser: httpx.AsyncClient, anonymous: httpx.AsyncClient, **body: object) -> dict:
    """A token made in `browser`'s session (by default with only a name); `anonymous` now sends it, as a script."""
    made = await browser.post(TOKENS, json={"name": "script", **body})
    assert made.status_code == 201, made.text
    anonymous.headers["Authorization"] = f"Bearer {made.json()['secret']}"
    anonymous.headers.pop(CSRF_HEADER, None)  # a script sends no CSRF header
    return made.json()


def refusal(response: httpx.Response) -> tuple[int, str, dict]:
    error = response.json()["error"]
    return response.status_code, error["code"], error.get("details", {})


async def test_a_token_is_made_with_read_and_write_for_ninety_days_by_default(make_user, client_for, clock):
    sam = await make_user("user")
    browser = await client_for(sam)

    made = (await browser.post(TOKENS, json={"name": "script"})).json()
    listed = (await browser.get(TOKENS)).json()

    assert made["scopes"] == ["read", "write"]
    assert _parsed(made["expiresAt"]) == clock.now() + timedelta(days=90)
    assert [(t["scopes"], t["expiresAt"]) for t in listed] == [(made["scopes"], made["expiresAt"])]


async def test_an_admins_token_has_the_admin_scope_by_default_and_the_admins_view_shows_scopes(
    make_user, client_for, clock
):
    admin, sam = await make_user("admin"), await make_user("user")
    admins = await client_for(admin)

    made = (await admins.post(TOKENS, json={"name": "provisioning"})).json()
    await (await client_for(sam)).post(TOKENS, json={"name": "cron", "scopes": ["read"], "expiresInDays": 7})
    seen = (await admins.get(f"{USERS}/{sam['id']}/tokens")).json()

    assert made["scopes"] == ["read", "write", "admin"]
    assert [(t["name"], t["scopes"]) for t in seen] == [("cron", ["read"])]
    assert _parsed(seen[0]["expiresAt"]) == clock.now() + timedelta(days=7)


async def test_scopes_are_kept_in_their_order_once_each(make_user, client_for):
    browser = await client_for(await make_user("user"))

    made = await browser.post(TOKENS, json={"name": "script", "scopes": ["write", "read", "write"]})

    assert made.json()["scopes"] == ["read", "write"]


@pytest.mark.parametrize(
    "body",
    [
        {"expiresInDays": 366},
        {"expiresInDays": 0},
        {"expiresInDays": "30"},
        {"expiresInDays": 30.5},
        {"scopes": []},
        {"scopes": ["delete"]},
        {"scopes": "read"},
    ],
)
async def test_a_token_beyond_a_year_or_with_no_or_unknown_scopes_is_refused(make_user, client_for, db, body):
    browser = await client_for(await make_user("admin"))

    response = await browser.post(TOKENS, json={"name": "script", **body})

    status, code, details = refusal(response)
    assert (status, code) == (400, "VALIDATION_ERROR")
    assert details["fields"][0]["field"].split(".")[0] in body
    assert await db["api_tokens"].count_documents({}) == 0


async def test_a_year_is_the_longest_a_token_may_last(make_user, client_for, clock):
    browser = await client_for(await make_user("user"))

    made = (await browser.post(TOKENS, json={"name": "yearly", "expiresInDays": 365.0})).json()  # JSON's integer

    assert _parsed(made["expiresAt"]) == clock.now() + timedelta(days=365)


async def test_someone_not_an_admin_asking_for_the_admin_scope_is_refused(make_user, client_for, db):
    browser = await client_for(await make_user("user"))

    response = await browser.post(TOKENS, json={"name": "script", "scopes": ["read", "admin"]})

    status, code, details = refusal(response)
    assert (status, code) == (403, "FORBIDDEN")
    assert details["fields"][0]["field"] == "scopes"
    assert "Only admins" in response.json()["error"]["message"]
    assert await db["api_tokens"].count_documents({}) == 0


async def test_a_read_token_reads_and_may_not_write(make_user, client_for, anonymous, db):
    sam = await make_user("user")
    await token_of(await client_for(sam), anonymous, scopes=["read"])

    listed = await anonymous.get("/api/v1/work-orders")
    made = await anonymous.post("/api/v1/work-orders", json={"title": "From a script"})
    head = await anonymous.head("/api/v1/work-orders")

    assert listed.status_code == 200 and head.status_code == 200
    assert refusal(made) == (403, "TOKEN_SCOPE_REQUIRED", {"scope": "write"})
    assert "'write' scope" in made.json()["error"]["message"]
    assert await db["work_orders"].count_documents({}) == 0


async def test_a_write_token_writes_and_may_not_read(make_user, client_for, anonymous, db):
    await token_of(await client_for(await make_user("user")), anonymous, scopes=["write"])

    made = await anonymous.post("/api/v1/work-orders", json={"title": "From a script"})
    listed = await anonymous.get("/api/v1/work-orders")
    me = await anonymous.get("/api/v1/auth/me")

    assert made.status_code == 201
    assert refusal(listed) == (403, "TOKEN_SCOPE_REQUIRED", {"scope": "read"})
    assert refusal(me) == (403, "TOKEN_SCOPE_REQUIRED", {"scope": "read"})


async def test_a_read_token_cannot_ask_the_copilot(make_user, client_for, anonymous):
    # asking stages writes, so it is a write (docs/security.md)
    await token_of(await client_for(await make_user("user")), anonymous, scopes=["read"])

    asked = await anonymous.post("/api/v1/ai/sessions")

    assert refusal(asked) == (403, "TOKEN_SCOPE_REQUIRED", {"scope": "write"})


async def test_the_admin_api_needs_the_admin_scope_and_the_methods_scope(make_user, client_for, anonymous):
    admin, sam = await make_user("admin"), await make_user("user")
    admins = await client_for(admin)
    await token_of(admins, anonymous, scopes=["read", "write"])
    without_admin = [await anonymous.get(USERS), await anonymous.get("/api/v1/admin/audit")]
    without_admin.append(await anonymous.patch(f"{USERS}/{sam['id']}", json={"role": "viewer"}))
    await token_of(admins, anonymous, scopes=["read", "admin"])
    read_admin = [await anonymous.get(USERS), await anonymous.get("/api/v1/admin/metrics")]
    demote = await anonymous.patch(f"{USERS}/{sam['id']}", json={"role": "viewer"})
    await token_of(admins, anonymous, scopes=["write", "admin"])
    write_admin = await anonymous.patch(f"{USERS}/{sam['id']}", json={"role": "viewer"})
    listing = await anonymous.get(USERS)

    assert [refusal(r) for r in without_admin] == [(403, "TOKEN_SCOPE_REQUIRED", {"scope": "admin"})] * 3
    assert [r.status_code for r in read_admin] == [200, 200]
    assert refusal(demote) == (403, "TOKEN_SCOPE_REQUIRED", {"scope": "write"})
    assert write_admin.status_code == 200 and write_admin.json()["role"] == "viewer"
    assert refusal(listing) == (403, "TOKEN_SCOPE_REQUIRED", {"scope": "read"})


async def test_a_token_of_an_admin_made_a_user_loses_the_admin_scope(make_user, client_for, anonymous, change_user):
    ola = await make_user("admin")
    await make_user("admin")  # someone else stays admin
    await token_of(await client_for(ola), anonymous)

    await change_user(ola, role="user")

    assert refusal(await anonymous.get(USERS)) == (403, "TOKEN_SCOPE_REQUIRED", {"scope": "admin"})
    assert (await anonymous.get("/api/v1/work-orders")).status_code == 200


async def test_any_token_may_revoke_itself(make_user, client_for, anonymous, db):
    made = await token_of(await client_for(await make_user("user")), anonymous, scopes=["read"])

    gone = await anonymous.delete(f"{TOKENS}/{made['id']}")

    assert gone.status_code == 204
    assert await db["api_tokens"].count_documents({}) == 0


async def test_an_expired_token_is_refused_as_a_revoked_one(make_user, client_for, anonymous, clock):
    made = await token_of(await client_for(await make_user("user")), anonymous)
    clock.move(_parsed(made["expiresAt"]) - clock.now() - timedelta(milliseconds=1))
    assert (await anonymous.get("/api/v1/work-orders")).status_code == 200  # its last moment

    clock.move(timedelta(milliseconds=1))
    refused = await anonymous.get("/api/v1/work-orders")

    assert (refused.status_code, refused.json()["error"]["code"]) == (401, "UNAUTHORIZED")
    assert "expired" in refused.json()["error"]["message"]
    assert refused.headers["WWW-Authenticate"] == 'Bearer realm="desk"'


async def test_tokens_made_before_scopes_keep_their_owners_powers_for_ninety_days(make_user, app, anonymous, db):
    admin, sam = await make_user("admin"), await make_user("user")
    old = {}
    for person in (admin, sam):
        secret = f"wod_legacy-{person['id']}"
        doc = {"userId": ObjectId(person["id"]), "name": "old", "hash": digest(secret), "prefix": secret[:10]}
        await db["api_tokens"].insert_one(doc | {"createdAt": now() - timedelta(days=400), "lastUsedAt": None})
        old[person["role"]] = secret

    await ensure_indexes(db)  # the desk's next start

    stored = {str(doc["userId"]): doc for doc in await db["api_tokens"].find().to_list()}
    assert stored[admin["id"]]["scopes"] == ["read", "write", "admin"]
    assert stored[sam["id"]]["scopes"] == ["read", "write"]
    assert timedelta(days=89) < stored[sam["id"]]["expiresAt"] - now() <= timedelta(days=90)
    anonymous.headers["Authorization"] = f"Bearer {old['admin']}"
    assert (await anonymous.get(USERS)).status_code == 200


# Creating an admin, raising a role, changing an email: a browser session that logged in within 15 minutes.

HIRE = {"email": "new.admin@example.com", "name": "New Admin", "role": "admin", "password": "a long enough passphrase"}


async def test_no_token_can_make_an_admin_raise_a_role_or_change_an_email(make_user, client_for, anonymous, db):
    admin, sam = await make_user("admin"), await make_user("viewer")
    await token_of(await client_for(admin), anonymous, scopes=["read", "write", "admin"])

    attempts = [
        await anonymous.post(USERS, json=HIRE),
        await anonymous.patch(f"{USERS}/{sam['id']}", json={"role": "admin"}),
        await anonymous.patch(f"{USERS}/{sam['id']}", json={"role": "user"}),
        await anonymous.patch(f"{USERS}/{sam['id']}", json={"email": "sam.elsewhere@example.com"}),
        await anonymous.patch(f"{USERS}/{admin['id']}", json={"email": "mine@example.com"}),
    ]

    assert [refusal(r)[:2] for r in attempts] == [(403, "FORBIDDEN")] * 5
    assert all("API token cannot" in r.json()["error"]["message"] for r in attempts)
    stored = await db["users"].find_one({"_id": ObjectId(sam["id"])})
    assert (stored["role"], stored["email"]) == ("viewer", sam["email"])
    assert await db["users"].count_documents({"role": "admin"}) == 1


async def test_a_token_may_still_add_people_who_are_not_admins_and_lower_roles(make_user, client_for, anonymous):
    admin, sam = await make_user("admin"), await make_user("user")
    await token_of(await client_for(admin), anonymous)

    added = await anonymous.post(USERS, json=HIRE | {"email": "new@example.com", "role": "user"})
    lowered = await anonymous.patch(f"{USERS}/{sam['id']}", json={"role": "viewer", "name": "Sam V."})

    assert (added.status_code, added.json()["role"]) == (201, "user")
    assert (lowered.status_code, lowered.json()["role"]) == (200, "viewer")


async def stale(client_for, admin: dict, clock, *, minutes: int) -> httpx.AsyncClient:
    """A browser session of `admin` that logged in `minutes` ago (the Desk's clock moved on, not waited out)."""
    browser = await client_for(admin)
    clock.move(timedelta(minutes=minutes))
    return browser


async def test_a_session_older_than_fifteen_minutes_must_log_in_again(make_user, client_for, db, clock):
    admin, sam = await make_user("admin"), await make_user("viewer")
    browser = await stale(client_for, admin, clock, minutes=16)

    attempts = [
        await browser.post(USERS, json=HIRE),
        await browser.patch(f"{USERS}/{sam['id']}", json={"role": "user"}),
        await browser.patch(f"{USERS}/{sam['id']}", json={"email": "sam.elsewhere@example.com"}),
    ]
    still = await browser.patch(f"{USERS}/{sam['id']}", json={"name": "Sam Viewer", "active": False})

    assert [refusal(r)[:2] for r in attempts] == [(403, "RECENT_LOGIN_REQUIRED")] * 3
    assert all(r.json()["error"]["message"].startswith("Log in again to") for r in attempts)
    assert still.status_code == 200  # what widens no way in needs no new login
    assert await db["users"].count_documents({"role": "admin"}) == 1


async def test_a_fresh_session_may_make_an_admin_raise_a_role_and_change_an_email(make_user, client_for, db, clock):
    admin, sam = await make_user("admin"), await make_user("viewer")
    browser = await stale(client_for, admin, clock, minutes=14)

    hired = await browser.post(USERS, json=HIRE)
    raised = await browser.patch(f"{USERS}/{sam['id']}", json={"role": "user", "email": "sam.new@example.com"})

    assert (hired.status_code, hired.json()["role"]) == (201, "admin")
    assert (raised.status_code, raised.json()["role"], raised.json()["email"]) == (200, "user", "sam.new@example.com")


def _parsed(value: str) -> datetime:
    return datetime.fromisoformat(value)
