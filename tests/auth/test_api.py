"""Logging in and out, lockout, rate limits, CSRF, session lifetimes and personal API tokens."""

import asyncio
import gc
import logging
import unicodedata
from datetime import timedelta

from argon2 import PasswordHasher
from bson import ObjectId

from desk import middleware
from desk.agent.core.store import agent_runs
from desk.auth.service import digest
from desk.config import use_settings
from desk.http import CSRF_HEADER
from tests.helpers import PASSWORD, lock_out, until

WRONG = "Wrong email or password"


async def test_login_sets_an_http_only_lax_cookie_and_me_answers(make_user, anonymous):
    sam = await make_user("user", email="sam@example.com")

    response = await anonymous.post("/api/v1/auth/login", json={"email": "SAM@example.com ", "password": PASSWORD})

    assert response.status_code == 200
    assert response.json()["email"] == "sam@example.com"
    assert "passwordHash" not in response.json()
    cookie = response.headers["set-cookie"]
    assert cookie.startswith("desk_session=")
    assert "HttpOnly" in cookie and "SameSite=lax" in cookie and "Path=/" in cookie
    me = await anonymous.get("/api/v1/auth/me")
    assert me.json()["id"] == sam["id"]
    # the answer is the person as the login left them: this login is their last one, as /me says
    assert response.json()["lastLoginAt"] is not None
    assert response.json()["lastLoginAt"] == me.json()["lastLoginAt"]


async def test_a_password_is_the_same_however_its_accents_were_typed(make_user, client_for, anonymous, db):
    # "é" is one character on one system and "e" with a combining accent on another: the same person's
    # same password was refused on the second
    admin = await make_user("admin")
    composed, decomposed = "Crème brûlée 2026", unicodedata.normalize("NFD", "Crème brûlée 2026")
    assert composed != decomposed
    body = {"email": "chef@example.com", "name": "Chef", "role": "user", "password": composed}
    assert (await (await client_for(admin)).post("/api/v1/admin/users", json=body)).status_code == 201

    typed_elsewhere = {"email": "chef@example.com", "password": decomposed}
    assert (await anonymous.post("/api/v1/auth/login", json=typed_elsewhere)).status_code == 200

    # a hash made before passwords were normalized (of the password as typed then) still verifies
    await db["users"].update_one({"email": "chef@example.com"}, {"$set": {"passwordHash": await legacy(decomposed)}})
    assert (await anonymous.post("/api/v1/auth/login", json=typed_elsewhere)).status_code == 200
    wrong = {"email": "chef@example.com", "password": "Creme brulee 2026"}
    assert (await anonymous.post("/api/v1/auth/login", json=wrong)).status_code == 401


async def legacy(password: str) -> str:
    return await asyncio.to_thread(PasswordHasher(time_cost=2, memory_cost=19 * 1024, parallelism=1).hash, password)


async def test_only_the_hash_of_the_session_is_stored(make_user, anonymous, db):
    await make_user("user", email="sam@example.com")
    response = await anonymous.post("/api/v1/auth/login", json={"email": "sam@example.com", "password": PASSWORD})
    secret = response.cookies["desk_session"]

    stored = await db["sessions"].find_one({})

    assert len(secret) >= 43  # 256 random bits, base64url
    assert stored["_id"] == digest(secret)
    assert secret not in str(stored)


async def test_https_deployments_get_a_secure_host_only_cookie(make_user, anonymous, settings):
    use_settings(settings.model_copy(update={"desk_public_https": True}))
    await make_user("user", email="sam@example.com")

    response = await anonymous.post("/api/v1/auth/login", json={"email": "sam@example.com", "password": PASSWORD})

    cookie = response.headers["set-cookie"]
    assert cookie.startswith("__Host-desk_session=") and "Secure" in cookie


async def test_wrong_password_unknown_email_and_inactive_user_all_look_the_same(make_user, anonymous, client_for):
    # Only the right password earns the truth about a deactivated account (tests/auth/test_throttle.py).
    admin = await make_user("admin")
    gone = await make_user("user", email="gone@example.com")
    await (await client_for(admin)).patch(f"/api/v1/admin/users/{gone['id']}", json={"active": False})
    await make_user("user", email="sam@example.com")

    answers = [
        await anonymous.post("/api/v1/auth/login", json={"email": "sam@example.com", "password": "nope nope"}),
        await anonymous.post("/api/v1/auth/login", json={"email": "nobody@example.com", "password": PASSWORD}),
        await anonymous.post("/api/v1/auth/login", json={"email": "gone@example.com", "password": "nope nope"}),
    ]

    assert {a.status_code for a in answers} == {401}
    assert len({a.json()["error"]["message"] for a in answers}) == 1
    assert WRONG in answers[0].json()["error"]["message"]


async def test_a_guesser_on_many_addresses_locks_the_account_for_fifteen_minutes(make_user, anonymous, db, clock):
    sam = await make_user("user", email="sam@example.com")
    await lock_out(db, "sam@example.com")
    body = {"email": "sam@example.com", "password": PASSWORD}

    locked = await anonymous.post("/api/v1/auth/login", json=body)

    assert locked.status_code == 403 and "locked for 15 minutes" in locked.json()["error"]["message"]
    stored = await db["users"].find_one({"_id": ObjectId(sam["id"])})
    assert stored["lockedUntil"] == clock.now() + timedelta(minutes=15)

    clock.move(timedelta(minutes=15) - timedelta(milliseconds=1))
    assert (await anonymous.post("/api/v1/auth/login", json=body)).status_code == 403  # not a moment early
    clock.move(timedelta(milliseconds=1))
    assert (await anonymous.post("/api/v1/auth/login", json=body)).status_code == 200


async def test_login_is_rate_limited_per_address(make_user, anonymous, settings):
    use_settings(settings.model_copy(update={"desk_login_attempts_per_minute": 3}))
    await make_user("user", email="sam@example.com")
    body = {"email": "sam@example.com", "password": "wrong password"}
    statuses = [(await anonymous.post("/api/v1/auth/login", json=body)).status_code for _ in range(4)]

    limited = await anonymous.post("/api/v1/auth/login", json={"email": "sam@example.com", "password": PASSWORD})

    assert statuses == [401, 401, 401, 429]
    assert limited.status_code == 429
    assert limited.json()["error"]["code"] == "RATE_LIMITED"
    assert 1 <= int(limited.headers["Retry-After"]) <= 60


async def test_cookie_requests_that_change_things_need_the_csrf_header(make_user, client_for, db):
    sam = await make_user("user")
    client = await client_for(sam)
    del client.headers[CSRF_HEADER]

    refused = await client.post("/api/v1/work-orders", json={"title": "Leaking tap"})
    reading = await client.get("/api/v1/work-orders")
    login = await client.post("/api/v1/auth/login", json={"email": sam["email"], "password": PASSWORD})

    assert refused.status_code == 403 and CSRF_HEADER in refused.json()["error"]["message"]
    assert reading.status_code == 200
    assert login.status_code == 403
    assert await db["work_orders"].count_documents({}) == 0


async def test_logout_ends_the_session_on_the_server(make_user, client_for):
    sam = await make_user("user")
    client = await client_for(sam)
    cookie = client.cookies.get("desk_session")

    assert (await client.post("/api/v1/auth/logout")).status_code == 204

    client.cookies.set("desk_session", cookie)  # a copy of the cookie kept by an attacker
    assert (await client.get("/api/v1/auth/me")).status_code == 401


async def test_logging_out_with_an_api_token_is_refused_and_stops_nothing(make_user, client_for, anonymous, db):
    sam = await make_user("user")
    browser = await client_for(sam)
    token = (await browser.post("/api/v1/auth/tokens", json={"name": "script"})).json()
    run = agent_runs.new_run(
        session_id=None, user_id=ObjectId(sam["id"]), mode="chat", model="m", lease=timedelta(minutes=1)
    )
    await agent_runs.insert_run(db, run)
    anonymous.headers["Authorization"] = f"Bearer {token['secret']}"

    response = await anonymous.post("/api/v1/auth/logout")

    assert response.status_code == 403  # as any other thing a token may not do (400 is for a malformed request)
    error = response.json()["error"]
    assert error["code"] == "FORBIDDEN"
    assert error["message"].startswith("Logging out ends a browser session.")
    assert "DELETE /api/v1/auth/tokens/{id}" in error["message"]
    assert (await agent_runs.get_run(db, run["_id"]))["status"] == "running"
    assert (await anonymous.get("/api/v1/auth/me")).status_code == 200
    assert (await browser.get("/api/v1/auth/me")).status_code == 200


async def test_idle_and_absolute_session_limits(make_user, client_for, settings, clock):
    sam = await make_user("user")
    opened = clock.now()
    idle, busy = await client_for(sam), await client_for(sam)
    step = timedelta(minutes=settings.desk_session_idle_minutes)
    limit = timedelta(hours=settings.desk_session_max_hours)

    clock.move(step)
    assert (await busy.get("/api/v1/auth/me")).status_code == 200
    clock.move(timedelta(minutes=1))  # the idle limit after its last use, and the minute that may go unrecorded
    assert (await idle.get("/api/v1/auth/me")).status_code == 401
    pace = step - timedelta(minutes=1)  # in use all along, never idle
    while clock.now() + pace < opened + limit:
        clock.move(pace)
        assert (await busy.get("/api/v1/auth/me")).status_code == 200
    clock.move(pace)
    assert (await busy.get("/api/v1/auth/me")).status_code == 401  # past its absolute limit all the same


async def test_the_idle_limit_is_never_shorter_than_set_after_the_last_request(
    make_user, client_for, db, settings, clock
):
    # found by an API QA pass: activity is written once a minute, so a request just after a write went
    # unrecorded and the session ended up to a minute before the idle limit after it
    sam = await make_user("user")
    client = await client_for(sam)
    clock.move(timedelta(seconds=59))

    assert (await client.get("/api/v1/auth/me")).status_code == 200  # not written: the last write was 59 s ago

    session = await db["sessions"].find_one({})
    assert session["idleExpiresAt"] >= clock.now() + timedelta(minutes=settings.desk_session_idle_minutes)


async def test_activity_pushes_the_idle_limit_forward(make_user, client_for, db, settings, clock):
    sam = await make_user("user")
    client = await client_for(sam)
    clock.move(timedelta(minutes=5))

    assert (await client.get("/api/v1/auth/me")).status_code == 200

    session = await db["sessions"].find_one({})
    assert session["idleExpiresAt"] == clock.now() + timedelta(minutes=settings.desk_session_idle_minutes + 1)


async def test_deactivating_or_resetting_a_password_ends_sessions_at_once(make_user, client_for):
    admin, sam, priya = await make_user("admin"), await make_user("user"), await make_user("user")
    sams, priyas, admins = await client_for(sam), await client_for(priya), await client_for(admin)

    await admins.patch(f"/api/v1/admin/users/{sam['id']}", json={"active": False})
    reset = await admins.patch(f"/api/v1/admin/users/{priya['id']}", json={"password": "a brand new passphrase"})
    assert reset.status_code == 200, reset.text

    assert (await sams.get("/api/v1/auth/me")).status_code == 401
    assert (await priyas.get("/api/v1/auth/me")).status_code == 401
    assert (await admins.get("/api/v1/auth/me")).status_code == 200


async def test_api_tokens_are_shown_once_hashed_at_rest_and_revocable(make_user, client_for, anonymous, db):
    sam = await make_user("user")
    client = await client_for(sam)

    created = await client.post("/api/v1/auth/tokens", json={"name": "reporting script"})
    secret = created.json()["secret"]
    anonymous.headers["Authorization"] = f"Bearer {secret}"
    del anonymous.headers[CSRF_HEADER]  # bearer requests are exempt from the CSRF header
    made = await anonymous.post("/api/v1/work-orders", json={"title": "From a script"})
    listed = (await client.get("/api/v1/auth/tokens")).json()

    assert created.status_code == 201
    assert made.status_code == 201 and made.json()["ownerId"] == sam["id"]
    assert listed[0]["name"] == "reporting script" and listed[0]["lastUsedAt"] is not None
    assert "secret" not in listed[0] and secret.startswith(listed[0]["prefix"])
    assert secret not in str(await db["api_tokens"].find_one({}))

    assert (await client.delete(f"/api/v1/auth/tokens/{listed[0]['id']}")).status_code == 204
    assert (await anonymous.get("/api/v1/work-orders")).status_code == 401


async def test_a_deactivated_persons_token_stops_working_at_once_and_for_good(make_user, client_for, anonymous):
    admin, sam = await make_user("admin"), await make_user("user")
    secret = (await (await client_for(sam)).post("/api/v1/auth/tokens", json={"name": "script"})).json()["secret"]
    anonymous.headers["Authorization"] = f"Bearer {secret}"
    assert (await anonymous.get("/api/v1/work-orders")).status_code == 200

    admins = await client_for(admin)
    await admins.patch(f"/api/v1/admin/users/{sam['id']}", json={"active": False})
    refused = await anonymous.get("/api/v1/work-orders")
    await admins.patch(f"/api/v1/admin/users/{sam['id']}", json={"active": True})  # back from leave: not the token

    assert refused.status_code == 401
    assert (await anonymous.get("/api/v1/work-orders")).status_code == 401
    assert (await admins.get(f"/api/v1/admin/users/{sam['id']}/tokens")).json() == []


async def test_someone_elses_token_cannot_be_revoked(make_user, client_for):
    sam, priya = await make_user("user"), await make_user("user")
    token = (await (await client_for(sam)).post("/api/v1/auth/tokens", json={"name": "mine"})).json()

    response = await (await client_for(priya)).delete(f"/api/v1/auth/tokens/{token['id']}")

    assert response.status_code == 404
    assert len((await (await client_for(sam)).get("/api/v1/auth/tokens")).json()) == 1


async def test_bad_credentials_headers_are_unauthorized(anonymous):
    for header in ["Bearer wod_not-a-real-token", "Basic dXNlcjpwYXNz", "Bearer "]:
        anonymous.headers["Authorization"] = header
        response = await anonymous.get("/api/v1/work-orders")
        assert response.status_code == 401
        assert response.json()["error"]["code"] == "UNAUTHORIZED"
        assert response.headers["WWW-Authenticate"] == 'Bearer realm="desk"'  # RFC 9110: what would be let in


async def leaked_and_another(browser, anonymous) -> tuple[dict, dict]:
    """Two tokens made in `browser`'s session; `anonymous` now sends the first, as whoever found it would."""
    leaked, other = [(await browser.post("/api/v1/auth/tokens", json={"name": n})).json() for n in ("leaked", "cron")]
    anonymous.headers["Authorization"] = f"Bearer {leaked['secret']}"
    return leaked, other


async def test_a_token_may_revoke_itself_but_not_its_owners_other_tokens(make_user, client_for, anonymous, db):
    leaked, other = await leaked_and_another(await client_for(await make_user("user")), anonymous)

    refused = await anonymous.delete(f"/api/v1/auth/tokens/{other['id']}")
    missing = await anonymous.delete(f"/api/v1/auth/tokens/{ObjectId()}")
    itself = await anonymous.delete(f"/api/v1/auth/tokens/{leaked['id']}")

    assert refused.status_code == 403 and "only itself" in refused.json()["error"]["message"]
    assert missing.status_code == 404
    assert itself.status_code == 204
    assert [doc["name"] for doc in await db["api_tokens"].find().to_list()] == ["cron"]
    assert (await anonymous.get("/api/v1/auth/me")).status_code == 401


async def test_an_admins_token_cannot_list_or_revoke_anyones_tokens(make_user, client_for, anonymous, db):
    # found by a review: the admin routes let an admin's leaked token list and revoke its owner's other tokens
    dana = await make_user("admin")
    browser = await client_for(dana)
    _, other = await leaked_and_another(browser, anonymous)

    listed = await anonymous.get(f"/api/v1/admin/users/{dana['id']}/tokens")
    revoked = await anonymous.delete(f"/api/v1/admin/users/{dana['id']}/tokens/{other['id']}")

    assert (listed.status_code, revoked.status_code) == (403, 403)
    assert "browser" in revoked.json()["error"]["message"]
    assert await db["api_tokens"].count_documents({}) == 2
    assert (await browser.get(f"/api/v1/admin/users/{dana['id']}/tokens")).status_code == 200  # from a session


async def test_a_token_request_answered_before_it_needs_its_person_leaves_no_error_in_the_log(anonymous, caplog):
    """The token is looked up as the request comes in (desk.middleware.TokenLookup); a 404 never asks how that went."""
    anonymous.headers["Authorization"] = "Bearer wod_not-a-real-token"
    others = asyncio.all_tasks() - {asyncio.current_task()}

    response = await anonymous.get("/api/v1/no-such-endpoint")
    await until(lambda: not (asyncio.all_tasks() - others - {asyncio.current_task()}), what="the lookup ends")
    gc.collect()  # asyncio reports an outcome nobody read when the task is collected

    assert response.status_code == 404 and response.json()["error"]["code"] == "NOT_FOUND"
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []


async def test_a_token_revoked_while_a_slow_body_arrives_is_refused(app, make_user, client_for, db, clock):
    """The early lookup (desk.middleware.TokenLookup) is not trusted past EARLY_FOR: the token is looked up again."""
    sam = await make_user("user")
    browser = await client_for(sam)
    token = (await browser.post("/api/v1/auth/tokens", json={"name": "script"})).json()
    headers = [(b"host", b"desk.test"), (b"content-type", b"application/json")]
    headers.append((b"authorization", f"Bearer {token['secret']}".encode()))
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http"}
    scope |= {"path": "/api/v1/work-orders", "raw_path": b"/api/v1/work-orders", "query_string": b"", "root_path": ""}
    scope |= {"headers": headers, "client": ("127.0.0.1", 50000), "server": ("desk.test", 80)}
    sent: list[dict] = []

    async def receive() -> dict:  # the body comes late, and the token is revoked before it does
        if not sent and await db["api_tokens"].count_documents({}):
            assert (await browser.delete(f"/api/v1/auth/tokens/{token['id']}")).status_code == 204
            clock.move(timedelta(seconds=middleware.EARLY_FOR))  # the body took that long
        return {"type": "http.request", "body": b'{"title": "Sneaked in"}', "more_body": False}

    async def send(message: dict) -> None:
        sent.append(message)

    await app(scope, receive, send)

    assert sent[0]["status"] == 401
    assert await db["work_orders"].count_documents({}) == 0


async def test_an_api_token_cannot_mint_or_list_tokens(make_user, client_for, anonymous, db):
    sam = await make_user("user")
    browser = await client_for(sam)
    token = (await browser.post("/api/v1/auth/tokens", json={"name": "leaked script"})).json()
    anonymous.headers["Authorization"] = f"Bearer {token['secret']}"

    minted = await anonymous.post("/api/v1/auth/tokens", json={"name": "a way back in"})
    listed = await anonymous.get("/api/v1/auth/tokens")

    assert (minted.status_code, listed.status_code) == (403, 403)
    assert minted.json()["error"]["code"] == "FORBIDDEN" and "browser" in minted.json()["error"]["message"]
    assert await db["api_tokens"].count_documents({}) == 1
    assert (await browser.delete(f"/api/v1/auth/tokens/{token['id']}")).status_code == 204  # revoking cuts it off
    assert (await anonymous.get("/api/v1/auth/me")).status_code == 401
