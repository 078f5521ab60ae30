"""/app/admin/users: admins add people and change them; nobody else gets in."""

from datetime import timedelta

import pytest
from bson import ObjectId
from nicegui import ui
from nicegui.testing import User

from components.forbidden import MESSAGE as NO_ACCESS
from components.frame import SESSION_CHECK_SECONDS
from desk.auth import service as auth_service
from desk.auth.passwords import TOO_COMMON
from desk.errors import Forbidden, Unauthorized
from desk.schema import now
from desk.users import handover
from desk.users import service as users_service
from desk.users.models import UserAdminUpdate, UserCreate
from desk.work_orders import service as work_orders_service
from desk.work_orders.models import WorkOrderUpdate
from pages import admin_users
from tests.helpers import PASSWORD, actor, error_of, lock_out, until
from tests.ui.conftest import WAIT, submit, text_shown_as_typed

PAGE = "/app/admin/users"
NEW_PASSWORD = "a lighthouse keeper's ledger"


async def open_as_admin(user: User, make_user, log_in) -> dict:
    ada = await make_user("admin", email="ada@example.com", name="Ada Lovelace")
    await log_in(user, ada, landing=PAGE)
    await user.should_see(marker="user-row", retries=WAIT)  # the list arrives just after the page
    return ada


def choose(user: User, marker: str, option: str) -> None:
    """Open a select and pick one of its options, as a person would."""
    user.find(marker=marker).click()
    user.find(option).click()


async def test_an_admin_adds_a_person_who_can_then_log_in(user: User, create_user, make_user, log_in):
    await open_as_admin(user, make_user, log_in)

    user.find(marker="new-email").type("Dana.Scully@Example.com")
    user.find(marker="new-name").type("Dana Scully")
    with user.scope(marker="new-user"):
        choose(user, "new-role", "Viewer")
    user.find(marker="new-password").type(NEW_PASSWORD).trigger("keydown.enter")  # Enter adds, as in any form

    await user.should_see("Added Dana Scully as a viewer.", retries=WAIT)
    await user.should_see(marker="user:dana.scully@example.com", retries=WAIT)
    with user.scope(marker="user:dana.scully@example.com"):
        await user.should_see("Dana Scully", retries=WAIT)
        await user.should_see("Viewer", retries=WAIT)
        await user.should_see("AI on", retries=WAIT)
        await user.should_see("Active", retries=WAIT)
    assert user.find(marker="new-email").elements.pop().value == ""  # the form is ready for the next person

    dana = create_user()
    await dana.open("/login")
    submit(dana, "dana.scully@example.com", NEW_PASSWORD)
    await dana.should_see(marker="current-user", retries=WAIT)
    await dana.should_see("Dana Scully", retries=WAIT)


async def test_messages_appear_beside_the_fields(user: User, make_user, log_in, db):
    await open_as_admin(user, make_user, log_in)

    user.find(marker="create-user").click()
    await user.should_see("Required.", retries=WAIT)
    assert error_of(user, "new-email") == "Required."  # nothing typed is not a wrong address
    assert error_of(user, "new-name") == "Required."
    assert error_of(user, "new-password") == "Required."

    user.find(marker="new-email").type("ada@example.com")
    user.find(marker="new-name").type("Another Ada")
    user.find(marker="new-password").type("short")
    user.find(marker="create-user").click()
    await user.should_see("The password must have at least 12 characters.", retries=WAIT)
    assert error_of(user, "new-password") == "The password must have at least 12 characters."
    assert error_of(user, "new-email") is None

    user.find(marker="new-password").clear().type("qwerty123456")
    user.find(marker="create-user").click()
    await user.should_see(TOO_COMMON, retries=WAIT)
    assert error_of(user, "new-password") == TOO_COMMON

    user.find(marker="new-email").clear().type("not an email")  # every problem at once, not one a try
    user.find(marker="create-user").click()
    await user.should_see("Must be an email address.", retries=WAIT)
    assert error_of(user, "new-password") == TOO_COMMON

    user.find(marker="new-email").clear().type("ada@example.com")
    user.find(marker="new-password").clear().type(NEW_PASSWORD)
    user.find(marker="create-user").click()
    await user.should_see("A user with that email already exists.", retries=WAIT)
    assert error_of(user, "new-email") == "A user with that email already exists."
    assert error_of(user, "new-password") is None
    assert await db["users"].count_documents({}) == 1


async def test_an_admin_changes_role_and_ai_access(user: User, make_user, log_in, db):
    sam = await make_user("user", email="sam@example.com", name="Sam Rivera")
    await open_as_admin(user, make_user, log_in)

    with user.scope(marker="user:sam@example.com"):
        choose(user, "role", "Viewer")
    # every change of his is taken at once: asked first, as admin rights are (it took one slip of the hand)
    await user.should_see("Make Sam Rivera a viewer?", retries=WAIT)
    await user.should_see("They can then read work orders but no longer change anything, at once.")
    user.find(marker="confirm-role").click()
    await user.should_see("Sam Rivera is now a viewer.", retries=WAIT)
    assert (await db["users"].find_one({"email": sam["email"]}))["role"] == "viewer"

    with user.scope(marker="user:sam@example.com"):
        user.find(marker="ai").click()
        await user.should_see("AI off", retries=WAIT)
    # his own choice too: the admin is told it is not locked off
    await user.should_see(
        "AI assistance turned off for Sam Rivera. They can turn it on again in their profile.", retries=WAIT
    )
    assert (await db["users"].find_one({"email": sam["email"]}))["aiEnabled"] is False

    await user.open(PAGE)  # what is shown is what is stored
    await user.should_see(marker="user-row", retries=WAIT)
    with user.scope(marker="user:sam@example.com"):
        await user.should_see("Viewer", retries=WAIT)
        await user.should_see("AI off", retries=WAIT)


async def test_making_someone_a_viewer_offers_to_return_their_open_orders_to_the_queue(
    user: User, make_user, make_order, log_in, db
):
    # found by an admin: a new viewer kept their open orders, which then waited for someone who could not work
    sam = await make_user("user", email="sam@example.com", name="Sam Rivera")
    await make_order(sam, "Leaking tap")
    await make_order(sam, "Broken blind")
    done = await make_order(sam, "Fixed door")
    closing = WorkOrderUpdate(version=done.version, status="done")
    await work_orders_service.update(db=db, actor=actor(sam), order_id=done.id, data=closing)
    ada = await open_as_admin(user, make_user, log_in)

    with user.scope(marker="user:sam@example.com"):
        choose(user, "role", "Viewer")
    await user.should_see("Sam Rivera owns 2 open work orders, which nobody would then work on.", retries=WAIT)
    user.find(marker="confirm-role-return").click()

    await user.should_see("Sam Rivera is now a viewer. 2 open work orders went back to the queue.", retries=WAIT)
    owners = {o["title"]: o["ownerId"] for o in await db["work_orders"].find().to_list()}
    assert owners == {"Leaking tap": None, "Broken blind": None, "Fixed door": ObjectId(sam["id"])}
    (entry,) = await db["audit_log"].find({"action": "orders_returned_to_queue"}).to_list()
    assert (entry["actorId"], entry["subjectId"], entry["details"]) == (
        ada["id"],
        sam["id"],
        {"name": "Sam Rivera", "count": 2},
    )


async def test_only_an_admin_returns_someones_orders_to_the_queue(make_user, make_order, db):
    sam, priya = await make_user("user"), await make_user("user")
    await make_order(sam, "Leaking tap")

    with pytest.raises(Forbidden):
        await handover.return_to_queue(db=db, actor=actor(priya), user_id=sam["id"])
    with pytest.raises(Forbidden):
        await handover.open_orders_owned(db=db, actor=actor(priya), user_id=sam["id"])
    assert await db["work_orders"].count_documents({"ownerId": ObjectId(sam["id"])}) == 1


async def test_giving_or_taking_admin_rights_asks_first(user: User, make_user, log_in, db):
    # found by a UI QA pass: demoting an admin took one click, where deactivating someone asks
    await make_user("admin", email="ola@example.com", name="Ola Admin")
    await open_as_admin(user, make_user, log_in)

    with user.scope(marker="user:ola@example.com"):
        choose(user, "role", "User")
    await user.should_see("Make Ola Admin a user?", retries=WAIT)
    await user.should_see("They lose the admin pages at once.")
    user.find("Cancel").click()
    await user.should_not_see(marker="confirm-role", retries=WAIT)
    assert (await db["users"].find_one({"email": "ola@example.com"}))["role"] == "admin"
    with user.scope(marker="user:ola@example.com"):
        await user.should_see("Admin")  # the field shows what is stored again

    with user.scope(marker="user:ola@example.com"):
        choose(user, "role", "User")
    await user.should_see(marker="confirm-role", retries=WAIT)
    user.find(marker="confirm-role").click()

    await user.should_see("Ola Admin is now a user.", retries=WAIT)
    assert (await db["users"].find_one({"email": "ola@example.com"}))["role"] == "user"


async def test_deactivating_someone_ends_their_open_session(user: User, create_user, make_user, log_in, db):
    sam = await make_user("user", email="sam@example.com", name="Sam Rivera")
    sams_browser = create_user()
    await log_in(sams_browser, sam)
    await open_as_admin(user, make_user, log_in)

    with user.scope(marker="user:sam@example.com"):
        user.find(marker="active").click()
    await user.should_see("Deactivate Sam Rivera? They are logged out everywhere at once.", retries=WAIT)
    user.find("Cancel").click()  # a slip of the hand changes nothing
    with user.scope(marker="user:sam@example.com"):
        await user.should_see("Active", retries=WAIT)
    assert (await db["users"].find_one({"email": sam["email"]}))["active"] is True

    with user.scope(marker="user:sam@example.com"):
        user.find(marker="active").click()
    await user.should_see(marker="confirm-deactivate", retries=WAIT)
    user.find(marker="confirm-deactivate").click()
    with user.scope(marker="user:sam@example.com"):
        await user.should_see("Deactivated", retries=WAIT)
    await user.should_see("Sam Rivera is deactivated; their sessions have ended.", retries=WAIT)
    assert (await db["users"].find_one({"email": sam["email"]}))["active"] is False

    await sams_browser.should_see(marker="login", retries=int(SESSION_CHECK_SECONDS * 10) + 20)
    submit(sams_browser, sam["email"], PASSWORD)
    await sams_browser.should_see(
        "This account is deactivated. Ask an admin of the desk to reactivate it.", retries=WAIT
    )


async def test_an_admin_resets_a_password(user: User, make_user, log_in, db):
    sam = await make_user("user", email="sam@example.com", name="Sam Rivera")
    await open_as_admin(user, make_user, log_in)

    with user.scope(marker="user:sam@example.com"):
        # icons in the row, each named for a screen reader and in a tooltip
        named = {m: user.find(marker=m).elements.pop().props["aria-label"] for m in ("edit-person", "tokens", "reset")}
        assert named == {"edit-person": "Edit name and email", "tokens": "API tokens", "reset": "Reset password"}
        user.find(marker="reset").click()
    await user.should_see(marker="reset-dialog", retries=WAIT)
    await user.should_see("New password for Sam Rivera (sam@example.com)")
    user.find(marker="reset-password").type("short")
    user.find(marker="reset-save").click()
    await user.should_see("The password must have at least 12 characters.", retries=WAIT)
    assert error_of(user, "reset-password") == "The password must have at least 12 characters."

    user.find(marker="reset-password").clear().type(NEW_PASSWORD)
    user.find(marker="reset-save").click()
    await user.should_see("Password reset for Sam Rivera; their sessions have ended.", retries=WAIT)
    await user.should_not_see(marker="reset-dialog", retries=WAIT)

    with pytest.raises(Unauthorized):
        await auth_service.login(db=db, email=sam["email"], password=PASSWORD, ip="test")
    done = await auth_service.login(db=db, email=sam["email"], password=NEW_PASSWORD, ip="test")
    assert done.user["email"] == sam["email"]


async def test_an_admin_cannot_demote_or_deactivate_themselves(user: User, make_user, log_in, db):
    sam = await make_user("user", name="Sam Rivera")
    ada = await open_as_admin(user, make_user, log_in)

    with user.scope(marker=f"user:{ada['email']}"):
        await user.should_see("(you)")
        (role,), (active,) = user.find(marker="role").elements, user.find(marker="active").elements
    with user.scope(marker=f"user:{sam['email']}"):
        (sams_role,), (sams_active,) = user.find(marker="role").elements, user.find(marker="active").elements

    assert not role.enabled and not active.enabled  # no control that only leads to "you cannot"
    assert sams_role.enabled and sams_active.enabled
    assert (role.props["aria-label"], sams_role.props["aria-label"]) == (f"Role of {ada['name']}", "Role of Sam Rivera")
    stored = await db["users"].find_one({"email": ada["email"]})
    assert (stored["role"], stored["active"]) == ("admin", True)


@pytest.mark.parametrize("role", ["user", "viewer"])
async def test_others_get_the_no_access_page(user: User, make_user, log_in, role):
    person = await make_user(role, email=f"{role}@example.com", name="Pat Doe")
    await make_user("user", email="secret.person@example.com", name="Someone Else")
    await log_in(user, person)
    await user.should_not_see(kind=ui.link, content="Users", retries=WAIT)  # the frame never offers the link

    await user.open(PAGE)
    await user.should_see(NO_ACCESS, retries=WAIT)
    await user.should_see(marker="current-user", retries=WAIT)  # inside the frame, still logged in
    await user.should_not_see(marker="new-user", retries=WAIT)
    await user.should_not_see("Someone Else", retries=WAIT)
    user.find(marker="back").click()
    await user.should_see("Work orders", retries=WAIT)


async def test_names_are_shown_as_typed_never_as_html(user: User, make_user, log_in):
    await make_user("user", email="mallory@example.com", name="<img src=x onerror=alert(1)>")
    await open_as_admin(user, make_user, log_in)

    with user.scope(marker="user:mallory@example.com"):
        (name,) = user.find(marker="user-name").elements
    assert await text_shown_as_typed(user, name) == "<img src=x onerror=alert(1)>"


async def test_an_admin_sees_someones_tokens_and_their_last_use_and_revokes_one(user: User, make_user, log_in, db):
    sam = await make_user("user", email="sam@example.com", name="Sam Rivera")
    used = await auth_service.create_token(db=db, actor=actor(sam), name="Reporting script")
    await auth_service.create_token(db=db, actor=actor(sam), name="Old laptop")
    await auth_service.user_for_token(db=db, secret=used.secret)  # a program uses it
    await open_as_admin(user, make_user, log_in)

    with user.scope(marker="user:sam@example.com"):
        user.find(marker="tokens").click()
    await user.should_see(marker="tokens-dialog", retries=WAIT)
    await user.should_see("API tokens of Sam Rivera", retries=WAIT)
    with user.scope(marker=f"token:{used.id}"):
        await user.should_see("Reporting script", retries=WAIT)
        await user.should_see("Last used just now", retries=WAIT)
    await user.should_see("Never used", retries=WAIT)
    await user.should_not_see(used.secret, retries=WAIT)

    with user.scope(marker=f"token:{used.id}"):
        user.find(marker="revoke").click()
    await user.should_see("Revoke Sam Rivera's token?", retries=WAIT)
    user.find(marker="confirm-revoke").click()
    await user.should_see("Token revoked for Sam Rivera.", retries=WAIT)
    await user.should_not_see(marker=f"token:{used.id}", retries=WAIT)
    await user.should_see("Old laptop", retries=WAIT)
    with pytest.raises(Unauthorized):
        await auth_service.user_for_token(db=db, secret=used.secret)


async def test_the_users_page_shows_who_is_locked_and_unlocks_them(user: User, make_user, log_in, db):
    sam = await make_user("user", email="sam@example.com", name="Sam Rivera")
    await lock_out(db, sam["email"])  # guesses from many addresses: the only way to lock an account
    await open_as_admin(user, make_user, log_in)

    with user.scope(marker="user:sam@example.com"):
        await user.should_see("Locked until", retries=WAIT)
        user.find(marker="unlock").click()
    await user.should_see("Sam Rivera is unlocked and can log in again.", retries=WAIT)
    with user.scope(marker="user:sam@example.com"):
        await user.should_not_see(marker="locked", retries=WAIT)
    assert (await auth_service.login(db=db, email=sam["email"], password=PASSWORD, ip="test")).user["_id"]


async def test_the_users_page_and_the_login_tell_the_same_minute_a_lock_ends(user: User, make_user, log_in, db):
    # found by an admin: the Users page said 17:00 and the login 17:01 for a lock ending at 17:00:21
    sam = await make_user("user", email="sam@example.com", name="Sam Rivera")
    await lock_out(db, sam["email"])
    ends = (now() + timedelta(minutes=20)).replace(second=21, microsecond=0)
    await db["users"].update_one({"_id": ObjectId(sam["id"])}, {"$set": {"lockedUntil": ends}})
    told = (ends.replace(second=0) + timedelta(minutes=1)).strftime("%H:%M UTC")

    with pytest.raises(Forbidden) as refused:
        await auth_service.login(db=db, email=sam["email"], password=PASSWORD, ip="test")
    assert f"until {told}." in refused.value.message
    await open_as_admin(user, make_user, log_in)
    with user.scope(marker="user:sam@example.com"):
        (shown,) = user.find(marker="locked").elements
    assert shown.text.endswith(f", {told}")


async def test_what_others_change_shows_up_while_the_list_is_open(user: User, make_user, log_in, db, monkeypatch):
    monkeypatch.setattr(admin_users, "FOLLOW_SECONDS", 0.2)
    sam = await make_user("user", email="sam@example.com", name="Sam Rivera")
    other = await make_user("admin", email="ola@example.com", name="Ola Admin")
    await open_as_admin(user, make_user, log_in)
    ola = actor(other)

    await users_service.update_user(db=db, actor=ola, user_id=sam["id"], data=UserAdminUpdate(role="viewer"))
    await auth_service.login(db=db, email="sam@example.com", password=sam["password"], ip="test")

    with user.scope(marker="user:sam@example.com"):
        await user.should_see("just now")  # his last login, drawn in place
    (role,) = [e for e in user.find(marker="role").elements if e.props.get("aria-label") == "Role of Sam Rivera"]
    await until(lambda: role.value == "viewer", what="Sam's row to show his new role")

    with user.scope(marker="user:sam@example.com"):
        user.find(marker="edit-person").click()  # a dialog of a row is open: the list is not redrawn meanwhile
    await user.should_see(marker="edit-dialog")
    hire = UserCreate(email="new.hire@example.com", name="New Hire", role="user", password=PASSWORD)
    read, totals = users_service.list_users, []

    async def noted(**kwargs):  # what the list's follow-up reads (it decides without another await)
        found = await read(**kwargs)
        totals.append(found.total)
        return found

    monkeypatch.setattr(users_service, "list_users", noted)
    await users_service.create_user(db=db, actor=ola, data=hire)
    await until(lambda: 4 in totals, what="the open list to read that New Hire came")
    await user.should_see(marker="edit-dialog")
    await user.should_not_see(marker="user:new.hire@example.com")

    user.find("Cancel").click()
    await user.should_see(marker="user:new.hire@example.com")  # people who came: the list is drawn again
    await user.should_see("4 people")


async def test_an_admin_whose_login_is_old_is_asked_to_log_in_again_to_raise_a_role(user: User, make_user, log_in, db):
    sam = await make_user("viewer", email="sam@example.com", name="Sam Rivera")
    ada = await open_as_admin(user, make_user, log_in)
    logged_in = now() - timedelta(minutes=16)
    await db["sessions"].update_many({"userId": ObjectId(ada["id"])}, {"$set": {"createdAt": logged_in}})

    with user.scope(marker="user:sam@example.com"):
        choose(user, "role", "User")

    await user.should_see("Log in again to give someone a role that can do more", retries=WAIT)
    assert (await db["users"].find_one({"email": sam["email"]}))["role"] == "viewer"
    with user.scope(marker="user:sam@example.com"):
        assert user.find(marker="role").elements.pop().value == "viewer"  # the control shows what is stored
