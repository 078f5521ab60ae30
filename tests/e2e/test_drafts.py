"""No lost typing, in a real browser: Ctrl+S saves an order, and leaving it with an unsaved edit asks first."""

from selenium.webdriver.common.keys import Keys

from tests.e2e.browser import Browser


async def test_ctrl_s_saves_and_leaving_with_an_unsaved_edit_asks_first(browser, make_person, make_order, e2e_db):
    # both were a script the page added after it was sent, which a browser never runs: neither worked
    sam = await make_person(name="Sam Rivera")
    order = await make_order(sam, "Leaking tap")
    page: Browser = browser("sam")
    page.log_in(sam)

    page.click_link("Leaking tap")  # opened from the list
    page.see_containing("version 1")
    page.fill("Title", "Leaking tap in the kitchen")
    with page.expect_notification("Saved."):
        page.field("Title").send_keys(Keys.CONTROL, "s")
    page.see_containing("version 2")
    assert (await e2e_db["work_orders"].find_one({}))["title"] == "Leaking tap in the kitchen"

    page.open(f"/app/work-orders/{order.id}")  # opened by its address
    page.see_containing("version 2")
    assert not would_ask_before_leaving(page)
    page.fill("Title", "Not saved yet")
    page.wait_until(lambda: would_ask_before_leaving(page), "the page to ask before it is left")
    with page.expect_notification("Saved."):
        page.field("Title").send_keys(Keys.META, "s")  # ⌘S on a Mac
    page.wait_until(lambda: not would_ask_before_leaving(page), "the page to stop asking once saved")


def would_ask_before_leaving(page: Browser) -> bool:
    """Whether leaving now would ask: the page cancels the browser's beforeunload.

    ChromeDriver accepts a real beforeunload prompt by itself, so the test sends the event the
    browser sends when a page is left and looks at whether the page's handler cancelled it.
    """
    script = "const e = new Event('beforeunload', {cancelable: true}); dispatchEvent(e); return e.defaultPrevented"
    return bool(page.run_js(script))
