"""No lost typing, in a real browser: Ctrl+S saves an order, leaving it with an unsaved edit asks first; and what
the browser keeps of the typing goes with the session it was typed in."""

import asyncio
import time
from datetime import UTC, datetime, timedelta

from selenium.webdriver.common.keys import Keys

from desk.users import service as users_service
from desk.users.models import UserAdminUpdate
from tests.e2e.browser import Browser
from tests.helpers import actor


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


# Drafts belong to their session (issue 39): what the browser keeps of a person's typing goes with the session.

DRAFTS = """return Object.fromEntries(Object.keys(localStorage).filter((key) => key.startsWith('desk-draft:'))
    .map((key) => [key, JSON.parse(localStorage.getItem(key))]))"""
BROWSERS_SESSION = "return localStorage.getItem('desk-drafts-owner')"
HOUR_MS = 60 * 60 * 1000
SESSION_CHECK = 5.0  # seconds an open page may take to notice its session ended (the frame checks every 3 s)


def drafts(page: Browser) -> dict[str, dict]:
    """What this browser keeps of anyone's typing, as any script on the desk's origin could read it."""
    return page.run_js(DRAFTS)


def type_a_draft(page: Browser, order, text: str) -> dict:
    """On `order`'s page, type `text` as its title without saving; the draft the browser kept of it."""
    page.open(f"/app/work-orders/{order.id}")
    page.see_containing("version 1")
    page.fill("Title", text)
    kept = page.wait_until(
        lambda: [d for d in drafts(page).values() if d["edits"].get("title") == text], "the edit kept in the browser"
    )
    return kept[0]


async def test_a_draft_goes_when_its_session_ends_even_for_the_same_person(browser, make_person, make_order, e2e_db):
    sam = await make_person(name="Sam Rivera")
    order = await make_order(sam, "Leaking tap")
    page: Browser = browser("sam")
    page.log_in(sam)
    draft = type_a_draft(page, order, "Leaking tap, flat 4B")
    (stored,) = await e2e_db["sessions"].find({}).to_list()
    cookies = [cookie["value"] for cookie in page.driver.get_cookies()]
    assert draft["owner"] not in stored["_id"] and not any(draft["owner"] in value for value in cookies)

    page.open(f"/app/work-orders/{order.id}")  # a reload while the session lives: the edit is back
    page.see_containing("Your unsaved edit was kept in this browser")
    assert page.field("Title").get_attribute("value") == "Leaking tap, flat 4B"

    # the session goes idle: the next page load drops the draft, before anyone logs in again
    await e2e_db["sessions"].update_many({}, {"$set": {"idleExpiresAt": datetime.now(UTC) - timedelta(minutes=1)}})
    page.open(f"/app/work-orders/{order.id}")
    page.wait_for_path("/login")
    page.see_containing("Edits you had not saved went with it")
    page.wait_until(lambda: drafts(page) == {}, "the ended session's draft dropped")

    page.log_in(sam)  # Sam again, in a new session: what he typed in the old one is not his to find
    page.open(f"/app/work-orders/{order.id}")
    page.see_containing("version 1")
    assert page.field("Title").get_attribute("value") == "Leaking tap"
    assert drafts(page) == {}


async def test_someone_else_signing_in_on_the_same_browser_finds_nothing_of_the_drafts(
    browser, make_person, make_order, e2e_db
):
    sam, ada = await make_person(name="Sam Rivera"), await make_person("admin", name="Ada Admin")
    order = await make_order(sam, "Leaking tap")
    page: Browser = browser("shared-desk")
    page.log_in(sam)
    sams = type_a_draft(page, order, "Leaking tap, key under the mat")

    # an admin deactivates Sam while he is away from the desk: his page goes to the login page by itself
    await users_service.update_user(db=e2e_db, actor=actor(ada), user_id=sam["id"], data=UserAdminUpdate(active=False))
    page.wait_for_path("/login", timeout=SESSION_CHECK)
    page.wait_until(lambda: drafts(page) == {}, "Sam's draft dropped at the login page")

    page.log_in(ada)
    page.open(f"/app/work-orders/{order.id}")
    page.see_containing("version 1")
    assert page.field("Title").get_attribute("value") == "Leaking tap"
    assert drafts(page) == {}

    # a draft of another session found in the browser anyway (a tab of Sam's left open): dropped on a page load
    planted = f"localStorage.setItem('desk-draft:{sam['id']}:{order.id}', JSON.stringify(arguments[0]))"
    page.driver.execute_script(planted, sams)
    page.open("/app")
    page.see("Ada Admin")
    page.wait_until(lambda: drafts(page) == {}, "another session's draft dropped")


async def test_a_draft_is_kept_a_day_at_most(browser, make_person, make_order):
    sam = await make_person(name="Sam Rivera")
    order = await make_order(sam, "Leaking tap")
    page: Browser = browser("sam")
    page.log_in(sam)
    type_a_draft(page, order, "Leaking tap, typed yesterday")
    page.fill("Add a comment", "Typed this morning")
    page.wait_until(lambda: len(drafts(page)) == 2, "the comment kept too")
    page.driver.execute_script(
        """for (const [key, back] of Object.entries(arguments[0])) {
             const kept = JSON.parse(localStorage.getItem(key));
             localStorage.setItem(key, JSON.stringify({...kept, at: kept.at - back}));
           }""",
        {
            f"desk-draft:{sam['id']}:{order.id}": 25 * HOUR_MS,
            f"desk-draft:{sam['id']}:{order.id}:comment": 23 * HOUR_MS,
        },
    )

    page.open(f"/app/work-orders/{order.id}")
    page.wait_until(lambda: page.field("Add a comment").get_attribute("value") == "Typed this morning", "the comment")
    assert list(drafts(page)) == [f"desk-draft:{sam['id']}:{order.id}:comment"]  # the day-old edit is gone
    assert page.field("Title").get_attribute("value") == "Leaking tap"
    page.do_not_see("Your unsaved edit was kept in this browser and is back in the form. Save to keep it.")


# Types into the title field every 50 ms, as a person still typing in the tab would: each change is sent to the desk.
KEEP_TYPING = """const input = document.querySelector("input[aria-label='Title']");
window.typing = setInterval(() => {
  input.value = input.value + '.';
  input.dispatchEvent(new Event('input', {bubbles: true}));
}, 50);"""


async def test_log_out_and_discard_in_one_tab_and_the_others_stop_keeping_and_promising(
    browser, make_person, make_order
):
    sam = await make_person(name="Sam Rivera")
    order = await make_order(sam, "Leaking tap")
    page: Browser = browser("sam")
    page.log_in(sam)
    typing_tab = page.driver.current_window_handle
    type_a_draft(page, order, "Leaking tap, still typing")
    page.wait_until(lambda: would_ask_before_leaving(page), "the tab to ask before it is left")
    page.run_js(KEEP_TYPING)  # Sam goes on typing in this tab while he logs out in another
    page.open_window()
    page.open("/app")
    page.see("Sam Rivera")

    page.press("Log out")
    page.see("You have changes on 1 work order that are not saved.")
    page.press("Log out")  # in the dialog: log out and discard them
    page.use_window(typing_tab)
    page.wait_until(lambda: page.run_js(BROWSERS_SESSION) is None, "the logout to forget the drafts", timeout=2)
    page.wait_until(lambda: drafts(page) == {}, "the drafts forgotten here too", timeout=2)
    assert not would_ask_before_leaving(page)  # this tab no longer says the typing is kept
    kept_again, watched = [], time.monotonic()
    while page.path.startswith("/app/work-orders/") and time.monotonic() - watched < SESSION_CHECK:
        kept_again += drafts(page).values()  # the typing goes on reaching the desk until it closes this tab
        await asyncio.sleep(0.05)
    assert kept_again == []

    page.wait_for_path("/login", timeout=SESSION_CHECK)
    assert page.query["reason"] == ["ended"]
    page.see_containing("Edits you had not saved went with it")
    assert drafts(page) == {}
