"""The audit log page: admins read what happened, in words; others are refused."""

from nicegui.testing import User

from desk.users import service as users_service
from desk.users.models import UserAdminUpdate
from desk.work_orders import service
from tests.helpers import actor

XSS_TITLE = "<img src=x onerror=alert(1)>"


async def test_an_admin_reads_deletions_and_changes_in_words(user: User, make_user, make_order, log_in, db):
    admin, sam = await make_user("admin", name="Dana Admin"), await make_user("user", name="Sam Rivera")
    order = await make_order(sam, XSS_TITLE)
    await service.delete(db=db, actor=actor(sam), order_id=order.id, version=1)
    await users_service.update_user(db=db, actor=actor(admin), user_id=sam["id"], data=UserAdminUpdate(role="viewer"))
    await log_in(user, admin)

    await user.open("/app/admin/audit")

    await user.should_see("2 entries")
    await user.should_see("Work order deleted")
    await user.should_see(f"“{XSS_TITLE}” (pending, version 1)")  # shown as text, never rendered
    await user.should_see("by Sam Rivera")
    await user.should_see("Sam Rivera: user → viewer")

    user.find(marker="audit-action").click()
    user.find("Role changed").click()
    await user.should_see("1 entry")
    await user.should_not_see("Work order deleted")


async def test_people_who_are_not_admins_are_refused(user: User, make_user, log_in):
    sam = await make_user("user")
    await log_in(user, sam)
    await user.open("/app/admin/audit")
    await user.should_see(marker="forbidden")
    await user.should_not_see("Audit")  # nor is it in their nav
