"""The triage suggestion on the work-order page: who sees it, who decides, live arrival, and the off states."""

import asyncio
import time

import pytest
from bson import ObjectId
from nicegui import ui
from nicegui.testing import User
from nicegui.testing.user_notify import UserNotify

from desk.agent.triage import policy
from desk.agent.triage import task as triage_task
from desk.users import service as users_service
from desk.work_orders import service as work_orders
from desk.work_orders.models import WorkOrderRead, WorkOrderUpdate
from tests.helpers import actor, reconfigure
from tests.triage.conftest import proposal
from tests.ui.conftest import WAIT

SETTLE = 1.0  # seconds: a handler that the guard did not stop would have saved by then


async def triage_now(db, settings, provider) -> int:
    """The worker, once over everything due (burst mode), as scheduler.py runs it."""
    return await triage_task.process_due(db, settings, provider=provider)


async def open_order(user: User, order_id: str) -> None:
    await user.open(f"/app/work-orders/{order_id}")
    await user.should_see(marker="detail-title", retries=WAIT)


@pytest.fixture
def triaged(make_order, db, ai_settings, provider, fake_provider):
    """An order of `person`, triaged once by the worker as the scripted model proposes (`proposal`'s words)."""

    async def triage(person: dict, title: str, priority: str, **words) -> WorkOrderRead:
        order = await make_order(person, title)
        fake_provider.script(proposal(priority, **words))
        await triage_now(db, ai_settings, provider)
        return order

    return triage


def stored_suggestion(db, order):
    return db["triage_suggestions"].find_one({"workOrderId": ObjectId(order.id)})


async def test_the_owner_sees_the_suggestion_and_accepts_it(user: User, make_user, log_in, db, triaged):
    sam = await make_user("user", name="Sam Rivera")
    order = await triaged(
        sam, "Water on the floor", "urgent", summary="Burst pipe under the sink; water spreading.", flag=True
    )

    await log_in(user, sam)
    await open_order(user, order.id)
    await user.should_see("Triage suggestion")
    await user.should_see("Burst pipe under the sink; water spreading.")
    await user.should_see("Flagged for the dispatcher")
    user.find(marker="triage-accept").click()

    await user.should_see("Priority set to Urgent.")
    await user.should_see(marker="triage-decided", content="Accepted", retries=WAIT)
    await user.should_see("Priority: Medium → Urgent", retries=WAIT)  # the page follows, through the feed
    stored = await db["work_orders"].find_one({"_id": ObjectId(order.id)})
    assert (stored["priority"], stored["version"]) == ("urgent", 2)
    assert (await stored_suggestion(db, order))["decision"] == "accepted"
    await user.should_not_see(marker="triage-accept")


async def test_dismiss_leaves_the_priority(user: User, make_user, log_in, db, triaged):
    sam = await make_user("user")
    order = await triaged(sam, "Squeaky door", "high", summary="A door hinge needs oil.")

    await log_in(user, sam)
    await open_order(user, order.id)
    user.find(marker="triage-dismiss").click()

    await user.should_see("Suggestion dismissed.")
    await user.should_see(marker="triage-decided", content="Dismissed")
    assert (await stored_suggestion(db, order))["decision"] == "dismissed"
    assert (await db["work_orders"].find_one({}))["priority"] == "medium"


async def test_a_suggestion_overtaken_by_a_persons_priority_offers_no_accept(
    user: User, make_user, log_in, db, triaged
):
    sam = await make_user("user")
    order = await triaged(sam, "Flickering light", "low", summary="One bulb flickers in the hall.")
    update = WorkOrderUpdate(version=1, priority="urgent")  # the team knows better: it is the fire exit sign
    await work_orders.update(db=db, actor=actor(sam), order_id=order.id, data=update)

    await log_in(user, sam)
    await open_order(user, order.id)

    await user.should_see("Since this suggestion, the priority was set to Urgent.")
    await user.should_not_see(marker="triage-accept")
    user.find(marker="triage-dismiss").click()
    await user.should_see(marker="triage-decided", content="Dismissed")
    assert (await db["work_orders"].find_one({}))["priority"] == "urgent"


async def test_an_admin_decides_on_anyones_order_a_viewer_only_reads(
    user: User, create_user, make_user, change_user, log_in, triaged
):
    ada, vera = await make_user("admin"), await make_user("user")
    order = await triaged(vera, "Broken window", "high", summary="Glass broken in the lobby.")
    vera = await change_user(vera, role="viewer")  # viewers read their own orders and change nothing

    await log_in(user, vera)
    await open_order(user, order.id)
    await user.should_see("Glass broken in the lobby.")
    await user.should_not_see(marker="triage-accept")
    await user.should_not_see(marker="triage-dismiss")

    admin = create_user()
    await log_in(admin, ada)
    await open_order(admin, order.id)
    await admin.should_see(marker="triage-accept")
    await admin.should_see(marker="triage-dismiss")


async def test_a_suggestion_stored_by_the_worker_shows_on_the_open_page_within_two_seconds(
    user: User, make_user, make_order, log_in, db, ai_settings, provider, fake_provider
):
    sam = await make_user("user")
    order = await make_order(sam, "No heating in room 4")
    await log_in(user, sam)
    await open_order(user, order.id)
    await user.should_not_see(marker="triage-card")

    fake_provider.script(proposal("high", summary="No heating: check the boiler."))
    await triage_now(db, ai_settings, provider)
    stored_at = time.monotonic()
    await user.should_see("No heating: check the boiler.", retries=20)  # 20 tries, 0.1 s apart
    assert time.monotonic() - stored_at < 2.0


async def test_auto_applied_reads_as_applied_by_the_triage_agent(
    user: User, make_user, log_in, db, ai_settings, triaged
):
    await policy.current(db, ai_settings)
    await db["agent_config"].update_one({"_id": "triage"}, {"$set": {"mode": "auto_apply"}})
    sam = await make_user("user")
    order = await triaged(
        sam, "Gas smell in the kitchen", "urgent", summary="Possible gas leak: evacuate and call the utility."
    )

    await log_in(user, sam)
    await open_order(user, order.id)
    await user.should_see("Applied by the triage agent")
    await user.should_see(marker="triage-priority", content="Urgent")
    await user.should_see("Triage agent")  # the timeline names who changed it
    await user.should_not_see(marker="triage-accept")
    await user.should_not_see(marker="triage-dismiss")


async def test_accept_after_someone_else_changed_the_order_shows_the_conflict(
    user: User, make_user, log_in, db, triaged
):
    sam, ada = await make_user("user"), await make_user("admin")
    order = await triaged(sam, "Leaking roof", "urgent", summary="Roof leak over the server room.")
    await log_in(user, sam)
    await open_order(user, order.id)
    user.find(marker="edit-description").type("Bucket under it for now.")  # an edit in progress: no live reload

    await work_orders.update(
        db=db, actor=actor(ada), order_id=order.id, data=WorkOrderUpdate(version=1, status="in_progress")
    )
    await user.should_see(marker="changed-elsewhere")
    user.find(marker="triage-accept").click()

    await user.should_see(marker="conflict")
    await user.should_see("They changed status: Pending → In progress")
    stored = await db["work_orders"].find_one({"_id": ObjectId(order.id)})
    assert (stored["priority"], stored["version"]) == ("medium", 2)
    assert (await stored_suggestion(db, order))["decision"] is None  # still open: nothing was decided


async def test_a_summary_holding_html_is_shown_as_text(user: User, make_user, log_in, triaged):
    sam = await make_user("user")
    payload = '<img src=x onerror="alert(1)"><script>alert(2)</script>'
    order = await triaged(sam, "Odd one", "low", summary=payload)

    await log_in(user, sam)
    await open_order(user, order.id)
    await user.should_see(marker="triage-summary")
    (summary,) = user.find(marker="triage-summary").elements
    assert isinstance(summary, ui.label) and summary.text == payload
    await user.should_not_see(kind=ui.html)


async def test_a_person_who_turned_ai_off_sees_no_suggestion_on_their_orders(
    user: User, make_user, make_order, log_in, db, ai_settings, provider, fake_provider, triaged
):
    sam = await make_user("user")
    old = await triaged(sam, "Made while AI was on", "high", summary="Triaged before the opt-out.")
    await users_service.set_own_ai(db=db, actor=actor(sam), enabled=False)
    new = await make_order(sam, "Made after the opt-out")
    assert await triage_now(db, ai_settings, provider) == 0  # its event was skipped: no model call
    assert len(fake_provider.requests) == 1

    await log_in(user, sam)
    await open_order(user, old.id)
    await user.should_see("Made while AI was on")
    await user.should_not_see(marker="triage-card")
    await open_order(user, new.id)
    await user.should_not_see(marker="triage-card")


async def test_with_ai_off_at_boot_the_page_offers_no_suggestion(user: User, make_user, log_in, ai_settings, triaged):
    sam = await make_user("user")
    order = await triaged(sam, "Flickering light", "low", summary="Replace the tube.")
    reconfigure(ai_settings, ai_enabled=False)

    await log_in(user, sam)
    await open_order(user, order.id)
    await user.should_see("Flickering light")
    await user.should_not_see(marker="triage-card")
    await user.should_not_see("Replace the tube.")


async def test_a_double_click_on_accept_decides_once_without_a_false_warning(
    user: User, make_user, log_in, db, triaged
):
    sam = await make_user("user")
    order = await triaged(sam, "Water on the floor", "urgent", summary="Burst pipe under the sink.")
    await log_in(user, sam)
    await open_order(user, order.id)

    accept = user.find(marker="triage-accept")
    accept.click()
    accept.click()  # the second click of a double-click, before the first has saved

    await user.should_see("Priority set to Urgent.", kind=UserNotify, retries=WAIT)
    await asyncio.sleep(SETTLE)  # time for a second decision to be refused, had the second click been taken
    assert user.notify.messages == ["Priority set to Urgent."]  # no "already decided" for their own click
    assert (await db["work_orders"].find_one({}))["version"] == 2


async def test_a_closed_order_offers_no_accept_and_no_way_back_to_the_queue(user: User, make_user, log_in, db, triaged):
    sam = await make_user("user")
    order = await triaged(sam, "Squeaky door", "high", summary="A door hinge needs oil.")
    await work_orders.update(db=db, actor=actor(sam), order_id=order.id, data=WorkOrderUpdate(version=1, status="done"))

    await log_in(user, sam)
    await open_order(user, order.id)

    await user.should_see("A door hinge needs oil.")
    await user.should_see(marker="triage-closed")
    await user.should_not_see(marker="triage-accept")
    await user.should_not_see(marker="release")
    user.find(marker="triage-dismiss").click()  # it can still be put aside
    await user.should_see(marker="triage-decided", content="Dismissed")
