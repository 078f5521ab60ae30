"""The bell and /app/notifications in a real browser: an order given to Lee rings Lee's bell at once, the page lists
it and links to the order, and "Mark all read" quiets the bell."""

from tests.e2e.browser import Browser

LIVE = 5.0  # seconds a change made elsewhere may take to show on an open screen
BELL = "return document.querySelector('button[aria-label^=\"Notifications\"]')?.getAttribute('aria-label')"


async def test_the_bell_rings_and_the_page_leads_to_the_order(browser, make_person, make_order):
    lee_person = await make_person(name="Lee Chen")
    dana_person = await make_person("admin", name="Dana Okafor")

    lee: Browser = browser("lee")
    lee.log_in(lee_person)
    lee.wait_until(lambda: lee.run_js(BELL) == "Notifications", "a quiet bell")

    order = await make_order(dana_person, "Radiator cold in room 12", owner_id=lee_person["id"])  # elsewhere
    lee.wait_until(lambda: lee.run_js(BELL) == "Notifications, 1 unread", "the bell to ring", LIVE)
    lee.see("1")  # the badge
    lee.shoot("bell")

    lee.run_js("document.querySelector('button[aria-label^=\"Notifications\"]').click()")
    lee.wait_for_path("/app/notifications")
    lee.see("Dana Okafor gave you “Radiator cold in room 12”.")
    lee.shoot("page")

    lee.press("Mark all read")
    lee.wait_until(lambda: lee.run_js(BELL) == "Notifications", "the bell to go quiet", LIVE)
    lee.click_link("Dana Okafor gave you “Radiator cold in room 12”.")
    lee.wait_for_path(f"/app/work-orders/{order.id}")
    lee.see("Radiator cold in room 12")
