"""Logins that say what happened without helping a guesser, and throttling by address (the account's own lock:
tests/auth/test_lockout.py)."""

from datetime import UTC, datetime, timedelta

from bson import ObjectId

from desk.config import use_settings
from tests.helpers import PASSWORD, lock_out

WRONG = "Wrong email or password"
TOO_MANY = "Too many login attempts from this address; try again in {} second{}."


async def login(client, email: str, password: str = PASSWORD):
    return await client.post("/api/v1/auth/login", json={"email": email, "password": password})


async def test_a_locked_account_is_told_so_and_until_when_after_its_right_password_only(make_user, anonymous, db):
    sam = await make_user("user", email="sam@example.com")
    await lock_out(db, "sam@example.com")
    until = (await db["users"].find_one({"_id": ObjectId(sam["id"])}))["lockedUntil"]

    wrong = await login(anonymous, "sam@example.com", "yet another guess")
    right = await login(anonymous, "sam@example.com")

    assert wrong.status_code == 401 and WRONG in wrong.json()["error"]["message"]
    assert right.status_code == 403
    error = right.json()["error"]
    assert error["code"] == "FORBIDDEN"
    # the minute a retry works: the lock's end rounded up (17:00:21 is "17:01"), never down
    retry = until.replace(second=0, microsecond=0) + (
        timedelta(minutes=1) if until.second or until.microsecond else timedelta()
    )
    assert f"until {retry.astimezone(UTC):%H:%M} UTC" in error["message"]
    assert "ask an admin to unlock it" in error["message"]
    assert datetime.fromisoformat(error["details"]["lockedUntil"]) == until
    assert error["details"]["lockedUntil"].endswith("Z")  # written as every other time the API sends
    assert "desk_session" not in right.headers.get("set-cookie", "")
    # the wrong guess during the lock did not lengthen it
    assert (await db["users"].find_one({"_id": ObjectId(sam["id"])}))["lockedUntil"] == until


async def test_a_deactivated_account_is_told_to_ask_an_admin_after_its_right_password_only(
    make_user, anonymous, client_for
):
    admin, gone = await make_user("admin"), await make_user("user", email="gone@example.com")
    await (await client_for(admin)).patch(f"/api/v1/admin/users/{gone['id']}", json={"active": False})

    wrong = await login(anonymous, "gone@example.com", "not the password")
    right = await login(anonymous, "gone@example.com")

    assert wrong.status_code == 401 and WRONG in wrong.json()["error"]["message"]
    assert right.status_code == 403
    assert right.json()["error"]["message"] == "This account is deactivated. Ask an admin of the desk to reactivate it."


async def test_one_mistyped_email_behind_a_nat_holds_up_nobody_else(make_user, anonymous, settings):
    use_settings(settings.model_copy(update={"desk_login_attempts_per_minute": 3}))
    await make_user("user", email="sam@example.com")
    await make_user("user", email="priya@example.com")

    typo = [(await login(anonymous, "sma@example.com")).status_code for _ in range(5)]
    priya = await login(anonymous, "priya@example.com")  # a colleague, same office, same address
    sam = await login(anonymous, "sam@example.com")  # Sam, once he sees the typo

    assert typo == [401, 401, 401, 429, 429]
    assert (priya.status_code, sam.status_code) == (200, 200)


async def test_successful_logins_never_count_against_the_address(make_user, anonymous, settings):
    use_settings(settings.model_copy(update={"desk_login_attempts_per_minute": 1}))
    people = [await make_user("user") for _ in range(7)]  # an office arriving at nine

    statuses = [(await login(anonymous, person["email"])).status_code for person in people]

    assert statuses == [200] * 7


async def test_an_address_trying_email_after_email_is_stopped(anonymous, settings):
    use_settings(settings.model_copy(update={"desk_login_attempts_per_minute": 1}))

    sprayed = [(await login(anonymous, f"guess{n}@example.com", "Summer2026!")).status_code for n in range(6)]

    assert sprayed == [401] * 5 + [429]
    limited = await login(anonymous, "guess99@example.com", "Summer2026!")
    wait = int(limited.headers["Retry-After"])
    assert 1 <= wait <= 60 and limited.json()["error"]["message"] == TOO_MANY.format(wait, "" if wait == 1 else "s")


async def test_admins_see_who_is_locked_and_unlock_them(make_user, client_for, anonymous, db, clock):
    admin, sam = await make_user("admin"), await make_user("user", email="sam@example.com")
    await lock_out(db, "sam@example.com")
    admins = await client_for(admin)

    listed = {item["email"]: item for item in (await admins.get("/api/v1/admin/users")).json()["items"]}
    refused = await (await client_for(await make_user("user"))).post(f"/api/v1/admin/users/{sam['id']}/unlock")
    unlocked = await admins.post(f"/api/v1/admin/users/{sam['id']}/unlock")

    assert datetime.fromisoformat(listed["sam@example.com"]["lockedUntil"]) == clock.now() + timedelta(minutes=15)
    assert listed[admin["email"]]["lockedUntil"] is None
    again = await admins.post(f"/api/v1/admin/users/{sam['id']}/unlock")  # a second click: nothing left to lift

    assert refused.status_code == 403
    assert unlocked.status_code == 200 and unlocked.json()["lockedUntil"] is None
    assert again.status_code == 200 and again.json() == unlocked.json()
    assert (await login(anonymous, "sam@example.com")).status_code == 200
    audited = await admins.get("/api/v1/admin/audit")
    assert [entry["action"] for entry in audited.json()["items"]].count("account_unlocked") == 1
