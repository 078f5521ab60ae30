"""Two people in real browsers through nginx, each kept on a different web process of the same desk.

The journey of tests/e2e, but behind deploy/nginx.conf: log in, the work-order list, a new order, and
that order appearing live on a screen the OTHER process serves (its NiceGUI page, websocket and all).
"""

from collections.abc import Iterator

import pytest

from tests.deploy.conftest import CSRF, Stack, logged_in
from tests.e2e.browser import Browser, Screenshots
from tests.e2e.conftest import SCREENSHOTS, Chromes, _is_error, _require_chromium
from tests.helpers import PASSWORD

LIVE = 5.0  # seconds a change made elsewhere may take to show on an open screen, as in tests/e2e


@pytest.fixture(scope="module")
def chromes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Chromes]:
    _require_chromium()
    pool = Chromes(tmp_path_factory.mktemp("chrome"))
    yield pool
    pool.quit_all()


def test_an_order_made_on_one_process_shows_live_on_a_screen_the_other_serves(
    stack: Stack, chromes: Chromes, request: pytest.FixtureRequest
):
    robin_person, vera_person = _people(stack, ("Robin Maker", "user"), ("Vera Viewer", "viewer"))
    logs = {desk.port: desk.log.stat().st_size for desk in stack.desks}
    shots = Screenshots(SCREENSHOTS, request.node.name)
    robin = Browser(chromes.take(), stack.url, "robin", shots)
    vera = Browser(chromes.take(), stack.url, "vera", shots)
    try:
        robin.log_in(robin_person)  # nginx picks Robin's process and sets the cookie that keeps him there
        robin.see("No work orders yet. Create the first one with “New work order” (or press n).")
        robin_route = robin.driver.get_cookie("desk_route")["value"]
        (robin_process,) = stack.nginx.upstreams(robin_route)
        (vera_process,) = set(stack.routes) - {robin_process}
        vera.open("/healthz")  # a page of the origin, so the browser takes a cookie for it
        vera.driver.add_cookie({"name": "desk_route", "value": stack.routes[vera_process], "path": "/"})
        vera.log_in(vera_person)
        vera.run_js("window.__sameLoad = true")  # gone if the page reloads

        robin.press("New work order")
        robin.fill("Title", "Window latch broken in room 12")
        with robin.expect_notification("Created “Window latch broken in room 12”"):
            robin.press("Create")
        robin.see("1–1 of 1")

        vera.see("Window latch broken in room 12", timeout=LIVE)
        assert vera.run_js("return window.__sameLoad") is True  # pushed over her websocket, not reloaded
        vera.shoot("seen-live")
    except Exception:
        robin.shoot("FAILED")
        vera.shoot("FAILED")
        raise
    finally:
        for person in (robin, vera):
            person.open("/healthz")  # leaves the page: nginx logs its websocket as it closes
            chromes.give_back(person.driver, stack.url)

    # Every request of each browser, its page's websocket included, went to its own process alone.
    served = {robin_route: robin_process, stack.routes[vera_process]: vera_process}
    assert {route: stack.nginx.upstreams(route) for route in served} == {r: {p} for r, p in served.items()}
    assert all(_websockets(stack, route) for route in served)
    assert robin_process != vera_process
    for desk in stack.desks:
        with desk.log.open() as log:
            log.seek(logs[desk.port])
            errors = [line for line in log.read().splitlines() if _is_error(line)]
        assert not errors, f"the desk on port {desk.port} logged errors:\n" + "\n".join(errors)


def _people(stack: Stack, *names_and_roles: tuple[str, str]) -> list[dict]:
    """People who can log in, made by the admin through nginx (one login: the throttle counts them)."""
    people = []
    with logged_in(stack, next(iter(stack.routes.values()))) as admin:
        for name, role in names_and_roles:
            email = f"{name.split(maxsplit=1)[0].lower()}@example.com"
            body = {"email": email, "name": name, "role": role, "password": PASSWORD}
            assert admin.post("/api/v1/admin/users", json=body, headers=CSRF).status_code == 201
            people.append({"email": email, "name": name, "password": PASSWORD})
    return people


def _websockets(stack: Stack, route: str) -> list[str]:
    """The NiceGUI websocket requests nginx passed for `route` (logged when each closes)."""
    lines = [line.split(" ", 2) for line in stack.nginx.access_log.read_text().splitlines()]
    return [uri for cookie, _, uri in lines if cookie == route and uri.startswith("/_nicegui_ws/")]
