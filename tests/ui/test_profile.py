"""/app/profile: one's own password, API tokens and AI assistance, for every role."""

import pytest
from bson import ObjectId
from nicegui import ui
from nicegui.testing import User

from desk.auth import service as auth_service
from desk.auth.passwords import TOO_COMMON
from desk.errors import Unauthorized
from tests.helpers import PASSWORD, actor, error_of
from tests.ui.conftest import WAIT

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
    assert isinstance(name, ui.label)
    assert name.text == "**bold**<script>x</script>"
    await user.should_not_see(kind=ui.html, retries=WAIT)
    await user.should_not_see(kind=ui.markdown, retries=WAIT)


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
