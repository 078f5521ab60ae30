"""Work orders in real browsers: two people create, edit, collide, resolve, watch it live, log out; a delete."""

from desk.work_orders import service
from tests.e2e.browser import Browser
from tests.helpers import actor

LIVE = 5.0  # seconds a change made elsewhere may take to show on an open screen
SESSION_CHECK = 5.0  # seconds another tab may take to notice a logout (the frame checks every 3 s)


async def test_two_people_edit_one_work_order(browser, make_person, e2e_db):
    owner = await make_person(name="Robin Owner")
    admin = await make_person("admin", name="Ada Admin")

    robin = browser("robin")
    robin.log_in(owner)
    robin.see("No work orders yet. Create the first one with “New work order” (or press n).")
    robin.shoot("logged-in")

    robin.press("New work order")
    robin.fill("Title", "Boiler pressure low")
    robin.fill("Description", "Gauge reads 0.5 bar in the basement.")
    robin.choose("Priority", "High")
    robin.shoot("new-order-dialog")
    with robin.expect_notification("Created “Boiler pressure low”"):
        robin.press("Create")
    robin.see("1–1 of 1")
    robin.shoot("created")
    robin.press("New work order")  # the next one starts empty (a kept dialog showed the last order's text)
    robin.wait_until(lambda: robin.field("Title").get_attribute("value") == "", "an empty title")
    assert robin.field("Priority").get_attribute("value") == "Medium"
    robin.press("Cancel")

    robin.click_link("Boiler pressure low")
    robin.see_containing("version 1")
    order_id = robin.path.removeprefix("/app/work-orders/")
    robin.fill("Title", "Boiler pressure low in basement")
    robin.choose("Status", "In progress")
    with robin.expect_notification("Saved."):
        robin.press("Save")
    robin.see_containing("version 2")
    robin.see("Title: “Boiler pressure low” → “Boiler pressure low in basement”")
    robin.see("Status: Pending → In progress")
    robin.shoot("saved")

    robin.choose("Priority", "Urgent")  # not saved yet: Ada saves first

    ada = browser("ada")
    ada.log_in(admin)
    ada.click_link("Boiler pressure low in basement")
    ada.see_containing("version 2")
    ada.fill("Description", "Valve replaced; pressure back to 1.5 bar.")
    with ada.expect_notification("Saved."):
        ada.press("Save")
    ada.see_containing("version 3")
    ada.shoot("saved-first")

    robin.see("Ada Admin just changed this work order. Your edit is kept until you choose.", timeout=LIVE)
    assert robin.field("Priority").get_attribute("value") == "Urgent"
    robin.press("Save")
    robin.see("Ada Admin saved this work order first. Nothing of yours was saved yet.")
    robin.see(
        "They changed description: “Gauge reads 0.5 bar in the basement.” → “Valve replaced; pressure back to 1.5 bar.”"
    )
    robin.shoot("conflict")
    with robin.expect_notification("Saved."):
        robin.press("Apply my changes on top")
    robin.do_not_see("Ada Admin saved this work order first. Nothing of yours was saved yet.")
    robin.see_containing("version 4")
    robin.see("Priority: High → Urgent")
    robin.shoot("applied-on-top")

    stored = await service.get(db=e2e_db, actor=actor(admin), order_id=order_id)
    assert stored is not None
    assert stored.model_dump(include={"title", "description", "priority", "status", "version"}) == {
        "title": "Boiler pressure low in basement",
        "description": "Valve replaced; pressure back to 1.5 bar.",
        "priority": "urgent",
        "status": "in_progress",
        "version": 4,
    }

    ada.see_containing("version 4", timeout=LIVE)  # Ada had nothing unsaved: her screen simply moved on
    robin.click_link("← All work orders")
    robin.see("Boiler pressure low in basement")
    robin.run_js("window.__sameLoad = true")  # gone if the page reloads
    ada.fill("Title", "Boiler fixed, check weekly")
    with ada.expect_notification("Saved."):
        ada.press("Save")
    robin.see("Boiler fixed, check weekly", timeout=LIVE)
    assert robin.run_js("return window.__sameLoad") is True
    robin.shoot("live-list")

    robin.press("Log out")
    robin.wait_for_path("/login")
    robin.open("/app")
    _assert_on_login_page(robin, back_to="/app")
    robin.shoot("logged-out")


KEPT_EDITS = "return Object.keys(localStorage).filter((key) => key.startsWith('desk-draft:')).length"


async def test_logging_out_in_one_window_ends_the_session_in_the_other(browser, make_person, make_order):
    person = await make_person(name="Sam Twowindows")
    order = await make_order(person, "Squeaky door")
    sam = browser("sam")
    sam.log_in(person)
    first = sam.driver.current_window_handle
    sam.click_link("Squeaky door")
    sam.wait_until(lambda: sam.path.startswith("/app/work-orders/"), "the order page")
    sam.fill("Title", "Squeaky door, second floor")  # not saved: kept in this browser meanwhile
    sam.wait_until(lambda: sam.run_js(KEPT_EDITS) == 1, "the edit kept in the browser")
    sam.open_window()
    sam.open("/app")
    sam.see("Sam Twowindows")

    sam.press("Log out")
    sam.see("You have changes on 1 work order that are not saved.")  # typed in the other window
    sam.press("Log out")  # in the dialog that asks first
    sam.wait_for_path("/login")
    assert sam.run_js(KEPT_EDITS) == 0  # on a shared computer, nothing of Sam's typing stays behind
    sam.use_window(first)
    sam.wait_for_path("/login", timeout=SESSION_CHECK)
    _assert_on_login_page(sam, back_to=f"/app/work-orders/{order.id}")  # the page it was on
    sam.shoot("other-window-logged-out")


def _assert_on_login_page(person: Browser, *, back_to: str) -> None:
    person.wait_for_path("/login")
    assert person.query == {"redirect_to": [back_to], "reason": ["ended"]}  # the login page says why
    person.see_containing("Your session ended")
    person.field("Email")
    person.field("Password")
    person.see("Log in")


async def test_deleting_an_order_says_so_on_the_list_it_lands_on(browser, make_person, make_order):
    # the notification was given on the order's page, which the browser left at once: nobody saw it
    sam = await make_person(name="Sam Rivera")
    await make_order(sam, "Order new chairs")
    page = browser("sam")
    page.log_in(sam)
    page.click_link("Order new chairs")
    page.wait_until(lambda: page.path.startswith("/app/work-orders/"), "the order page")

    page.press("Delete")
    page.press("Delete")  # in the dialog that asks first
    page.wait_for_path("/app")

    page.see("Deleted “Order new chairs”.")
    page.do_not_see("Order new chairs")
    page.shoot("deleted-and-told")
