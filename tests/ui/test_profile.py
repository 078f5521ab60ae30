"""/app/profile: one's own password, API tokens and AI assistance, for every role."""

from datetime import UTC, timedelta

import pytest
from bson import ObjectId
from nicegui import ui
from nicegui.testing import User

from desk.auth import service as auth_service
from desk.auth.passwords import TOO_COMMON
from desk.errors import Unauthorized
from desk.schema import now
from tests.helpers import PASSWORD, actor, error_of, until
from tests.ui.conftest import WAIT, text_shown_as_typed

PAGE = "/app/profile"
NEW_PASSWORD = "a lighthouse keeper's ledger"
ROLES = ["admin", "user", "viewer"]


def fill_password_form(user: User, current: str, new: str, repeat: str) -> None:
    user.find(marker="current-password").clear().type(current)
    user.find(marker="new-password").clear().type(new)
    user.find(marker="repeat-password").clear().type(repeat)
    user.find(marker="change-password").click()


@pytest.mark.parametrize("role", ROLES)
async def test_every_role_has_a_profile(user: User, make_user, log_in, role):
    person = await make_user(role, name="Pat Doe")
    await log_in(user, person)
    user.find(marker="current-user").click()  # the name in the header leads here

    await user.should_see(marker="profile-name", retries=WAIT)
    await user.should_see("Change password", retries=WAIT)
    await user.should_see("Personal API tokens", retries=WAIT)
    await user.should_see("You have no API tokens.", retries=WAIT)
    await user.should_see(marker="own-ai", retries=WAIT)


async def test_changing_the_password(user: User, make_user, log_in, db):
    sam = await make_user("viewer", name="Sam Rivera")
    elsewhere = await auth_service.open_session(db=db, user_id=ObjectId(sam["id"]))  # Sam's other laptop
    await log_in(user, sam, landing=PAGE)

    fill_password_form(user, PASSWORD, NEW_PASSWORD, NEW_PASSWORD)
    await user.should_see("Password changed. Your other sessions have been logged out.", retries=WAIT)
    assert user.find(marker="new-password").elements.pop().value == ""

    with pytest.raises(Unauthorized):
        await auth_service.login(db=db, email=sam["email"], password=PASSWORD, ip="test")
    assert (await auth_service.login(db=db, email=sam["email"], password=NEW_PASSWORD, ip="test")).user["_id"]
    with pytest.raises(Unauthorized):
        await auth_service.user_for_session(db=db, secret=elsewhere)

    await user.open(PAGE)  # this browser is still logged in
    await user.should_see(marker="profile-name", retries=WAIT)


async def test_a_new_password_can_be_shown_by_a_named_button(user: User, make_user, log_in):
    await log_in(user, await make_user("user"), landing=PAGE)
    (field,) = user.find(marker="new-password").elements
    (show,) = user.find(marker="show-password").elements

    assert (field.props["type"], show.props["aria-label"]) == ("password", "Show password")
    assert isinstance(show, ui.button)  # a button: Tab reaches it and a screen reader names it (an icon is neither)
    user.find(marker="show-password").click()
    assert (field.props["type"], show.props["aria-label"]) == ("text", "Hide password")
    user.find(marker="show-password").click()
    assert (field.props["type"], show.props["aria-label"]) == ("password", "Show password")


async def test_password_messages_beside_the_fields(user: User, make_user, log_in, db):
    sam = await make_user("user", name="Sam Rivera")
    await log_in(user, sam, landing=PAGE)

    fill_password_form(user, PASSWORD, NEW_PASSWORD, "something else entirely")
    await user.should_see("The two new passwords are not the same.", retries=WAIT)
    assert error_of(user, "repeat-password") == "The two new passwords are not the same."

    fill_password_form(user, "not my password", NEW_PASSWORD, NEW_PASSWORD)
    await user.should_see("The current password is not right.", retries=WAIT)
    assert error_of(user, "current-password") == "The current password is not right."
    assert error_of(user, "repeat-password") is None

    fill_password_form(user, PASSWORD, "qwerty123456", "qwerty123456")
    await user.should_see(TOO_COMMON, retries=WAIT)
    assert error_of(user, "new-password") == TOO_COMMON
    assert error_of(user, "current-password") is None

    fill_password_form(user, PASSWORD, "", "")
    await user.should_see("Required.", retries=WAIT)
    assert error_of(user, "new-password") == "Required."

    assert (await auth_service.login(db=db, email=sam["email"], password=PASSWORD, ip="test")).user["_id"]


async def test_an_api_token_is_shown_once_then_listed_used_and_revoked(user: User, make_user, log_in, db):
    sam = await make_user("user", name="Sam Rivera")
    await log_in(user, sam, landing=PAGE)

    user.find(marker="create-token").click()
    await user.should_see("Required.", retries=WAIT)
    assert error_of(user, "token-name") == "Required."

    user.find(marker="token-name").type("Reporting script")
    user.find(marker="create-token").click()
    await user.should_see(marker="token-dialog", retries=WAIT)
    await user.should_see("Copy it now: you won't see this token again.", retries=WAIT)
    (shown,) = user.find(marker="token-secret").elements
    secret = shown.text
    assert secret.startswith("wod_")
    user.find(marker="copy-token").click()
    await user.should_see("Copied to the clipboard.", retries=WAIT)

    user.find(marker="token-done").click()
    await user.should_not_see(marker="token-dialog", retries=WAIT)
    await user.should_not_see(secret, retries=WAIT)
    with user.scope(marker="token-row"):
        await user.should_see("Reporting script", retries=WAIT)
        await user.should_see("Never used", retries=WAIT)
    stored = await db["api_tokens"].find_one({})
    assert stored["name"] == "Reporting script"
    assert secret not in str(stored)  # only its hash is kept

    assert (await auth_service.user_for_token(db=db, secret=secret))["email"] == sam["email"]
    await user.open(PAGE)
    await user.should_see(marker="token-row", retries=WAIT)
    with user.scope(marker="token-row"):
        await user.should_see("Last used just now", retries=WAIT)
    await user.should_not_see(secret, retries=WAIT)

    user.find(marker="revoke").click()
    await user.should_see("Revoke this token?", retries=WAIT)
    user.find("Cancel").click()
    await user.should_not_see("Revoke this token?", retries=WAIT)
    await user.should_see(marker="token-row", retries=WAIT)

    user.find(marker="revoke").click()
    await user.should_see(marker="confirm-revoke", retries=WAIT)
    user.find(marker="confirm-revoke").click()
    await user.should_see("Token revoked.", retries=WAIT)
    await user.should_see("You have no API tokens.", retries=WAIT)
    await user.should_not_see(marker="token-row", retries=WAIT)
    with pytest.raises(Unauthorized):
        await auth_service.user_for_token(db=db, secret=secret)


@pytest.mark.parametrize("role", ROLES)
async def test_turning_ai_assistance_off_and_on(user: User, make_user, log_in, db, role):
    person = await make_user(role, name="Pat Doe")
    await log_in(user, person, landing=PAGE)
    await user.should_see("AI is not enabled on this desk; your choice applies once it is.")  # as tests run

    user.find(marker="own-ai").click()
    await user.should_see("AI assistance is off for you.", retries=WAIT)
    assert (await db["users"].find_one({"email": person["email"]}))["aiEnabled"] is False

    await user.open(PAGE)  # it stays off
    await user.should_see(marker="own-ai", retries=WAIT)
    assert user.find(marker="own-ai").elements.pop().value is False

    user.find(marker="own-ai").click()
    await user.should_see("AI assistance is on for you.", retries=WAIT)
    assert (await db["users"].find_one({"email": person["email"]}))["aiEnabled"] is True


async def test_token_names_are_shown_as_typed_never_as_markup(user: User, make_user, log_in):
    sam = await make_user("user", name="Sam Rivera")
    await log_in(user, sam, landing=PAGE)

    user.find(marker="token-name").type("**bold**<script>x</script>")
    user.find(marker="create-token").click()
    await user.should_see(marker="token-dialog", retries=WAIT)
    user.find(marker="token-done").click()
    await user.should_not_see(marker="token-dialog", retries=WAIT)

    (name,) = user.find(marker="token-row-name").elements
    assert await text_shown_as_typed(user, name) == "**bold**<script>x</script>"


async def test_changing_the_password_can_revoke_ones_tokens(user: User, make_user, log_in, db):
    sam = await make_user("user", name="Sam Rivera")
    token = await auth_service.create_token(db=db, actor=actor(sam), name="Reporting script")
    await log_in(user, sam, landing=PAGE)
    await user.should_see(marker="token-row", retries=WAIT)

    user.find(marker="revoke-tokens").click()
    fill_password_form(user, PASSWORD, NEW_PASSWORD, NEW_PASSWORD)

    await user.should_see(
        "Password changed. Your other sessions are logged out and your API tokens revoked.", retries=WAIT
    )
    await user.should_see("You have no API tokens.", retries=WAIT)
    with pytest.raises(Unauthorized):
        await auth_service.user_for_token(db=db, secret=token.secret)


async def test_the_header_follows_ones_own_ai_switch_at_once(user: User, ai_settings, provider, make_user, log_in):
    # switched off, the header kept its Assistant button (and Ctrl+K an empty drawer) until a reload
    sam = await make_user("user")
    await log_in(user, sam, landing=PAGE)
    await user.should_see(marker="copilot-toggle")
    await user.should_not_see(marker="own-ai-desk-off")

    user.find(marker="own-ai").click()
    await user.should_see("AI assistance is off for you.", retries=WAIT)
    await user.should_not_see(marker="copilot-toggle")
    await user.should_see(marker="copilot-off")

    user.find(marker="own-ai").click()
    await user.should_see("AI assistance is on for you.", retries=WAIT)
    await user.should_see(marker="copilot-toggle")


async def test_making_a_token_that_may_only_read_for_thirty_days(user: User, make_user, log_in, db):
    sam = await make_user("user", name="Sam Rivera")
    await log_in(user, sam, landing=PAGE)
    await user.should_see(marker="scope-read", retries=WAIT)
    await user.should_not_see(marker="scope-admin")  # offered to admins only

    user.find(marker="token-name").type("Nightly report")
    user.find(marker="scope-write").click()  # read and write come ticked
    user.find(marker="token-days").clear().type("30")
    user.find(marker="create-token").click()
    await user.should_see(marker="token-dialog", retries=WAIT)
    user.find(marker="token-done").click()

    stored = await db["api_tokens"].find_one({})
    assert stored["scopes"] == ["read"]
    assert timedelta(days=29) < stored["expiresAt"] - now() <= timedelta(days=30)
    with user.scope(marker="token-row"):
        await user.should_see("Nightly report", retries=WAIT)
        await user.should_see(marker="token-scopes", content="Read", retries=WAIT)
        await user.should_see(f"Expires {stored['expiresAt'].astimezone(UTC):%d %b %Y}", retries=WAIT)


async def test_an_admin_may_give_a_token_the_admin_scope_and_sees_it_listed(user: User, make_user, log_in, db):
    ola = await make_user("admin", name="Ola Admin")
    await log_in(user, ola, landing=PAGE)

    user.find(marker="token-name").type("Provisioning")
    user.find(marker="scope-admin").click()
    user.find(marker="create-token").click()
    await user.should_see(marker="token-dialog", retries=WAIT)
    user.find(marker="token-done").click()

    with user.scope(marker="token-row"):
        await user.should_see("Read, Write, Admin", retries=WAIT)
    assert (await db["api_tokens"].find_one({}))["scopes"] == ["read", "write", "admin"]


async def test_a_token_that_may_do_nothing_or_last_over_a_year_is_not_made(user: User, make_user, log_in, db):
    sam = await make_user("user", name="Sam Rivera")
    await log_in(user, sam, landing=PAGE)
    user.find(marker="token-name").type("Script")

    user.find(marker="token-days").clear().type("400")
    user.find(marker="create-token").click()
    await until(lambda: "365" in (error_of(user, "token-days") or ""), what="the days' problem")

    user.find(marker="token-days").clear().type("90")
    user.find(marker="scope-read").click()
    user.find(marker="scope-write").click()
    user.find(marker="create-token").click()
    await user.should_see(marker="token-problem", content="at least 1", retries=WAIT)  # what it may do
    assert await db["api_tokens"].count_documents({}) == 0


async def test_an_expired_token_is_listed_as_expired(user: User, make_user, log_in, db):
    sam = await make_user("user", name="Sam Rivera")
    token = await auth_service.create_token(db=db, actor=actor(sam), name="Old laptop", expires_in_days=1)
    await db["api_tokens"].update_one({"_id": ObjectId(token.id)}, {"$set": {"expiresAt": now() - timedelta(days=2)}})

    await log_in(user, sam, landing=PAGE)
    await user.should_see(marker="token-row")  # drawn once the page has read the tokens (a scope does not wait)

    with user.scope(marker="token-row"):
        await user.should_see("Old laptop", retries=WAIT)
        await user.should_see(marker="token-expiry", content="Expired", retries=WAIT)
