"""Metrics that lead somewhere: filtered by owner and days; a bar or a day's point opens the list of those orders."""

from bson import ObjectId
from nicegui import ui
from nicegui.testing import User

from desk.auth import service as auth_service
from desk.work_orders import service
from desk.work_orders.models import WorkOrderUpdate
from tests.helpers import PASSWORD, actor, until
from tests.ui.conftest import WAIT, submit

PAGE = "/app/admin/metrics"


def chart(user: User, marker: str) -> ui.echart:
    (found,) = user.find(kind=ui.echart, marker=marker).elements
    return found


def click(found: ui.echart, *, series: str, index: int) -> None:
    """A click on one bar or point, as ECharts reports it."""
    (listener,) = [entry for entry in found._event_listeners.values() if entry.type == "componentClick"]
    args = {"componentType": "series", "seriesType": "bar", "seriesIndex": 0, "seriesName": series}
    args |= {"name": "", "dataIndex": index, "data": 0, "dataType": None, "value": 0}
    found._handle_event({"listener_id": listener.id, "args": args})


def titles(user: User) -> list[str]:
    return sorted(link.text for link in user.find(marker="order-title").elements)


async def test_an_owners_figures_and_a_bar_that_opens_their_orders(user: User, make_user, make_order, log_in, db):
    ada = await make_user("admin", name="Ada Lovelace")
    sam = await make_user("user", name="Sam Rivera")
    first = await make_order(sam, "Leaking tap")
    await make_order(sam, "Broken window")
    await make_order(ada, "Replace bulb")
    await service.update(db=db, actor=actor(sam), order_id=first.id, data=WorkOrderUpdate(version=1, status="done"))
    await log_in(user, ada)
    await user.open(PAGE)
    await user.should_see(marker="total")
    assert user.find(marker="total").elements.pop().text == "3"

    user.find(marker="owner").elements.pop().set_value(sam["id"])
    await until(lambda: user.find(marker="total").elements.pop().text == "2", what="Sam's total")

    click(chart(user, "status-chart"), series="Work orders", index=2)  # pending, in progress, done, cancelled

    await user.should_see(marker="order-list")
    await user.should_see("1–1 of 1")
    assert titles(user) == ["Leaking tap"]


async def test_a_days_point_opens_the_orders_opened_that_day(user: User, make_user, make_order, log_in):
    ada = await make_user("admin")
    await make_order(ada, "Made today")
    await log_in(user, ada)
    await user.open(PAGE)
    await user.should_see(marker="per-day-chart")

    click(chart(user, "per-day-chart"), series="Opened", index=29)  # today: the last of 30 days

    await user.should_see(marker="opened-filter")
    await user.should_see("1–1 of 1")
    assert titles(user) == ["Made today"]


async def test_a_backwards_range_is_explained(user: User, make_user, log_in):
    await log_in(user, await make_user("admin"))
    await user.open(PAGE)
    await user.should_see(marker="since")
    user.find(marker="since").elements.pop().set_value("2026-03-02")
    user.find(marker="until").elements.pop().set_value("2026-03-01")
    await user.should_see("Pick a start day on or before the end day.")

    await user.open(f"{PAGE}?since=2026-11-20&until=2026-11-10")  # a bookmark's: an empty chart said nothing
    await user.should_see("Pick a start day on or before the end day.")


async def test_the_address_keeps_the_owner_and_the_days(user: User, make_user, make_order, log_in):
    ada = await make_user("admin", name="Ada Lovelace")
    sam = await make_user("user", name="Sam Rivera")
    await make_order(sam, "Leaking tap")
    await make_order(ada, "Replace bulb")
    await log_in(user, ada)

    await user.open(f"{PAGE}?owner={sam['id']}&since=2026-11-01&until=2026-11-30")  # a link another admin sent
    await user.should_see(marker="total")
    assert user.find(marker="total").elements.pop().text == "1"
    assert user.find(marker="owner").elements.pop().value == sam["id"]
    assert [user.find(marker=key).elements.pop().value for key in ("since", "until")] == ["2026-11-01", "2026-11-30"]
    days = chart(user, "per-day-chart").options["xAxis"]["data"]
    assert (days[0], days[-1], len(days)) == ("01 Nov", "30 Nov", 30)
    # Sam's order was made today, after that range, and the count is still his one: the page says why
    await user.should_see("From and To choose the days of the per-day chart; the counts and the other charts")

    await user.open(f"{PAGE}?owner=nobody&since=someday&until=20261130")  # what is not understood is left out
    await user.should_see(marker="total")
    assert user.find(marker="total").elements.pop().text == "2"
    assert user.find(marker="until").elements.pop().value == ""  # a day as the API reads one: YYYY-MM-DD
    await user.should_see("Part of this link's view is left out, as it is not one you can use here: Owner, From, To.")
    user.find(marker="since").elements.pop().set_value("2026-11-01")  # picked here: the note was about the link
    await user.should_not_see(marker="left-out")

    await user.open(f"{PAGE}?owner={sam['id']}&until=2026-11-30")
    await user.should_see(marker="total")
    await user.should_not_see(marker="left-out")  # everything in it was taken


async def test_a_new_login_comes_back_to_the_owner_picked_on_the_page(user: User, make_user, make_order, log_in, db):
    ada = await make_user("admin", name="Ada Lovelace")
    sam = await make_user("user", name="Sam Rivera")
    await make_order(sam, "Leaking tap")
    await make_order(ada, "Replace bulb")
    await log_in(user, ada, landing=f"/login?redirect_to={PAGE}")  # one page open: the one whose session ends
    await user.should_see(marker="total", retries=WAIT)

    user.find(marker="owner").elements.pop().set_value(sam["id"])  # changed on the page: the address follows
    await until(lambda: user.find(marker="total").elements.pop().text == "1", what="Sam's total")
    await auth_service.end_sessions(db=db, user_id=ObjectId(ada["id"]))
    await user.should_see(marker="login-reason", retries=WAIT)
    submit(user, ada["email"], PASSWORD)
    await user.should_see(marker="total", retries=WAIT)
    assert user.find(marker="owner").elements.pop().value == sam["id"]
    assert user.find(marker="total").elements.pop().text == "1"
