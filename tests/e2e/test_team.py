"""A team at work in real browsers: an order filed to the queue, taken by a colleague, reassigned and commented on
by the admin, with every open screen following along."""

from desk.work_orders import service
from tests.e2e.browser import Browser
from tests.helpers import actor

LIVE = 5.0  # seconds a change made elsewhere may take to show on an open screen
LONG_COMMENT = "Lee checked it: " + "; ".join(["the left leg is loose, and the screw that holds it is gone"] * 4)
# The timeline entry holding `arguments[0]` (the row whose first child is its icon): its text starts right of the icon.
BESIDE_ITS_ICON = """let entry = arguments[0];
while (entry && !(entry.firstElementChild && entry.firstElementChild.matches('i.q-icon'))) entry = entry.parentElement;
return arguments[0].getBoundingClientRect().left >= entry.firstElementChild.getBoundingClientRect().right;"""


async def test_an_unassigned_order_is_taken_from_the_queue_then_reassigned(browser, make_person, e2e_db):
    sam_person = await make_person(name="Sam Rivera")
    priya_person = await make_person(name="Priya Shah")
    await make_person(name="Lee Chen")
    dana_person = await make_person("admin", name="Dana Okafor")

    sam: Browser = browser("sam")
    sam.log_in(sam_person)
    sam.press("New work order")
    sam.fill("Title", "Wobbly chair in room 214")
    sam.choose("Who works on it", "Unassigned (queue)")
    with sam.expect_notification("Created “Wobbly chair in room 214”"):
        sam.press("Create")
    sam.click_link("Wobbly chair in room 214")
    sam.see("Requested by Sam Rivera")
    sam.see("Owner: Unassigned")
    order_id = sam.path.removeprefix("/app/work-orders/")
    sam.shoot("filed-to-the-queue")

    dana = browser("dana")
    dana.log_in(dana_person)
    dana.see("Wobbly chair in room 214")
    dana.see("Unassigned")

    priya = browser("priya")
    priya.log_in(priya_person)
    priya.see("Wobbly chair in room 214")  # the queue is everyone's
    with priya.expect_notification("“Wobbly chair in room 214” is yours now."):
        priya.press("Assign to me")
    priya.see("Priya Shah")
    priya.shoot("taken")

    sam.see("Owner: Priya Shah", timeout=LIVE)  # the requester's page follows
    sam.see("Owner: Unassigned → Priya Shah", timeout=LIVE)
    dana.see("Priya Shah", timeout=LIVE)  # and the admin's list
    dana.shoot("list-after-take")

    dana.click_link("Wobbly chair in room 214")
    dana.see("Requested by Sam Rivera")
    with dana.expect_notification("Reassigned."):
        dana.choose("Owner", "Lee Chen")
    dana.see("Owner: Priya Shah → Lee Chen")
    dana.shoot("reassigned")

    sam.see("Owner: Lee Chen", timeout=LIVE)
    sam.see("Owner: Priya Shah → Lee Chen", timeout=LIVE)
    sam.shoot("requester-sees-reassignment")

    dana.fill("Add a comment", "Lee has the <b>spare</b> chair.")  # found by its name, as a screen reader would
    dana.press("Comment")
    sam.see("Lee has the <b>spare</b> chair.", timeout=LIVE)  # on the requester's open page, as typed
    sam.see("Dana Okafor")
    dana.fill("Add a comment", LONG_COMMENT)
    dana.press("Comment")
    long = sam.see(LONG_COMMENT, timeout=LIVE)
    assert sam.driver.execute_script(BESIDE_ITS_ICON, long)  # wrapped beside the icon, not under it
    sam.shoot("comment-arrives")
    priya.do_not_see("Wobbly chair in room 214", timeout=LIVE)  # no longer hers, nor in the queue
    priya.shoot("gone-from-priya")

    stored = await service.get(db=e2e_db, actor=actor(dana_person), order_id=order_id)
    assert stored is not None and stored.requester_id == sam_person["id"]
    assert stored.owner_id != priya_person["id"]
