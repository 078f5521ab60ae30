"""The audit log page: admins read what happened, in words; others are refused."""

from nicegui.testing import User

from components.formats import when
from desk.auth import service as auth_service
from desk.users import service as users_service
from desk.users.models import UserAdminUpdate, UserCreate
from desk.work_orders import service
from pages import admin_audit
from tests.helpers import PASSWORD, actor, until

XSS_TITLE = "<img src=x onerror=alert(1)>"


async def test_an_admin_reads_deletions_and_changes_in_words(user: User, make_user, make_order, log_in, db):
    admin, sam = await make_user("admin", name="Dana Admin"), await make_user("user", name="Sam Rivera")
    order = await make_order(sam, XSS_TITLE)
    await service.delete(db=db, actor=actor(sam), order_id=order.id, version=1)
    await users_service.update_user(db=db, actor=actor(admin), user_id=sam["id"], data=UserAdminUpdate(role="viewer"))
    ai_off = UserAdminUpdate(ai_enabled=False)
    await users_service.update_user(db=db, actor=actor(admin), user_id=sam["id"], data=ai_off)
    await log_in(user, admin)

    await user.open("/app/admin/audit")

    await user.should_see("3 entries")
    await user.should_see("Work order deleted")
    await user.should_see(f"“{XSS_TITLE}” (pending, version 1)")  # shown as text, never rendered
    await user.should_see("by Sam Rivera")
    await user.should_see("Sam Rivera: user → viewer")
    await user.should_see("AI assistance changed")
    await user.should_see("Sam Rivera: AI assistance turned off")

    user.find(marker="audit-action").click()
    user.find("Role changed").click()
    await user.should_see("1 entry")
    await user.should_not_see("Work order deleted")


async def test_people_and_tokens_read_in_words(user: User, make_user, log_in, db):
    admin, sam = await make_user("admin", name="Dana Admin"), await make_user("user", name="Sam Rivera")
    dana = actor(admin)
    hire = UserCreate(email="new.hire@example.com", name="New Hire", role="viewer", password=PASSWORD)
    made = await users_service.create_user(db=db, actor=dana, data=hire)
    renamed = UserAdminUpdate(email="nia@example.com", name="Nia Hire")
    await users_service.update_user(db=db, actor=dana, user_id=made.id, data=renamed)
    token = await auth_service.create_token(db=db, actor=actor(sam), name="<b>nightly</b>")
    ops = UserCreate(email="ops@example.com", name="Ops", role="admin", password=PASSWORD)
    await users_service.register(db=db, data=ops, via="desk create-admin")
    await log_in(user, admin)

    await user.open("/app/admin/audit")

    await user.should_see("4 entries")
    await user.should_see("Ops <ops@example.com>, admin, with desk create-admin")
    await user.should_see("by the desk")
    await user.should_see("Person added")
    # as added, name and email together (it read "Nia Hire <new.hire@example.com>": nobody was added so)
    await user.should_see("New Hire (now Nia Hire) <new.hire@example.com>, viewer")
    await user.should_see("Name or email changed")
    await user.should_see("Nia Hire: name New Hire → Nia Hire, email new.hire@example.com → nia@example.com")
    await user.should_see("API token created")
    await user.should_see(f"“<b>nightly</b>” ({token.prefix}…) of Sam Rivera")  # its name as typed, never rendered
    await user.should_see(f"of Sam Rivera: Read, Write; expires {when(token.expires_at)}")  # what it may do, how long


async def test_people_who_are_not_admins_are_refused(user: User, make_user, log_in):
    sam = await make_user("user")
    await log_in(user, sam)
    await user.open("/app/admin/audit")
    await user.should_see(marker="forbidden")
    await user.should_not_see("Audit")  # nor is it in their nav


async def test_the_address_keeps_the_filter_and_the_page(user: User, make_user, log_in, db):
    admin, sam = await make_user("admin", name="Dana Admin"), await make_user("user", name="Sam Rivera")
    for number in range(27):
        await auth_service.create_token(db=db, actor=actor(sam), name=f"script {number:02d}")
    await users_service.update_user(db=db, actor=actor(admin), user_id=sam["id"], data=UserAdminUpdate(role="viewer"))
    await log_in(user, admin)

    await user.open("/app/admin/audit?action=token_created&page=2")  # a link another admin sent

    await user.should_see("27 entries")
    assert user.find(marker="audit-action").elements.pop().value == "token_created"
    assert user.find(marker="audit-pages").elements.pop().value == 2
    assert len(user.find(marker="audit-entry").elements) == 2  # the oldest two of 27, newest first
    await user.should_see("“script 01”")
    await user.should_not_see("Role changed")

    await user.open("/app/admin/audit?action=nonsense&page=x")  # what is not understood is left out
    await user.should_see("28 entries")

    await user.open("/app/admin/audit?action=password_reset")  # a filter that finds nothing says so, not "nothing yet"
    await user.should_see("No “Password reset” entries.")
    await user.open("/app/admin/audit?action=token_created&page=9")  # past the end: the last page there is
    await user.should_see("27 entries")
    await until(lambda: user.find(marker="audit-pages").elements.pop().value == 2, what="the last page")
    assert len(user.find(marker="audit-entry").elements) == 2


async def test_an_admin_narrows_the_log_to_who_did_it_and_to_whom(user: User, make_user, log_in, db):
    dana, ola = await make_user("admin", name="Dana Admin"), await make_user("admin", name="Ola Admin")
    sam, lee = await make_user("user", name="Sam Rivera"), await make_user("user", name="Lee Chen")
    for person in (sam, lee):
        await users_service.update_user(
            db=db, actor=actor(dana), user_id=person["id"], data=UserAdminUpdate(role="viewer")
        )
    await users_service.update_user(db=db, actor=actor(ola), user_id=sam["id"], data=UserAdminUpdate(active=False))
    await log_in(user, dana)
    await user.open("/app/admin/audit")
    await user.should_see("3 entries")

    user.find(marker="audit-actor").elements.pop().set_value(dana["id"])
    await user.should_see("2 entries")
    user.find(marker="audit-subject").elements.pop().set_value(sam["id"])
    await user.should_see("1 entry")
    await user.should_see("Sam Rivera: user → viewer")
    await user.should_not_see("Lee Chen: user → viewer")

    await user.open(f"/app/admin/audit?actor={ola['id']}&subject={lee['id']}")  # the view's address, as a link
    await user.should_see("No entries by Ola Admin concerning Lee Chen.")
    assert user.find(marker="audit-actor").elements.pop().value == ola["id"]
    assert user.find(marker="audit-subject").elements.pop().value == lee["id"]


async def test_a_link_to_a_deleted_orders_entries_still_shows_them(user: User, make_user, make_order, log_in, db):
    admin, sam = await make_user("admin", name="Dana Admin"), await make_user("user", name="Sam Rivera")
    order = await make_order(sam, "Leaking tap")
    await service.delete(db=db, actor=actor(sam), order_id=order.id, version=1)
    await users_service.update_user(db=db, actor=actor(admin), user_id=sam["id"], data=UserAdminUpdate(role="viewer"))
    await log_in(user, admin)

    await user.open(f"/app/admin/audit?subject={order.id}")  # an order's id: nobody's name, still a filter

    await user.should_see("1 entry")
    await user.should_see("“Leaking tap” (pending, version 1)")
    await user.should_not_see("Role changed")
    (done_to,) = user.find(marker="audit-subject").elements
    assert (done_to.value, done_to.options[order.id]) == (order.id, f"{order.id} (not on the desk now)")


async def test_a_link_to_an_orders_entries_names_the_order(user: User, make_user, make_order, log_in, db):
    # found by a UI QA pass: an order still on the desk was called "(not on the desk now)"
    admin, sam = await make_user("admin", name="Dana Admin"), await make_user("user", name="Sam Rivera")
    order = await make_order(sam, "Leaking tap")
    await log_in(user, admin)

    await user.open(f"/app/admin/audit?subject={order.id}")

    await user.should_see("No entries concerning Work order “Leaking tap”.")
    (done_to,), (done_by,) = user.find(marker="audit-subject").elements, user.find(marker="audit-actor").elements
    assert (done_to.value, done_to.options[order.id]) == (order.id, "Work order “Leaking tap”")
    assert order.id not in done_by.options  # an order does nothing


async def test_new_entries_show_up_while_the_log_is_open(user: User, make_user, log_in, db, monkeypatch):
    monkeypatch.setattr(admin_audit, "FOLLOW_SECONDS", 0.2)
    admin, other = await make_user("admin", name="Dana Admin"), await make_user("admin", name="Ola Admin")
    sam = await make_user("user", name="Sam Rivera")
    await log_in(user, admin)
    await user.open("/app/admin/audit")
    await user.should_see("Nothing logged yet.")

    # another admin, in another browser (or another web process): the same database
    await users_service.update_user(db=db, actor=actor(other), user_id=sam["id"], data=UserAdminUpdate(role="viewer"))

    await user.should_see("1 entry")
    await user.should_see("Sam Rivera: user → viewer")
