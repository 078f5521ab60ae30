"""The bell in the header and /app/notifications, as a person uses them."""

from nicegui.testing import User

from desk.notifications import service
from desk.notifications.models import NotificationQuery
from desk.work_orders import service as orders
from desk.work_orders.models import CommentCreate
from tests.helpers import actor, until
from tests.ui.conftest import WAIT

PAGE = "/app/notifications"


def badge(user: User) -> str:
    """What the bell says: its count, as a screen reader hears it ("" when none is unread)."""
    (bell,) = user.find(marker="bell").elements
    return bell.props["aria-label"].removeprefix("Notifications").removeprefix(", ").removesuffix(" unread")


async def test_the_bell_counts_what_happens_while_the_page_is_open(user: User, make_user, make_order, log_in, db):
    admin, lee = await make_user("admin", name="Ada"), await make_user(name="Lee")
    await log_in(user, lee)
    await user.should_see(marker="bell", retries=WAIT)
    assert badge(user) == ""

    order = await make_order(admin, "Leaking <b>tap</b>", owner_id=lee["id"])  # elsewhere: the feed brings it
    await until(lambda: badge(user) == "1", what="the bell to count the new order")
    await orders.add_comment(db=db, actor=actor(admin), order_id=order.id, data=CommentCreate(text="Parts ordered"))
    await until(lambda: badge(user) == "2", what="the bell to count the comment")


async def test_the_page_lists_newest_first_and_marks_read(user: User, make_user, make_order, log_in, db):
    admin, lee = await make_user("admin", name="Ada"), await make_user(name="Lee")
    order = await make_order(admin, "Leaking <b>tap</b>", owner_id=lee["id"])
    await orders.add_comment(db=db, actor=actor(admin), order_id=order.id, data=CommentCreate(text="Parts ordered"))
    await log_in(user, lee, landing=PAGE)

    await user.should_see("Ada commented on “Leaking <b>tap</b>”: Parts ordered", retries=WAIT)  # as text, not markup
    (shown,) = user.find(marker="notifications").elements
    links = [link.text for link in shown.descendants() if "notification-link" in link._markers]
    assert links == ["Ada commented on “Leaking <b>tap</b>”: Parts ordered", "Ada gave you “Leaking <b>tap</b>”."]
    assert all(
        link.props["href"] == f"/app/work-orders/{order.id}" for link in user.find(marker="notification-link").elements
    )
    await until(lambda: badge(user) == "2", what="the bell")

    page = await service.page(db=db, actor=actor(lee), query=NotificationQuery())
    user.find(marker=f"read-{page.items[-1].id}").click()  # the older one
    await until(lambda: badge(user) == "1", what="the bell to drop one")
    assert len(user.find(marker="mark-read").elements) == 1

    user.find(marker="mark-all-read").click()
    await until(lambda: badge(user) == "", what="the bell to empty")
    assert await service.unread(db=db, actor=actor(lee)) == 0


async def test_a_person_switches_a_kind_off_on_their_profile(user: User, make_user, log_in, db):
    lee = await make_user(name="Lee")
    await log_in(user, lee, landing="/app/profile")
    await user.should_see(marker="own-notify", retries=WAIT)
    await user.should_not_see(marker="own-notify-inApp-flagged")  # flags are for admins
    await user.should_see(marker="own-notify-no-mail")

    user.find(marker="own-notify-email-commented").click()
    await user.should_see("Saved.", retries=WAIT)
    mine = await service.get_preferences(db=db, actor=actor(lee))
    assert mine.email.commented is False and mine.in_app.commented is True


async def test_an_admin_sets_the_desks_defaults(user: User, make_user, log_in, db):
    admin, lee = await make_user("admin"), await make_user()
    await log_in(user, admin, landing="/app/admin/settings")
    await user.should_see("Notification defaults", retries=WAIT)

    user.find(marker="desk-notify-inApp-flagged").click()  # admins hear of flags unless they say otherwise
    await user.should_see("Saved.", retries=WAIT)
    assert (await service.get_preferences(db=db, actor=actor(lee))).in_app.flagged is True
