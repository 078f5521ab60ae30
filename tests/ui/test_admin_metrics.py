"""/app/admin/metrics: charts of the real work orders that follow changes; admins only."""

from datetime import UTC, datetime, timedelta

import pytest
from nicegui import ui
from nicegui.testing import User

from components.forbidden import MESSAGE as NO_ACCESS
from desk.work_orders import service as work_orders_service
from desk.work_orders.models import WorkOrderUpdate
from tests.helpers import actor, until
from tests.ui.conftest import WAIT

PAGE = "/app/admin/metrics"


def chart(user: User, marker: str) -> ui.echart:
    (found,) = user.find(kind=ui.echart, marker=marker).elements
    return found


def bars(found: ui.echart) -> dict[str, int]:
    """What a bar chart shows: each category with the height of its bar."""
    categories, data = found.options["xAxis"]["data"], found.options["series"][0]["data"]
    return {name: item["value"] for name, item in zip(categories, data, strict=True)}


def today(found: ui.echart) -> dict[str, object]:
    """The last point of the per-day chart: today's label and each series' value."""
    options = found.options
    return {"day": options["xAxis"]["data"][-1], **{s["name"]: s["data"][-1] for s in options["series"]}}


async def test_the_charts_show_the_real_work_orders(user: User, make_user, log_in, make_order, db):
    ada = await make_user("admin", name="Ada Lovelace")
    sam = await make_user("user", name="Sam Rivera")
    await make_order(sam, "Leaking tap", priority="high")
    await make_order(sam, "Broken window", priority="urgent")
    done = await make_order(ada, "Replace bulb")
    await work_orders_service.update(
        db=db, actor=actor(ada), order_id=done.id, data=WorkOrderUpdate(version=done.version, status="done")
    )

    await log_in(user, ada, landing=PAGE)
    await user.should_see(kind=ui.echart, retries=WAIT)
    assert len(user.find(ui.echart).elements) == 3
    assert bars(chart(user, "status-chart")) == {"Pending": 2, "In progress": 0, "Done": 1, "Cancelled": 0}
    assert bars(chart(user, "priority-chart")) == {"Low": 0, "Medium": 1, "High": 1, "Urgent": 1}
    per_day = chart(user, "per-day-chart")
    assert [s["name"] for s in per_day.options["series"]] == ["Opened", "Closed"]
    assert len(per_day.options["xAxis"]["data"]) == 30
    assert today(per_day) == {"day": datetime.now(UTC).strftime("%d %b"), "Opened": 3, "Closed": 1}
    await user.should_see(kind=ui.label, marker="total", content="3", retries=WAIT)
    await user.should_see(kind=ui.label, marker="mean-to-done", content="under a minute", retries=WAIT)


async def test_before_anything_is_done(user: User, make_user, log_in, make_order):
    ada = await make_user("admin", name="Ada Lovelace")
    await make_order(ada, "Leaking tap")

    await log_in(user, ada, landing=PAGE)
    await user.should_see("No work order is done yet", retries=WAIT)
    assert bars(chart(user, "status-chart"))["Pending"] == 1
    assert today(chart(user, "per-day-chart"))["Closed"] == 0


async def test_the_charts_follow_changes_without_reloading(user: User, make_user, log_in, make_order, db):
    ada = await make_user("admin", name="Ada Lovelace")
    sam = await make_user("user", name="Sam Rivera")
    tap = await make_order(sam, "Leaking tap", priority="high")

    await log_in(user, ada, landing=PAGE)
    await user.should_see("No work order is done yet", retries=WAIT)
    status = chart(user, "status-chart")
    assert bars(status) == {"Pending": 1, "In progress": 0, "Done": 0, "Cancelled": 0}

    # Someone else works on the desk meanwhile (through the services, as the API or the worker would).
    await make_order(sam, "Broken window", priority="urgent")
    await work_orders_service.update(
        db=db, actor=actor(sam), order_id=tap.id, data=WorkOrderUpdate(version=tap.version, status="done")
    )

    await user.should_see(kind=ui.label, marker="mean-to-done", content="under a minute", retries=WAIT)
    await until(
        lambda: bars(status) == {"Pending": 1, "In progress": 0, "Done": 1, "Cancelled": 0}, what="the bars to update"
    )
    assert not status.is_deleted  # updated in place, not drawn again
    assert bars(chart(user, "priority-chart")) == {"Low": 0, "Medium": 0, "High": 1, "Urgent": 1}
    assert today(chart(user, "per-day-chart"))["Opened"] == 2
    await user.should_see(kind=ui.label, marker="total", content="2", retries=WAIT)


@pytest.mark.parametrize("role", ["user", "viewer"])
async def test_others_get_the_no_access_page(user: User, make_user, log_in, role):
    person = await make_user(role, name="Pat Doe")
    await log_in(user, person)
    await user.should_not_see(kind=ui.link, content="Metrics", retries=WAIT)  # the frame never offers the link

    await user.open(PAGE)
    await user.should_see(NO_ACCESS, retries=WAIT)
    await user.should_see(marker="current-user", retries=WAIT)
    await user.should_not_see(kind=ui.echart, retries=WAIT)
    await user.should_not_see("Mean time to done", retries=WAIT)


async def test_overdue_orders_by_owner_each_open_their_list(user: User, make_user, log_in, make_order, clock):
    ada = await make_user("admin", name="Ada Lovelace")
    sam = await make_user("user", name="Sam Rivera")
    late = clock.now() - timedelta(hours=3)
    await make_order(sam, "Late tap", dueAt=late)
    await make_order(sam, "Late door", dueAt=late)
    await make_order(ada, "Late bulb", dueAt=late)
    await log_in(user, ada)

    await user.open(PAGE)

    await user.should_see("Sam Rivera: 2", retries=WAIT)
    (column,) = user.find(marker="overdue-by-owner").elements
    links = [(link.text, link.props["href"]) for link in column.default_slot.children]  # most overdue first
    assert links == [
        ("Sam Rivera: 2", f"/app?due=overdue&owner={sam['id']}"),
        ("Ada Lovelace: 1", f"/app?due=overdue&owner={ada['id']}"),
    ]
    user.find("Sam Rivera: 2").click()
    await user.should_see("1–2 of 2", retries=WAIT)
