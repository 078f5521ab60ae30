"""Views that stay put: the list's address holds its search, filters, sort and page."""

from urllib.parse import quote

from bson import ObjectId
from nicegui.testing import User

from desk.auth import service as auth_service
from desk.work_orders import service
from desk.work_orders.models import WorkOrderUpdate
from tests.helpers import PASSWORD, actor, until
from tests.ui.conftest import WAIT, submit


async def kitchen_jobs(make_order, person: dict, count: int) -> None:
    """`count` orders with "kitchen" in their titles, and one without."""
    for number in range(count):
        await make_order(person, f"Kitchen job {number:02d}")
    await make_order(person, "Roof")


def titles(user: User) -> list[str]:
    return [link.text for link in user.find(marker="order-title").elements]


async def test_an_address_opens_its_view_filtered_sorted_and_on_its_page(user: User, make_user, make_order, log_in):
    sam = await make_user("user")
    await kitchen_jobs(make_order, sam, 27)
    await log_in(user, sam)

    await user.open("/app?q=kit&sort=title&page=2")

    await user.should_see("26–27 of 27")
    assert sorted(titles(user)) == ["Kitchen job 25", "Kitchen job 26"]
    assert user.find(marker="search").elements.pop().value == "kit"
    assert user.find(marker="sort").elements.pop().value == "title"
    assert user.find(marker="pages").elements.pop().value == 2


async def test_an_address_past_the_last_page_of_a_filter_shows_its_last_page(user: User, make_user, make_order, log_in):
    # found by a UI QA pass: it said "Nothing matches these filters." about a filter that matches orders
    sam = await make_user("user")
    await kitchen_jobs(make_order, sam, 3)
    await log_in(user, sam)

    await user.open("/app?q=kit&page=2")

    await user.should_see("1–3 of 3", retries=WAIT)
    assert sorted(titles(user)) == ["Kitchen job 00", "Kitchen job 01", "Kitchen job 02"]
    await user.should_not_see("Nothing matches these filters.")


async def test_open_covers_pending_and_in_progress_and_statuses_combine(user: User, make_user, make_order, log_in, db):
    sam = await make_user("user")
    started, finished = await make_order(sam, "Started"), await make_order(sam, "Finished")
    await make_order(sam, "Waiting")
    me = actor(sam)
    await service.update(db=db, actor=me, order_id=started.id, data=WorkOrderUpdate(version=1, status="in_progress"))
    await service.update(db=db, actor=me, order_id=finished.id, data=WorkOrderUpdate(version=1, status="done"))
    await log_in(user, sam)
    await user.open("/app?status=open")
    await user.should_see("1–2 of 2")
    assert sorted(titles(user)) == ["Started", "Waiting"]

    (status,) = user.find(marker="status-filter").elements
    status.set_value(["open", "done"])
    await user.should_see("1–3 of 3")

    await user.open("/app?status=done&status=nonsense&page=x")  # what is not understood is left out, and said
    await user.should_see("1–1 of 1")
    await user.should_see("Part of this link's view is left out, as it is not one you can use here: Status.")
    await user.open("/app?status=done&page=²")  # a digit to Python's isdigit(), not a page number
    await user.should_see("1–1 of 1")
    assert titles(user) == ["Finished"]
    await user.should_not_see(marker="left-out")  # the page is not a filter: an old page number goes unsaid


async def test_a_colleagues_link_naming_a_person_one_cannot_filter_by_says_it_is_left_out(
    user: User, make_user, make_order, log_in
):
    # Bob shares his view of Ada's orders; Sam, a user, may only filter by himself or the queue: the list
    # showed Sam's own orders under Bob's link as if they were the view Bob meant.
    sam, ada = await make_user("user"), await make_user("user")
    await make_order(sam, "Sam's tap")
    await log_in(user, sam)

    await user.open(f"/app?owner={ada['id']}&priority=high&sort=title&opened=2026-11-30")

    await user.should_see("Part of this link's view is left out, as it is not one you can use here: Owner.")
    (priority,) = user.find(marker="priority-filter").elements
    priority.set_value("low")  # the view is Sam's own from here: the note about the link goes
    await user.should_not_see(marker="left-out")
    await user.open("/app?owner=none&priority=high&sort=title&opened=2026-11-30&q=tap")  # all of it usable
    await user.should_see(marker="opened-filter")
    await user.should_not_see(marker="left-out")


async def test_the_time_column_says_what_it_shows_and_follows_the_sort(user: User, make_user, make_order, log_in):
    sam = await make_user("user")
    await make_order(sam, "Leaking tap")
    await log_in(user, sam)
    await user.should_see("Times: when created")

    user.find(marker="sort").elements.pop().set_value("-updatedAt")
    await user.should_see("Times: when last updated")


async def test_an_orders_tab_carries_its_title_and_the_nav_shows_where_you_are(
    user: User, make_user, make_order, log_in, db
):
    sam = await make_user("user")
    order = await make_order(sam, "Leaking tap")
    await log_in(user, sam)
    await user.open(f"/app/work-orders/{order.id}")
    await user.should_see(marker="detail-title")
    assert user.client.title == "Leaking tap · Work Order Desk"
    (current,) = user.find(marker="nav-current").elements
    assert current.text == "Work orders" and current.props["aria-current"] == "page"

    await service.update(db=db, actor=actor(sam), order_id=order.id, data=WorkOrderUpdate(version=1, title="Fixed tap"))
    await user.should_see("Fixed tap")
    assert user.client.title == "Fixed tap · Work Order Desk"

    await user.open("/app/profile")  # not a nav screen: nothing in the nav claims to be here
    await user.should_see(marker="current-user")
    await user.should_not_see(marker="nav-current")


async def test_all_work_orders_goes_back_to_the_view_this_tab_showed(user: User, make_user, make_order, log_in):
    sam = await make_user("user")
    await make_order(sam, "Kitchen tap")
    await make_order(sam, "Roof")
    await log_in(user, sam)
    await user.open("/app?q=kit")
    (sort,) = user.find(marker="sort").elements
    sort.set_value("title")  # changed on the page: the address follows
    await user.should_see("1–1 of 1")

    user.find("Kitchen tap").click()
    await user.should_see(marker="back-to-list")
    (back,) = user.find(marker="back-to-list").elements
    await until(lambda: back.props["href"] == "/app?q=kit&sort=title", what="the way back to the view")
    user.find(marker="back-to-list").click()

    await user.should_see("1–1 of 1")
    assert titles(user) == ["Kitchen tap"]


async def test_a_session_that_ends_brings_the_person_back_to_the_view_they_had(
    user: User, make_user, make_order, log_in, db
):
    sam = await make_user("user")
    await kitchen_jobs(make_order, sam, 3)
    # straight to the view: a list page opened before it would close too, and the test would follow either
    await log_in(user, sam, landing=f"/login?redirect_to={quote('/app?q=kit', safe='')}")
    await user.should_see("1–3 of 3", retries=WAIT)
    user.find(marker="sort").elements.pop().set_value("title")  # changed on the page: the address follows
    await user.should_see("Times: when last updated", retries=WAIT)  # the list redrawn in that sort

    await auth_service.end_sessions(db=db, user_id=ObjectId(sam["id"]))  # an admin reset it, or it timed out
    await user.should_see(marker="login-reason", retries=WAIT)
    submit(user, sam["email"], PASSWORD)

    await user.should_see("1–3 of 3", retries=WAIT)
    assert user.find(marker="search").elements.pop().value == "kit"
    assert user.find(marker="sort").elements.pop().value == "title"
