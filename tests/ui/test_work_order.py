"""The work-order page: edit, status, delete, timeline, and two people saving the same order."""

import asyncio

from bson import ObjectId
from nicegui.testing import User

from desk.actors import SYSTEM_TRIAGE
from desk.work_orders import repository, service
from desk.work_orders.models import WorkOrderUpdate
from pages.work_order import WorkOrderView
from tests.helpers import actor, until
from tests.ui.conftest import WAIT, open_order


async def test_edit_and_change_status(user: User, open_sams_order, db):
    order = await open_sams_order("Leaking tap")

    user.find(marker="edit-title").clear().type("Leaking tap, kitchen")
    user.find(marker="edit-status").click()
    user.find("In progress").click()
    user.find(marker="save").click()

    await user.should_see("Saved.", retries=WAIT)
    await user.should_see("version 2")
    await user.should_see("Status: Pending → In progress")
    await user.should_see("Title: “Leaking tap” → “Leaking tap, kitchen”")
    stored = await db["work_orders"].find_one({"_id": ObjectId(order.id)})
    assert (stored["title"], stored["status"], stored["version"]) == ("Leaking tap, kitchen", "in_progress", 2)


async def test_a_space_added_to_the_title_is_nothing_to_save(user: User, open_sams_order, db):
    # found by a UI QA pass: it said "Saved." though the order stayed as it was (titles are stored trimmed)
    order = await open_sams_order("Leaking tap")

    user.find(marker="edit-title").type(" ")
    user.find(marker="save").click()

    await user.should_see("Nothing to save.", retries=WAIT)
    await user.should_not_see("Saved.")
    assert (await db["work_orders"].find_one({"_id": ObjectId(order.id)}))["version"] == 1


async def test_invalid_edit_shows_the_problem_beside_the_field(user: User, open_sams_order, db):
    await open_sams_order("Leaking tap")

    user.find(marker="edit-title").clear()
    user.find(marker="save").click()

    await user.should_see("Required.", retries=WAIT)
    assert (await db["work_orders"].find_one({}))["title"] == "Leaking tap"


async def test_someone_else_saved_first_then_reapply(user: User, open_sams_order, make_user, db):
    admin = await make_user("admin", name="Dana Admin")
    order = await open_sams_order("Broken window")
    user.find(marker="edit-description").type("Glass cracked, taped for now.")

    # Meanwhile an admin raises the priority.
    await service.update(
        db=db, actor=actor(admin), order_id=order.id, data=WorkOrderUpdate(version=1, priority="urgent")
    )
    await user.should_see(marker="changed-elsewhere", retries=WAIT)  # told at once, edit kept
    await user.should_see("Dana Admin just changed this work order. Your edit is kept until you choose.")
    await user.should_see("version 2")  # above the form, the order as saved now, and in the timeline
    await user.should_see("Priority: Medium → Urgent")
    assert user.find(marker="edit-description").elements.pop().value == "Glass cracked, taped for now."
    user.find(marker="save").click()

    await user.should_see(marker="conflict", retries=WAIT)
    await user.should_see("Dana Admin saved this work order first. Nothing of yours was saved yet.")
    await user.should_see("They changed priority: Medium → Urgent")
    stored = await db["work_orders"].find_one({})
    assert (stored["description"], stored["version"]) == ("", 2)

    user.find(marker="conflict-reapply").click()
    await user.should_see("Saved.", retries=WAIT)
    await user.should_see("Description: (empty) → “Glass cracked, taped for now.”", retries=WAIT)
    stored = await db["work_orders"].find_one({})
    assert (stored["description"], stored["priority"], stored["version"]) == (
        "Glass cracked, taped for now.",
        "urgent",
        3,
    )


async def test_ones_own_save_in_another_tab_is_not_blamed_on_someone_else(user: User, sam, open_sams_order, db):
    # found by a UI QA pass: a person's own save in a second tab read "Someone else just changed…"
    order = await open_sams_order("Broken window")
    user.find(marker="edit-title").clear().type("My title")

    other_tab = WorkOrderUpdate(version=1, priority="urgent", title="Broken window, hall")
    await service.update(db=db, actor=actor(sam), order_id=order.id, data=other_tab)

    mine = "Your other tab (or window) just changed this work order. Your edit is kept until you choose."
    await user.should_see(mine, retries=WAIT)
    # not "They changed": it was this person; nor "You changed", read as this tab's edit, which is said beside it
    await user.should_see("That tab changed priority: Medium → Urgent")
    await user.should_see("In this tab, not saved yet:")
    await user.should_see("title: “Broken window” → “My title”")
    user.find(marker="save").click()
    first = "Your other tab (or window) saved this work order first. Nothing of yours was saved yet."
    await user.should_see(first, retries=WAIT)
    with user.scope(marker="conflict"):
        await user.should_see(marker="conflict-yours")
    await user.should_not_see("Someone else")
    await user.should_not_see("They changed")


async def test_someone_else_saved_first_then_reload(user: User, open_sams_order, make_user, db):
    admin = await make_user("admin", name="Youssef Amrani")
    order = await open_sams_order("Broken window")
    user.find(marker="edit-title").clear().type("My title")
    await service.update(
        db=db, actor=actor(admin), order_id=order.id, data=WorkOrderUpdate(version=1, title="Their title")
    )
    user.find(marker="save").click()
    await user.should_see(marker="conflict", retries=WAIT)
    await user.should_see("Youssef Amrani saved this work order first. Nothing of yours was saved yet.")
    await user.should_see("They changed title: “Broken window” → “Their title”")  # his name begins "You": not you

    user.find(marker="conflict-reload").click()

    await user.should_see("Their title", retries=WAIT)
    await user.should_not_see(marker="conflict")
    assert (await db["work_orders"].find_one({}))["title"] == "Their title"


async def test_a_save_that_meets_a_change_keeps_its_conflict_card_when_a_slower_live_redraw_ends(
    user: User, open_sams_order, make_user, db, monkeypatch
):
    # found by a clean-clone run under load: the live redraw of the same change, still reading the timeline when
    # Save drew the conflict card, then put its own card over it, and the choice to reapply was gone
    admin = await make_user("admin")
    order = await open_sams_order("Broken window")
    user.find(marker="edit-title").clear().type("My title")
    held, release, read = [], asyncio.Event(), service.activity

    async def slow_for_the_live_redraw(**kwargs):
        if not held:  # the first timeline read after the change: the live redraw's
            held.append(True)
            await release.wait()
        return await read(**kwargs)

    redrawn, redraw = [], WorkOrderView._changed_while_editing

    async def noted_when_it_ends(view, current):
        await redraw(view, current)
        redrawn.append(current.version)

    monkeypatch.setattr(service, "activity", slow_for_the_live_redraw)
    monkeypatch.setattr(WorkOrderView, "_changed_while_editing", noted_when_it_ends)
    await service.update(
        db=db, actor=actor(admin), order_id=order.id, data=WorkOrderUpdate(version=1, title="Their title")
    )
    await until(lambda: held, what="the live redraw to read the timeline")
    user.find(marker="save").click()
    await user.should_see(marker="conflict", retries=WAIT)

    release.set()
    await until(lambda: redrawn, what="the live redraw to end")

    await user.should_see(marker="conflict-reapply")
    await user.should_not_see(marker="changed-elsewhere")


async def test_an_untouched_page_follows_changes_live(user: User, sam, open_sams_order, db):
    order = await open_sams_order("Projector broken")

    await service.update(db=db, actor=actor(sam), order_id=order.id, data=WorkOrderUpdate(version=1, status="done"))

    await user.should_see("version 2", retries=WAIT)
    await user.should_see("Status: Pending → Done")
    await user.should_not_see(marker="changed-elsewhere")


async def test_delete_asks_first(user: User, open_sams_order, db):
    await open_sams_order("Order new chairs")

    user.find(marker="delete").click()
    await user.should_see("Delete “Order new chairs”? This cannot be undone.")
    user.find("Cancel").click()
    assert await db["work_orders"].count_documents({}) == 1

    user.find(marker="delete").click()
    await user.should_see(marker="confirm-delete", retries=WAIT)
    user.find(marker="confirm-delete").click()
    await user.should_see("Deleted “Order new chairs”.", retries=WAIT)
    assert await db["work_orders"].count_documents({}) == 0


async def test_a_page_left_open_says_when_the_order_is_deleted(user: User, sam, open_sams_order, db):
    order = await open_sams_order("Badge reader")

    await service.delete(db=db, actor=actor(sam), order_id=order.id, version=1)

    await user.should_see(marker="deleted", retries=WAIT)
    (text,), (add,) = user.find(marker="comment-text").elements, user.find(marker="comment-add").elements
    assert not text.enabled and not add.enabled  # nothing left to comment on
    for marker in ("save", "delete", "release"):  # nor to save, delete or put back in the queue
        (button,) = user.find(marker=marker).elements
        assert not button.enabled, marker


async def test_someone_elses_order_is_not_found(user: User, make_user, make_order, log_in):
    sam, priya = await make_user("user"), await make_user("user")
    order = await make_order(priya, "Priya's order")
    await log_in(user, sam)
    await user.open(f"/app/work-orders/{order.id}")
    await user.should_see(marker="missing")
    await user.should_not_see("Priya's order")


async def test_the_timeline_marks_agent_entries(user: User, make_user, make_order, log_in, db):
    sam = await make_user("user", name="Sam Rivera")
    order = await make_order(sam, "Heating not working")
    await service.update(
        db=db,
        actor=actor(sam),
        order_id=order.id,
        data=WorkOrderUpdate(version=1, priority="high"),
        run_id="run0000abc123",
    )
    await repository.append_activity(
        db,
        {
            "workOrderId": ObjectId(order.id),
            "actorId": SYSTEM_TRIAGE.id,
            "actorKind": "system",
            "action": "updated",
            "before": {"priority": "high"},
            "after": {"priority": "urgent"},
            "runId": "run0000def456",
            "at": order.created_at,
        },
    )
    await log_in(user, sam)
    await open_order(user, order.id)

    await user.should_see("Copilot for Sam Rivera (run abc123)")
    await user.should_see("Triage agent")
    await user.should_see("Sam Rivera")
    assert len(user.find(marker="agent-badge").elements) == 2


async def test_a_long_timeline_shows_its_newest_entries_and_the_older_on_request(user: User, open_sams_order):
    await open_sams_order("Heating not working", comments=[f"note {n:03}" for n in range(205)])

    await user.should_see("note 204")
    await user.should_not_see("note 004")
    await user.should_not_see("created this work order")
    user.find("Show older entries").click()

    await user.should_see("note 000", retries=WAIT)
    await user.should_see("created this work order")
    await user.should_not_see("Show older entries")
    assert len(user.find(marker="timeline-entry").elements) == 206


async def test_typing_as_soon_as_the_form_shows_is_kept_and_saved(
    user: User, make_user, make_order, log_in, db, monkeypatch
):
    admin, sam = await make_user("admin"), await make_user("user")
    order = await make_order(sam, "Heating not working")
    owner_choices = service.owner_choices

    async def slow_owner_choices(**kwargs):  # a desk with many people: the owner list reads while the page draws
        await asyncio.sleep(0.5)  # a slow read, the condition under test (the page is served while it goes on)
        return await owner_choices(**kwargs)

    monkeypatch.setattr(service, "owner_choices", slow_owner_choices)
    await log_in(user, admin)
    await user.open(f"/app/work-orders/{order.id}")  # served as soon as the form exists; the rest streams in

    user.find(marker="edit-title").clear().type("Heating fixed?")
    await user.should_see(marker="timeline", retries=WAIT)  # the page has finished drawing
    user.find(marker="save").click()

    await user.should_see("Saved.", retries=WAIT)
    await user.should_see("version 2")
    assert user.find(marker="edit-title").elements.pop().value == "Heating fixed?"
    stored = await db["work_orders"].find_one({"_id": ObjectId(order.id)})
    assert (stored["title"], stored["version"]) == ("Heating fixed?", 2)
