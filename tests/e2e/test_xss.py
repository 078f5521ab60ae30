"""Titles that look like markup stay text in a real browser: in the list, on the detail page and in its timeline."""

from desk.work_orders import service
from desk.work_orders.models import WorkOrderUpdate
from tests.e2e.browser import Browser
from tests.helpers import actor

PAYLOADS = (
    '<img src=x onerror="window.__xss=1">',
    "<script>window.__xss=2</script>",
    "**bold**<script>window.__xss=3</script>",
)
ORDER_LINKS = "a[href^='/app/work-orders/']"


async def test_titles_in_the_list_are_shown_as_typed(browser, make_person, make_order):
    person = await make_person(name="Pat Payload")
    for title in PAYLOADS:
        await make_order(person, title)

    pat = browser("pat")
    pat.log_in(person)
    pat.see("1–3 of 3")

    assert sorted(pat.texts(ORDER_LINKS)) == sorted(PAYLOADS)
    for title in PAYLOADS:
        pat.see(title)
    _assert_nothing_injected(pat)
    pat.shoot("list")


async def test_titles_on_the_detail_page_and_in_its_timeline_are_shown_as_typed(
    browser, make_person, make_order, e2e_db
):
    person = await make_person(name="Pat Payload")
    orders = []
    for number, title in enumerate(PAYLOADS, start=1):
        order = await make_order(person, f"Plain title {number}")
        update = WorkOrderUpdate(version=order.version, title=title)  # the timeline shows changed titles
        orders.append(await service.update(db=e2e_db, actor=actor(person), order_id=order.id, data=update))

    pat = browser("pat")
    pat.log_in(person)
    for number, order in enumerate(orders, start=1):
        pat.open(f"/app/work-orders/{order.id}")
        pat.see(order.title)
        pat.see(f"Title: “Plain title {number}” → “{order.title}”")
        assert pat.field("Title").get_attribute("value") == order.title
        _assert_nothing_injected(pat)
        pat.shoot(f"detail-{number}")


def _assert_nothing_injected(person: Browser) -> None:
    found = person.run_js(
        """return {
            images: document.querySelectorAll('img[src="x"]').length,
            scripts: [...document.scripts].filter(s => s.textContent.trim().startsWith('window.__xss')).length,
            bold: [...document.querySelectorAll('b, strong')].filter(e => e.textContent.includes('bold')).length,
            xss: typeof window.__xss,
        }"""
    )
    assert found == {"images": 0, "scripts": 0, "bold": 0, "xss": "undefined"}
    assert not person.alert_open()
