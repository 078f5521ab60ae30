"""Security events (ASVS 7.1-7.2): logins, lockouts, changes to people and tokens, one JSON line each, no secrets."""

import json
import logging

import pytest

from desk.config import use_settings
from desk.logs import JsonFormatter
from tests.helpers import PASSWORD, lock_out

NEW_PASSWORD = "a lighthouse keeper's ledger"
RESET_PASSWORD = "fresh start for the spring"


@pytest.fixture
def security_log(caplog: pytest.LogCaptureFixture):
    """The desk.security lines written so far, as the JSON the desk's log handler writes."""
    caplog.set_level(logging.INFO)

    def lines() -> list[dict]:
        return [json.loads(JsonFormatter().format(r)) for r in caplog.records if r.name == "desk.security"]

    return lines


def one(lines: list[dict], event: str, **facts: object) -> dict:
    found = [line for line in lines if line["event"] == event and facts.items() <= line.items()]
    assert len(found) == 1, f"{event} {facts}: {found or [line['event'] for line in lines]}"
    return found[0]


async def test_logins_lockouts_and_changes_are_logged_with_who_and_whom_and_no_secret(
    make_user, client_for, anonymous, security_log, caplog, db
):
    admin = await make_user("admin", email="ada@example.com")
    sam = await make_user("user", email="sam@example.com")
    priya = await make_user("user", email="priya@example.com")
    admins = await client_for(admin)

    wrong = {"email": "sam@example.com", "password": "my wrong password"}
    await anonymous.post("/api/v1/auth/login", json={"email": "nobody@example.com", "password": "typed-in-email"})
    await anonymous.post("/api/v1/auth/login", json=wrong)
    logged_in = await anonymous.post("/api/v1/auth/login", json={"email": "sam@example.com", "password": PASSWORD})
    session_secret = logged_in.cookies["desk_session"]
    token = (await anonymous.post("/api/v1/auth/tokens", json={"name": "script"})).json()
    await anonymous.delete(f"/api/v1/auth/tokens/{token['id']}")
    kept = (await anonymous.post("/api/v1/auth/tokens", json={"name": "kept"})).json()
    await anonymous.post(
        "/api/v1/auth/password",
        json={"currentPassword": PASSWORD, "newPassword": NEW_PASSWORD, "revokeTokens": True},
    )
    await anonymous.post("/api/v1/auth/logout")
    await lock_out(db, "priya@example.com", wrong="a guess")  # many addresses: the only way to lock an account
    await admins.post(f"/api/v1/admin/users/{priya['id']}/unlock")
    await admins.patch(f"/api/v1/admin/users/{priya['id']}", json={"role": "viewer"})
    await admins.patch(f"/api/v1/admin/users/{priya['id']}", json={"active": False})
    await admins.patch(f"/api/v1/admin/users/{priya['id']}", json={"password": RESET_PASSWORD})
    made = await admins.post(
        "/api/v1/admin/users",
        json={"email": "new@example.com", "name": "New", "role": "user", "password": "tulip-orbit-2042"},
    )

    lines = security_log()
    assert all(line["logger"] == "desk.security" for line in lines)
    unknown = one(lines, "login_failed", reason="unknown_email")
    assert unknown["subjectId"] is None and unknown["actorId"] is None and unknown["address"]
    one(lines, "login_failed", reason="wrong_password", subjectId=sam["id"])
    one(lines, "login_succeeded", actorId=sam["id"], subjectId=sam["id"])
    one(lines, "token_created", actorId=sam["id"], subjectId=sam["id"], tokenId=token["id"])
    one(lines, "token_revoked", actorId=sam["id"], subjectId=sam["id"], tokenId=token["id"])
    one(lines, "password_changed", actorId=sam["id"], subjectId=sam["id"], tokensRevoked=True)
    one(lines, "tokens_revoked", actorId=sam["id"], subjectId=sam["id"], count=1)
    one(lines, "logged_out", actorId=sam["id"], subjectId=sam["id"])
    locked = one(lines, "account_locked", subjectId=priya["id"])
    assert locked["level"] == "warning" and locked["until"]
    assert (locked["failures"], locked["addresses"]) == (50, 50)
    one(lines, "account_unlocked", actorId=admin["id"], subjectId=priya["id"])
    one(lines, "role_changed", actorId=admin["id"], subjectId=priya["id"], before="user", after="viewer")
    one(lines, "activation_changed", actorId=admin["id"], subjectId=priya["id"], active=False)
    one(lines, "password_reset", actorId=admin["id"], subjectId=priya["id"])
    one(lines, "user_created", actorId=admin["id"], subjectId=made.json()["id"], role="user")

    everything = caplog.text + "\n".join(json.dumps(line) for line in lines)
    for secret in (PASSWORD, NEW_PASSWORD, RESET_PASSWORD, "my wrong password", "typed-in-email", "a guess"):
        assert secret not in everything
    for secret in (session_secret, token["secret"], kept["secret"], "tulip-orbit-2042"):
        assert secret not in everything
    for email in ("sam@example.com", "priya@example.com", "nobody@example.com", "new@example.com"):
        assert email not in everything


async def test_refusals_after_the_right_password_and_throttling_are_logged(
    make_user, client_for, anonymous, settings, security_log
):
    admin, gone = await make_user("admin"), await make_user("user", email="gone@example.com")
    await (await client_for(admin)).patch(f"/api/v1/admin/users/{gone['id']}", json={"active": False})
    await anonymous.post("/api/v1/auth/login", json={"email": "gone@example.com", "password": PASSWORD})
    use_settings(settings.model_copy(update={"desk_login_attempts_per_minute": 1}))
    for _ in range(2):
        await anonymous.post("/api/v1/auth/login", json={"email": "x@example.com", "password": "guess guess"})

    lines = security_log()
    one(lines, "login_failed", reason="deactivated", subjectId=gone["id"])
    one(lines, "login_failed", reason="throttled")
