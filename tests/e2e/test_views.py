"""Views in a real browser: Back comes back to the same list view; a viewer reads without edit controls."""

from datetime import UTC, datetime, timedelta

from selenium.webdriver.common.by import By


async def test_back_restores_a_filtered_sorted_second_page(browser, make_person, make_order):
    sam = await make_person(name="Sam Rivera")
    for number in range(55):  # a second page as long as the first
        await make_order(sam, f"Kitchen job {number:02d}")
    await make_order(sam, "Roof tiles loose")

    page = browser("sam")
    page.log_in(sam)
    page.see("1–25 of 56")
    page.fill("Search", "kit")
    page.see("1–25 of 55")
    page.choose("Sort", "Title A–Z")
    page.wait_until(lambda: page.query.get("sort") == ["title"], "the sort in the address")
    page.choose("Requested by", "Me")  # all of them Sam's own requests: the same 55
    page.wait_until(lambda: page.query.get("requester") == [sam["id"]], "the requester in the address")
    page.run_js("window.scrollTo(0, document.body.scrollHeight)")  # down at the page numbers, under the list
    assert page.run_js("return window.scrollY") > 0
    page.press("2")
    page.see("26–50 of 55")
    page.wait_until(lambda: page.query.get("page") == ["2"], "the page in the address")
    page.wait_until(lambda: page.run_js("return window.scrollY") == 0, "the new page shown from its top")
    page.shoot("second-page")

    page.click_link("Kitchen job 27")
    page.wait_until(lambda: page.path.startswith("/app/work-orders/"), "the order page")
    page.driver.back()

    page.see("26–50 of 55")
    assert page.texts("a[href^='/app/work-orders/']") == [f"Kitchen job {n}" for n in range(25, 50)]
    assert page.field("Search").get_attribute("value") == "kit"
    assert page.query == {"q": ["kit"], "requester": [sam["id"]], "sort": ["title"], "page": ["2"]}
    page.shoot("back-restored")

    page.open("/app?q=kit&page=9")  # an old link, past the end: the last page there is, in the address too
    page.see("51–55 of 55")
    page.wait_until(lambda: page.query == {"q": ["kit"], "page": ["3"]}, "the last page in the address")


async def test_a_viewer_reads_an_order_and_sees_no_edit_controls(browser, make_person, make_order):
    admin = await make_person("admin", name="Ada Admin")
    viewer = await make_person("viewer", name="Vic Viewer")
    order = await make_order(admin, "Projector won't turn on", description="Red light, no picture.")

    page = browser("vic")
    page.log_in(viewer)
    page.open(f"/app/work-orders/{order.id}")
    page.see_containing("Red light, no picture.")
    page.shoot("viewer-order")

    buttons = [b.text for b in page.driver.find_elements(By.CSS_SELECTOR, "button") if b.is_displayed()]
    assert not {"Save", "SAVE", "Delete", "DELETE"} & set(buttons), buttons
    fields = page.driver.find_elements(By.CSS_SELECTOR, "input[aria-label], textarea[aria-label]")
    labels = {f.get_attribute("aria-label") for f in fields if f.is_displayed() and f.is_enabled()}
    assert not {"Title", "Description", "Priority", "Status", "Owner"} & labels, labels  # a comment box may be there


async def test_a_long_unbroken_title_wraps_without_a_horizontal_scrollbar(browser, make_person, make_order):
    sam = await make_person(name="Sam Rivera")
    title = "Replace-" + "x" * 180
    order = await make_order(sam, title)

    page = browser("sam")
    page.log_in(sam)
    page.see(title)
    page.shoot("long-title-list")
    assert page.sideways_scroll() <= 0

    page.open(f"/app/work-orders/{order.id}")
    page.see_containing("version 1")
    page.shoot("long-title-order")
    assert page.sideways_scroll() <= 0

    link = "https://intranet.example/photos/" + "a1b2c3d4" * 40  # a pasted link: one long word
    page.fill("Add a comment", f"Photo: {link}")
    page.press("Comment")
    page.see_containing("Photo: https://intranet.example/photos/")
    page.shoot("long-comment")
    assert page.sideways_scroll() <= 0
    assert page.driver.title == f"{title} · Work Order Desk"


async def test_on_a_phone_the_list_gives_each_title_a_line_of_its_own(browser, make_person, make_order):
    admin, sam = await make_person("admin", name="Ada Admin"), await make_person(name="Sam Rivera")
    await make_order(sam, "Heating not working in the loading dock")
    queued = await make_order(admin, "Leaking tap in the north stairwell", owner_id=None)  # the widest row

    page = browser("sam")
    page.hold_as_phone()
    page.log_in(sam)
    title = page.see(queued.title)
    page.see("Assign to me")
    page.shoot("phone-list")
    assert page.sideways_scroll() <= 0
    assert page.run_js(SMALL_BUTTONS) == []  # every button a finger's size
    page.driver.set_window_size(360, 740)  # a small phone
    header = page.run_js("return document.querySelector('.q-header').getBoundingClientRect().height")
    assert header <= 2 * 48  # two rows at most: on a phone the header's buttons are icons
    row = title.find_element(By.XPATH, "./ancestor::*[contains(@class, 'nicegui-row')][1]")
    assert title.size["width"] >= 0.8 * row.size["width"]  # not squeezed beside the chips, the owner and the time
    assert title.size["height"] <= 2 * 28  # so a line or two, not a word or a letter per line


# The visible buttons smaller than 44 by 44 px, by their text or label.
SMALL_BUTTONS = """return [...document.querySelectorAll('button, [role=button]')].filter(b => b.checkVisibility())
    .filter(b => { const r = b.getBoundingClientRect(); return r.width < 44 || r.height < 44; })
    .map(b => b.innerText.trim() || b.getAttribute('aria-label'));"""
HEADER_HEIGHT = "return document.querySelector('.q-header').getBoundingClientRect().height"
DRAWER_EDGES = "const r = document.querySelector('.q-drawer').getBoundingClientRect(); return [r.left, r.right]"
# Each chart's width as a share of the page's content width.
CHART_SHARES = """const page = document.querySelector('.q-page, .nicegui-content').getBoundingClientRect().width;
return [...document.querySelectorAll('.nicegui-echart')].map(chart => chart.getBoundingClientRect().width / page);"""


async def test_on_a_phone_no_screen_scrolls_sideways_or_squeezes_a_column(browser, make_person, make_order):
    ada = await make_person("admin", name="Ada Admin")
    order = await make_order(ada, "Leaking tap in the kitchen", description="Cold tap drips all day.")
    page = browser("ada")
    page.hold_as_phone()
    page.log_in(ada)
    # an admin's seven screens fold into a menu: the header was three rows, 165 px of every screen
    assert page.run_js(HEADER_HEIGHT) <= 2 * 48
    page.driver.find_element(By.CSS_SELECTOR, "button[aria-label='Screens']").click()
    page.click("Audit")
    page.wait_for_path("/app/admin/audit")
    page.driver.set_window_size(375, 812)  # the assistant's drawer covers a smaller phone, and no more
    page.driver.find_element(By.CSS_SELECTOR, "button[aria-label='Assistant']").click()
    page.wait_until(lambda: page.run_js(DRAWER_EDGES) == [0, 375], "the drawer to cover the screen")
    page.shoot("drawer-375")
    assert page.sideways_scroll() == 0
    page.hold_as_phone()
    screens = {
        "/app/admin/users": "Add a person",
        "/app/admin/agents": "Policy",
        "/app/admin/agents/runs": "No runs yet.",
        "/app/admin/audit": "Nothing logged yet.",
        "/app/admin/metrics": "Work orders",
        "/app/profile": "Change password",
        f"/app/work-orders/{order.id}": "Requested by Ada Admin",
        "/app/copilot": "Your runs",
    }
    wide = {}
    for path, text in screens.items():
        page.open(path)
        page.see_containing(text)
        page.shoot(path.rsplit("/", 1)[-1])
        wide[path] = page.sideways_scroll()
        if path == "/app/admin/metrics":  # its charts one under the other, each as wide as the screen allows
            page.wait_until(lambda: len(page.run_js(CHART_SHARES)) >= 3, "the charts")
            widths = page.run_js(CHART_SHARES)
            assert min(widths) > 0.6, widths  # side by side, the bar charts had about a third each
    assert wide == dict.fromkeys(screens, 0)
    assert page.see("Your runs").size["height"] < 40  # on a line of its own, not a word per line beside the chat
    page.open("/app/admin/agents")
    switch, policy = page.see("Triage agent"), page.see("Policy")
    switch_card = switch.find_element(By.XPATH, "./ancestor::*[contains(@class, 'q-card')][1]")
    policy_card = policy.find_element(By.XPATH, "./ancestor::*[contains(@class, 'q-card')][1]")
    assert switch_card.size["width"] == policy_card.size["width"]  # one above the other, each the screen's width


async def test_rows_with_and_without_assign_to_me_keep_their_columns_in_line(browser, make_person, make_order):
    # the button came and went with the row, so a queued order's status and owner sat further left
    sam = await make_person(name="Sam Rivera")
    await make_order(sam, "Mine, worked on by me")
    await make_order(sam, "In the queue", owner_id=None)

    page = browser("sam")
    page.log_in(sam)
    page.see("Assign to me")

    chips = page.driver.find_elements(By.XPATH, "//*[text()[normalize-space(.)='Pending']]")  # both are pending
    lefts = [chip.location["x"] for chip in chips if chip.is_displayed()]
    assert len(lefts) == 2 and lefts[0] == lefts[1], lefts


def shown_with_text(page, text: str) -> int:
    """How many elements on screen read `text` as their own (a hidden badge is not on screen)."""
    found = page.driver.find_elements(By.XPATH, f"//*[normalize-space(text())='{text}']")
    return sum(element.is_displayed() for element in found)


async def test_the_overdue_view_is_kept_in_the_address_and_says_overdue_in_words(browser, make_person, make_order):
    sam = await make_person(name="Sam Rivera")
    now = datetime.now(UTC)  # the desk's own clock: the system's
    await make_order(sam, "Boiler service", dueAt=now - timedelta(hours=2))
    await make_order(sam, "Gutters before spring", dueAt=now + timedelta(days=30))
    await make_order(sam, "Paint the fence")

    page = browser("sam")
    page.hold_as_phone()
    page.log_in(sam)
    page.see("1–3 of 3")
    page.see("Overdue")  # in words on the late one's row, and only there
    assert shown_with_text(page, "Overdue") == 1
    page.choose("Due", "Overdue")
    page.wait_until(lambda: page.query == {"due": ["overdue"]}, "the overdue view in the address")
    page.see("1–1 of 1")
    assert page.texts("a[href^='/app/work-orders/']") == ["Boiler service"]
    page.shoot("overdue-view")
    assert page.sideways_scroll() <= 0

    page.driver.refresh()  # a reload, or the bookmark of this address
    page.see("1–1 of 1")
    assert page.texts("a[href^='/app/work-orders/']") == ["Boiler service"]
    assert page.query == {"due": ["overdue"]}
