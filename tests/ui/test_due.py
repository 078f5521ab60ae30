"""Due dates on screen: the day picked in the forms, the overdue and due-today badges, the overdue view's address."""

from datetime import UTC, datetime, timedelta

from bson import ObjectId
from nicegui.testing import User

from desk import state
from desk.agent.core import budget
from tests.clock import ManualClock
from tests.helpers import until
from tests.ui.conftest import WAIT, open_order


def titles(user: User) -> list[str]:
    return [link.text for link in user.find(marker="order-title").elements]


async def test_the_overdue_view_lives_in_the_address_and_rows_say_overdue_or_due_today_in_words(
    user: User, make_user, make_order, log_in, clock
):
    sam = await make_user("user")
    now = clock.now()
    await make_order(sam, "Late boiler", dueAt=now - timedelta(minutes=5))
    await make_order(sam, "Later today", dueAt=now + timedelta(seconds=1))  # UTC desk: today for a second more
    await make_order(sam, "Not due")
    await log_in(user, sam)

    await user.should_see("1–3 of 3", retries=WAIT)
    overdue = [label.text for label in user.find(marker="order-overdue").elements if label.visible]
    today = [label.text for label in user.find(marker="order-due-today").elements if label.visible]
    assert (overdue, today) == (["Overdue"], ["Due today"])

    (due,) = user.find(marker="due-filter").elements
    due.set_value("overdue")  # changed on the page: the address follows
    await user.should_see("1–1 of 1")
    assert titles(user) == ["Late boiler"]
    user.find("Late boiler").click()
    await user.should_see(marker="back-to-list")
    (back,) = user.find(marker="back-to-list").elements
    await until(lambda: back.props["href"] == "/app?due=overdue", what="the way back to the overdue view")

    await user.open("/app?due=overdue&sort=dueAt")  # a bookmark, or a reload
    await user.should_see("1–1 of 1")
    assert titles(user) == ["Late boiler"]
    assert user.find(marker="due-filter").elements.pop().value == "overdue"
    assert user.find(marker="sort").elements.pop().value == "dueAt"


async def test_a_day_picked_in_the_dialog_and_the_form_is_due_by_its_end_in_the_desks_zone(
    user: User, make_user, log_in, db
):
    await budget.set_desk_zone(db, "Europe/Berlin")  # UTC+1 in December
    state.current().clock = ManualClock(datetime(2026, 12, 9, 8, 0, tzinfo=UTC))
    sam = await make_user("user")
    await log_in(user, sam)
    await user.should_see("No work orders yet.")

    user.find(marker="new-order").click()
    user.find(marker="new-title").type("Replace boiler valve")
    user.find(marker="new-due").type("2026-12-10")
    user.find(marker="create").click()
    await user.should_see("Created “Replace boiler valve”", retries=WAIT)
    stored = await db["work_orders"].find_one({})
    assert stored["dueAt"] == datetime(2026, 12, 10, 22, 59, 59, 999000, tzinfo=UTC)  # 23:59:59.999 in Berlin

    await open_order(user, str(stored["_id"]))
    (field,) = user.find(marker="edit-due_at").elements
    assert field.value == "2026-12-10"
    field.set_value("2026-12-12")
    user.find(marker="save").click()
    await user.should_see("Saved.", retries=WAIT)
    await user.should_see("Due by: 10 Dec 2026, 22:59 UTC → 12 Dec 2026, 22:59 UTC")

    user.find(marker="edit-due_at").elements.pop().set_value("")  # cleared: due by no day
    user.find(marker="save").click()
    await user.should_see("Due by: 12 Dec 2026, 22:59 UTC → no day", retries=WAIT)
    stored = await db["work_orders"].find_one({"_id": ObjectId(stored["_id"])})
    assert (stored["dueAt"], stored["version"]) == (None, 3)


async def test_a_viewer_reads_when_an_order_is_due_and_that_it_is_overdue(
    user: User, make_user, make_order, change_user, log_in, clock
):
    sam, vic = await make_user("user"), await make_user("user")
    order = await make_order(sam, "Late boiler", dueAt=datetime(2026, 1, 5, 16, 0, tzinfo=UTC))
    vic = await change_user(vic, role="viewer")
    await log_in(user, vic)

    await open_order(user, order.id)

    await user.should_see("Due by 05 Jan 2026, 16:00 UTC · Overdue")
    await user.should_not_see(marker="edit-due_at")


def badges(user: User) -> dict[str, str]:
    """Each listed order's title, and the due badge its row shows ("" for none)."""
    found = {}
    for row in user.find(marker="order-row").elements:
        inside = list(row.descendants())
        (title,) = [element.text for element in inside if "order-title" in element._markers]
        due = {"order-overdue", "order-due-today"}
        found[title] = " ".join(e.text for e in inside if due & set(e._markers) and e.visible)
    return found


async def test_shown_orders_turn_due_today_and_overdue_on_screen_as_their_moments_pass(
    user: User, make_user, make_order, log_in
):
    clock = state.current().clock = ManualClock(datetime(2026, 12, 9, 23, 59, 59, tzinfo=UTC))  # a UTC desk
    sam = await make_user("user")
    await make_order(sam, "Noon tomorrow", dueAt=datetime(2026, 12, 10, 12, 0, tzinfo=UTC))
    await make_order(sam, "Half a second", dueAt=datetime(2026, 12, 9, 23, 59, 59, 500000, tzinfo=UTC))
    await log_in(user, sam)
    await user.should_see("1–2 of 2", retries=WAIT)
    assert badges(user) == {"Half a second": "Due today", "Noon tomorrow": ""}

    clock.move(timedelta(seconds=1))  # midnight: nothing reads the list again, and no order changes

    now_shown = {"Half a second": "Overdue", "Noon tomorrow": "Due today"}
    await until(lambda: badges(user) == now_shown, what="the badges as of midnight", within=10)
