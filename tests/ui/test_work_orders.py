"""The work-order list: search, filters, counts, the new-order dialog, roles, and live changes."""

from nicegui import ui
from nicegui.testing import User

from desk.work_orders import service
from desk.work_orders.models import WorkOrderUpdate
from tests.helpers import actor, until
from tests.ui.conftest import WAIT

XSS_TITLE = "<img src=x onerror=alert(1)>"
MARKDOWN_TITLE = "**bold**<script>alert(2)</script>"


def titles(user: User) -> list[str]:
    return sorted(link.text for link in user.find(marker="order-title").elements)


async def test_a_person_sees_their_orders_with_chips_and_a_count(user: User, make_user, make_order, log_in):
    sam, priya = await make_user("user"), await make_user("user")
    await make_order(sam, "Leaking tap", priority="urgent")
    await make_order(sam, "Flickering lights")
    await make_order(priya, "Not yours")

    await log_in(user, sam)

    await user.should_see("Leaking tap")
    await user.should_see("Urgent")
    await user.should_see("1–2 of 2", retries=WAIT)
    await user.should_not_see("Not yours")
    assert titles(user) == ["Flickering lights", "Leaking tap"]


async def test_search_and_filters_narrow_the_list(user: User, make_user, make_order, log_in):
    sam = await make_user("user")
    await make_order(sam, "Leaking tap in the kitchen", priority="high")
    await make_order(sam, "Kitchen light out", priority="low")
    await make_order(sam, "Projector broken", priority="high")
    await log_in(user, sam)
    await user.should_see("1–3 of 3")

    user.find(marker="search").type("kitchen")
    await user.should_see("1–2 of 2", retries=WAIT)
    assert titles(user) == ["Kitchen light out", "Leaking tap in the kitchen"]

    user.find(marker="priority-filter").click()
    user.find("High").click()
    await user.should_see("1–1 of 1", retries=WAIT)
    assert titles(user) == ["Leaking tap in the kitchen"]

    user.find(marker="search").clear().type("nothingatall")
    await user.should_see("Nothing matches these filters.", retries=WAIT)
    await user.should_not_see(marker="time-column")  # times of nothing
    user.find(marker="sort").elements.pop().set_value("title")
    await user.should_see(marker="clear-filters", retries=WAIT)
    clear = user.find(marker="clear-filters").elements.pop()
    await until(lambda: clear.props["href"] == "/app?sort=title", what="a way back that keeps the sort")
    user.find(marker="clear-filters").click()
    await user.should_see("1–3 of 3", retries=WAIT)


async def test_new_work_order_dialog_validates_beside_the_fields_then_creates(user: User, make_user, log_in, db):
    sam = await make_user("user")
    await log_in(user, sam)
    await user.should_see("No work orders yet.")

    user.find(marker="new-order").click()
    user.find(marker="create").click()
    await user.should_see("Required.", retries=WAIT)
    assert await db["work_orders"].count_documents({}) == 0

    user.find(marker="new-description").type("Main door of room 214 won't latch.")
    user.find(marker="new-title").type("Broken door handle").trigger("keydown.enter")  # Enter creates

    await user.should_see("Created “Broken door handle”", retries=WAIT)
    await user.should_see("1–1 of 1", retries=WAIT)
    assert (await db["work_orders"].find_one({}))["description"] == "Main door of room 214 won't latch."


async def test_a_new_order_dialog_closed_by_escape_keeps_what_was_typed_until_cancel(user: User, make_user, log_in):
    # found by a UI QA pass: Esc or a click beside the dialog dropped a typed description without a word
    await log_in(user, await make_user("user"))
    user.find(marker="new-order").click()
    user.find(marker="new-title").type("Broken door handle")
    user.find(marker="new-description").type("Room 214.")

    (card,) = user.find(marker="new-dialog").elements
    (dialog,) = [e for e in card.ancestors() if isinstance(e, ui.dialog)]
    dialog.set_value(False)  # what Esc or a click on the backdrop does in the browser
    user.find(marker="new-order").click()

    assert dialog.value is True
    assert [e.value for e in user.find(marker="new-title").elements] == ["Broken door handle"]
    assert [e.value for e in user.find(marker="new-description").elements] == ["Room 214."]
    user.find(marker="cancel-new").click()  # Cancel drops it
    user.find(marker="new-order").click()
    assert [e.value for e in user.find(marker="new-title").elements] == [""]


async def test_viewers_get_no_buttons_they_cannot_use(user: User, make_user, make_order, change_user, log_in):
    viewer, admin = await make_user("user"), await make_user("admin")
    order = await make_order(admin, "Watched order", ownerId=viewer["id"])
    viewer = await change_user(viewer, role="viewer")  # made a viewer after the order was theirs
    await log_in(user, viewer)

    await user.should_see("Watched order")
    await user.should_not_see(marker="new-order")
    await user.open(f"/app/work-orders/{order.id}")
    await user.should_see(marker="detail-title", retries=WAIT)
    await user.should_not_see(marker="save")
    await user.should_not_see(marker="delete")


async def test_admins_see_everyone_and_filter_by_owner(user: User, make_user, make_order, log_in):
    admin = await make_user("admin")
    sam, priya = await make_user("user", name="Sam Rivera"), await make_user("user", name="Priya Shah")
    await make_order(sam, "Sam's order")
    await make_order(priya, "Priya's order")
    await log_in(user, admin)
    await user.should_see("1–2 of 2", retries=WAIT)
    await user.should_see("Priya Shah")

    user.find(marker="owner-filter").click()
    user.find("Sam Rivera").click()

    await user.should_see("1–1 of 1", retries=WAIT)
    assert titles(user) == ["Sam's order"]


async def test_the_owner_filter_offers_only_people_who_can_own_orders(
    user: User, make_user, make_order, change_user, log_in
):
    # found by an admin: viewers and deactivated people, who own nothing new, crowded the Owner filter
    viewer = await make_user("viewer", name="Val Viewer")
    await make_user("user", name="Sam Rivera")
    lee = await make_user("user", name="Lee Chen")
    await make_order(lee, "Lee's order")
    await change_user(lee, active=False)  # keeps the order: a link naming him still filters by him
    await log_in(user, viewer)
    await user.should_see("1–1 of 1", retries=WAIT)

    (owner,) = user.find(marker="owner-filter").elements
    offered = set(owner.options.values())
    assert {"Unassigned (queue)", "Sam Rivera"} <= offered
    assert not offered & {"Val Viewer", "Lee Chen", "Lee Chen (deactivated)"}
    await user.should_see("Lee Chen (deactivated)")  # his order's owner, named as ever

    await user.open(f"/app?owner={lee['id']}")
    await user.should_see("1–1 of 1", retries=WAIT)
    (owner,) = user.find(marker="owner-filter").elements
    assert (owner.value, owner.options[lee["id"]]) == (lee["id"], "Lee Chen (deactivated)")


async def test_an_admin_can_give_a_new_order_only_to_someone_who_can_work_on_it(
    user: User, make_user, make_order, change_user, log_in
):
    admin = await make_user("admin", name="Dana Admin")
    await make_user("user", name="Sam Rivera")
    await make_user("viewer", name="Vic Viewer")
    gone = await make_user("user", name="Lee Left")
    await make_order(admin, "Lee's last order", ownerId=gone["id"])
    await change_user(gone, active=False)
    await log_in(user, admin)
    await user.should_see("Lee Left", retries=WAIT)  # still an owner in the list and its filter

    user.find(marker="new-order").click()

    (select,) = user.find(marker="new-owner").elements
    offered = set(select.options.values())
    assert {"Dana Admin", "Sam Rivera"} <= offered and not {"Vic Viewer", "Lee Left"} & offered


async def test_pages_of_twenty_five(user: User, make_user, make_order, log_in):
    sam = await make_user("user")
    for number in range(27):
        await make_order(sam, f"Order {number:02d}")
    await log_in(user, sam)
    await user.should_see("1–25 of 27")

    user.find(marker="pages").elements.pop().set_value(2)

    await user.should_see("26–27 of 27", retries=WAIT)
    assert titles(user) == ["Order 00", "Order 01"]


async def test_a_page_emptied_by_deletions_elsewhere_turns_to_the_last_page(
    user: User, make_user, make_order, log_in, db
):
    admin, sam = await make_user("admin"), await make_user("user")
    orders = [await make_order(sam, f"Order {number:02d}") for number in range(27)]
    await log_in(user, sam)
    await user.open("/app?page=2")
    await user.should_see("26–27 of 27", retries=WAIT)

    for order in orders[:2]:  # someone else clears two: 25 are left, one page of them
        await service.delete(db=db, actor=actor(admin), order_id=order.id, version=1)

    await user.should_see("1–25 of 25", retries=WAIT)
    assert len(titles(user)) == 25  # the first page, all of it (the pager is gone: one page is all there is)


async def test_a_change_by_someone_else_appears_without_reload(user: User, make_user, make_order, log_in, db):
    admin, sam = await make_user("admin"), await make_user("user")
    order = await make_order(sam, "Heating not working")
    await log_in(user, sam)
    await user.should_see("Heating not working")

    # the admin saves from another screen (their page's own journey is tests/e2e/test_journeys.py)
    renamed = WorkOrderUpdate(version=order.version, title="Heating fixed?")
    await service.update(db=db, actor=actor(admin), order_id=order.id, data=renamed)

    await user.should_see("Heating fixed?", retries=WAIT)
    await make_order(sam, "Created by a script")  # another process or the API: same feed
    await user.should_see("Created by a script", retries=WAIT)
    await service.delete(db=db, actor=actor(admin), order_id=order.id, version=2)
    await user.should_not_see("Heating fixed?", retries=WAIT)


async def test_a_live_change_updates_the_row_in_place(user: User, make_user, make_order, log_in, db):
    admin, sam = await make_user("admin"), await make_user("user")
    order = await make_order(sam, "Boiler pressure low", priority="low")
    await make_order(sam, "Window stuck")
    await log_in(user, sam)
    await user.should_see("Boiler pressure low")
    link = next(e for e in user.find(marker="order-title").elements if e.text == "Boiler pressure low")
    row = link.parent_slot.parent

    change = WorkOrderUpdate(version=1, title="Boiler repressurised", priority="urgent", status="in_progress")
    await service.update(db=db, actor=actor(admin), order_id=order.id, data=change)

    await user.should_see("Boiler repressurised", retries=WAIT)
    await user.should_see("Urgent")
    await user.should_see("In progress")
    await user.should_not_see("Boiler pressure low")
    # the same row and link, changed where it stands: nothing under the reader's pointer is rebuilt
    assert link.text == "Boiler repressurised" and link.parent_slot.parent is row
    assert row in user.find(marker="order-row").elements
    assert titles(user) == ["Boiler repressurised", "Window stuck"]


async def test_screens_redrawn_by_one_change_each_keep_their_own_orders(
    user: User, create_user, make_user, make_order, log_in, db
):
    admin, sam, priya = await make_user("admin"), await make_user("user"), await make_user("user")
    sams = await make_order(sam, "Sam's radiator")
    priyas = await make_order(priya, "Priya's radiator")
    await log_in(user, sam)
    await user.should_see("1–1 of 1")
    other = create_user()
    await log_in(other, priya)
    await other.should_see("1–1 of 1")

    # two writes in the same half-second land in one batch of the feed: both screens redraw for it
    await service.update(
        db=db, actor=actor(admin), order_id=sams.id, data=WorkOrderUpdate(version=1, title="Sam's fixed")
    )
    await service.update(
        db=db, actor=actor(admin), order_id=priyas.id, data=WorkOrderUpdate(version=1, title="Priya's fixed")
    )

    await user.should_see("Sam's fixed", retries=WAIT)
    await other.should_see("Priya's fixed", retries=WAIT)
    assert titles(user) == ["Sam's fixed"]
    assert titles(other) == ["Priya's fixed"]


async def test_payload_titles_render_as_text(user: User, make_user, make_order, log_in, db):
    sam = await make_user("user", name="<b>Sam</b>")
    await make_order(sam, XSS_TITLE)
    order = await make_order(sam, MARKDOWN_TITLE)
    await log_in(user, sam)

    await user.should_see(XSS_TITLE)
    await user.should_see(MARKDOWN_TITLE)
    await user.should_see("<b>Sam</b>")
    for element in user.find(marker="order-title").elements:
        assert isinstance(element, ui.link) and element.text in (XSS_TITLE, MARKDOWN_TITLE)
    await user.open(f"/app/work-orders/{order.id}")
    await user.should_see(MARKDOWN_TITLE)
    await service.update(db=db, actor=actor(sam), order_id=order.id, data=WorkOrderUpdate(version=1, title=XSS_TITLE))
    await user.should_see(f"Title: “{MARKDOWN_TITLE}” → “{XSS_TITLE}”", retries=WAIT)
