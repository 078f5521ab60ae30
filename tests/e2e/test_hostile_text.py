"""A person's text that looks like markup stays text on every page an admin opens, in a real browser.

A requester's title once reached NiceGUI's props parser through the Retry button of a dead-lettered
triage: a quote closed `aria-label` and `onmouseover=` ran in the admin's session. Here one order, its
requester's name, a comment, an admin's name and a copilot conversation carry attribute, tag, Vue template
and JavaScript template payloads; the admin visits every page and none of them becomes markup. The CSP is
tried too: an `onmouseover=` that did get into a page would not run, and the desk itself trips no rule of it.
"""

from collections.abc import Iterator

import pytest
from bson import ObjectId
from selenium.webdriver import ActionChains
from selenium.webdriver.common.by import By

from desk.agent.core.provider import Provider
from desk.agent.triage import task as triage_task
from desk.config import Settings, use_settings
from desk.jobs import backoff
from desk.users import service as users_service
from desk.users.models import UserAdminUpdate
from desk.work_orders import service as work_orders
from desk.work_orders.models import CommentCreate
from tests.e2e.browser import Browser
from tests.e2e.test_copilot import ask
from tests.fake_provider import Turn
from tests.helpers import actor

# `:data-x=` is a prop NiceGUI evaluates as JavaScript; `x="` swallows the rest of the old Retry string.
TITLE = 'Lamp" onmouseover="window.__pwned=1" :data-x="window.__pwned=2" x="'
NAME = "<img src=x onerror=\"window.__pwned=3\"> {{ 'inj' + 'ected' }}"
ADMIN_NAME = "Ada `${window.__pwned=4}` {{ 7*7 }}"
COMMENT = '<script>window.__pwned=5</script> {{ 7*7 }} `${1+1}` Lamp" onmouseover="window.__pwned=6" x="'
QUESTION = '<img src=x onerror="window.__pwned=7"> {{ 7*7 }} what is open?'
ANSWER = "Nothing <img src=x onerror=\"window.__pwned=8\"> {{ 'inj' + 'ected' }} `${window.__pwned=9}`"

# Each page, and the hostile texts it must show as typed.
PAGES = {
    "list": ("/app", [TITLE, NAME]),
    "order": ("/app/work-orders/{order}", [TITLE, NAME, COMMENT]),
    "profile": ("/app/profile", [ADMIN_NAME]),
    "users": ("/app/admin/users", [NAME, ADMIN_NAME]),
    "metrics": ("/app/admin/metrics", []),
    "audit": ("/app/admin/audit", [NAME]),
    "agents": ("/app/admin/agents", [TITLE]),
    "runs": ("/app/admin/agents/runs", [ADMIN_NAME]),
    "run": ("/app/admin/agents/runs/{run}", [QUESTION]),
    "copilot": ("/app/copilot", [QUESTION]),
}
PAGE_READY = "Work Order Desk"  # every page's title ends so; the texts below are awaited as well

FOUND = """return {
    attributes: [...document.querySelectorAll('*')].flatMap(e => [...e.attributes].map(a => a.name))
        .filter(name => /^on/i.test(name) || name === 'data-x' || name === 'x'),
    images: document.querySelectorAll('img[src="x"]').length,
    scripts: [...document.scripts].filter(s => s.textContent.trim().startsWith('window.__pwned')).length,
    pwned: typeof window.__pwned,
    evaluated: document.body.innerText.includes('injected'),  // {{ 'inj' + 'ected' }} run as a Vue template
    violations: window.__cspViolations || [],
}"""
NOTHING = {"attributes": [], "images": 0, "scripts": 0, "pwned": "undefined", "evaluated": False, "violations": []}
# Installed before any page script: every CSP violation the page causes, as "directive: blocked".
WATCH_CSP = """window.__cspViolations = [];
document.addEventListener('securitypolicyviolation',
    e => window.__cspViolations.push(e.effectiveDirective + ': ' + (e.blockedURI || e.sample)));"""


@pytest.fixture
def dead_letters(fake_provider, monkeypatch) -> Iterator[Settings]:
    """Settings under which this process's triage pass dead-letters an order (a refusal is given up at once)."""
    monkeypatch.setattr(backoff, "BASE_SECONDS", 0.0)
    settings = Settings(
        ai_enabled=True,
        ai_base_url=fake_provider.url,
        ai_api_key="sk-e2e-key",
        ai_allow_private_base_url=True,
        agent_max_attempts=1,
    )
    use_settings(settings)
    yield settings
    use_settings(None)


async def test_every_page_shows_hostile_text_as_typed_and_runs_none_of_it(
    browser, make_person, make_order, e2e_db, fake_provider, dead_letters
):
    requester = await make_person(name="Sam Plain")
    admin = await make_person("admin", name=ADMIN_NAME)
    order = await make_order(requester, TITLE, description=COMMENT)
    await work_orders.add_comment(
        db=e2e_db, actor=actor(requester), order_id=order.id, data=CommentCreate(text=COMMENT)
    )
    # renamed by the admin: the audit log names them as they are now
    rename = UserAdminUpdate(name=NAME)
    await users_service.update_user(db=e2e_db, actor=actor(admin), user_id=requester["id"], data=rename)
    # the provider refuses once: the order's triage is dead-lettered and the agents page offers Retry
    fake_provider.script(Turn(status=400, body=b'{"error": {"message": "refused"}}'))
    provider = Provider.from_settings(dead_letters)
    try:
        await triage_task.process_due(e2e_db, dead_letters, provider=provider)
    finally:
        await provider.aclose()

    ada = browser("ada")
    watch = ada.driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": WATCH_CSP})
    try:
        ada.log_in(admin)
        fake_provider.script(Turn.text(ANSWER))
        ask(ada, QUESTION)  # from the drawer, on the list
        ada.see_containing("Nothing <img src=x")
        run = await e2e_db["agent_runs"].find_one({"userId": ObjectId(admin["id"])})
        assert run is not None
        _assert_nothing_injected(ada, "the list with the copilot drawer")

        for name, (path, texts) in PAGES.items():
            ada.open(path.format(order=order.id, run=run["_id"]))
            ada.wait_until(lambda texts=texts: _shows(ada, [PAGE_READY, *texts]), f"the {name} page to show its texts")
            if name == "agents":  # hovered as the attack needed an admin to (again if redrawn meanwhile)
                ada.wait_until(lambda: _hover(ada, '[aria-label^="Retry triage of"]'), "the Retry button hovered")
            if name in ("run", "copilot"):
                ada.see_containing("Nothing <img src=x")  # the model's answer, its markup escaped
            _assert_nothing_injected(ada, name)
            if name == "agents":
                # read again: the page redraws its figures every few seconds, and the button with them
                label = ada.run_js("return document.querySelector('[aria-label^=\"Retry triage of\"]').ariaLabel")
                assert label == f"Retry triage of {TITLE}"  # the whole title, as data
            ada.shoot(name)

        _assert_an_injected_handler_would_not_run(ada)
    finally:
        ada.driver.execute_cdp_cmd("Page.removeScriptToEvaluateOnNewDocument", {"identifier": watch["identifier"]})


def _shows(person: Browser, texts: list[str]) -> bool:
    shown = person.run_js("return document.title + '\\n' + document.body.innerText")
    return all(text in shown for text in texts)


def _assert_nothing_injected(person: Browser, where: str) -> None:
    assert person.run_js(FOUND) == NOTHING, where
    assert not person.alert_open(), where


def _assert_an_injected_handler_would_not_run(person: Browser) -> None:
    """Should an `onmouseover=` ever get into a page, the CSP keeps it inert (and says it did)."""
    blocked = person.run_js(
        """const target = document.querySelector('header') || document.body;
        target.setAttribute('onmouseover', 'window.__pwned = "handler"');
        target.dispatchEvent(new MouseEvent('mouseover', {bubbles: true}));
        target.removeAttribute('onmouseover');
        return new Promise(done => setTimeout(() => done({
            pwned: typeof window.__pwned,
            violations: window.__cspViolations.filter(v => v.startsWith('script-src-attr')).length,
        }), 200));"""
    )
    assert blocked == {"pwned": "undefined", "violations": 1}


def _hover(browser: Browser, css: str) -> bool:
    """Move the mouse over the element matching `css`; the page's redraw replacing it on the way raises stale."""
    found = browser.driver.find_elements(By.CSS_SELECTOR, css)
    if found:
        ActionChains(browser.driver).move_to_element(found[0]).perform()
    return bool(found)
