"""An open page obeys the session as strictly as the API: it acts as the person is now, and closes when they may not.

Several tests neutralise the redirect the desk sends, as a hostile browser would: what must hold then
is on the server (nothing written, the page no longer served).
"""

import base64
import json
from datetime import timedelta

import pytest
from bson import ObjectId
from nicegui import Client, nicegui
from nicegui.testing import User

from components import frame
from components.runtime import session
from desk.auth import service as auth_service
from desk.config import Settings, use_settings
from desk.users import service as users_service
from desk.users.models import UserAdminUpdate
from tests.helpers import PASSWORD, actor, until
from tests.ui.conftest import WAIT

NEW_PASSWORD = "a fresh passphrase for Bo"


@pytest.fixture
def slow_check(monkeypatch):
    """The frame's session check waits an hour: only what a handler does is in play."""
    monkeypatch.setattr(frame, "SESSION_CHECK_SECONDS", 3600)


def neutralise_redirects(browser: User, monkeypatch) -> None:
    """The browser ignores the desk's request to go elsewhere (as a tampered page would)."""
    monkeypatch.setattr(browser.navigate, "to", lambda *args, **kwargs: None)


async def closed(client: Client) -> None:
    """The page is no longer served: gone from NiceGUI's clients, so its socket's events are dropped."""
    await until(lambda: client.is_deleted and client.id not in Client.instances, what="the page to close")


def click_message(client: Client, marker: str) -> dict:
    """What a browser that kept the page would send over its socket when the element with `marker` is clicked."""
    element = next(e for e in client.elements.values() if marker in e._markers)
    listener_id = next(iter(element._event_listeners))
    return {"client_id": client.id, "id": element.id, "listener_id": listener_id, "args": []}


async def test_a_deactivated_persons_open_page_saves_nothing(
    user: User, sam, open_sams_order, change_user, db, slow_check, monkeypatch
):
    order = await open_sams_order("Leaking tap")
    page = user.client
    neutralise_redirects(user, monkeypatch)

    await change_user(sam, active=False)
    user.find(marker="edit-title").clear().type("Written after deactivation")
    user.find(marker="save").click()

    await closed(page)
    stored = await db["work_orders"].find_one({"_id": ObjectId(order.id)})
    assert (stored["title"], stored["version"]) == ("Leaking tap", 1)


async def test_a_page_whose_session_ended_is_closed_on_the_server(user: User, sam, open_sams_order, db, monkeypatch):
    order = await open_sams_order("Leaking tap")
    page = user.client
    neutralise_redirects(user, monkeypatch)
    user.find(marker="edit-title").clear().type("Written after logout")
    save = click_message(page, "save")

    await auth_service.end_sessions(db=db, user_id=ObjectId(sam["id"]))  # logged out in another tab
    await closed(page)
    nicegui._on_event("sid", save)

    assert (await db["work_orders"].find_one({"_id": ObjectId(order.id)}))["title"] == "Leaking tap"


async def test_a_demoted_admins_open_users_page_cannot_reset_a_password(
    user: User, make_user, log_in, db, slow_check, monkeypatch
):
    ann = await make_user("admin", email="ann@example.com", name="Ann")
    bo = await make_user("admin", email="bo@example.com", name="Bo")
    await log_in(user, ann)
    await user.open("/app/admin/users")
    await user.should_see(marker="user-row", retries=WAIT)
    page = user.client

    await users_service.update_user(db=db, actor=actor(bo), user_id=ann["id"], data=UserAdminUpdate(role="viewer"))
    with user.scope(marker="user:bo@example.com"):
        user.find(marker="reset").click()
    await user.should_see(marker="reset-dialog", retries=WAIT)
    user.find(marker="reset-password").type(NEW_PASSWORD)
    user.find(marker="reset-save").click()

    await user.should_see(marker="forbidden", retries=WAIT)  # the same page again, as the viewer she is now
    await closed(page)
    done = await auth_service.login(db=db, email=bo["email"], password=PASSWORD, ip="test")
    assert done.user["role"] == "admin"  # Bo's password is the one he chose


async def test_a_demoted_admins_metrics_stop_at_the_next_change(
    user: User, make_user, make_order, log_in, db, slow_check
):
    ann, bo = await make_user("admin"), await make_user("admin")
    await log_in(user, ann)
    await user.open("/app/admin/metrics")
    await user.should_see(marker="total", retries=WAIT)

    await users_service.update_user(db=db, actor=actor(bo), user_id=ann["id"], data=UserAdminUpdate(role="user"))
    await make_order(bo, "A change the metrics follow")

    await user.should_see(marker="forbidden", retries=WAIT)


async def test_an_open_page_does_not_keep_its_session_from_going_idle(
    user: User, make_user, log_in, db, monkeypatch, settings, clock
):
    monkeypatch.setattr(frame, "SESSION_CHECK_SECONDS", 0.05)
    checks, check = [], auth_service.user_for_session

    async def counted(**kwargs):
        checks.append(kwargs.get("touch", True))
        return await check(**kwargs)

    sam = await make_user("user")
    await log_in(user, sam)
    await user.should_see(marker="current-user", retries=WAIT)
    idle_until = (await db["sessions"].find_one({}))["idleExpiresAt"]
    monkeypatch.setattr(auth_service, "user_for_session", counted)
    clock.move(idle_until - clock.now() - timedelta(minutes=1))  # nothing done since the login: a minute left
    await until(lambda: checks.count(False) >= 2, what="the open page to check its session twice")

    clock.move(timedelta(minutes=1))  # the page's checks never pushed the limit forward
    await user.should_see(marker="login", retries=WAIT)
    assert (await db["sessions"].find_one({}))["idleExpiresAt"] == idle_until


async def test_a_cookie_planted_before_login_gives_its_planter_nothing(user: User, create_user, make_user, log_in):
    sam = await make_user("user", name="Sam Rivera")
    planter = create_user()
    await planter.open("/login")
    planted = next(cookie for cookie in planter.http_client.cookies.jar if cookie.name == "session")
    user.http_client.cookies.set("session", planted.value, domain=planted.domain)

    await log_in(user, sam)
    await user.should_see("Sam Rivera")

    now_used = [cookie.value for cookie in user.http_client.cookies.jar if cookie.name == "session"]
    assert [_browser_id(value) for value in now_used] != [_browser_id(planted.value)]  # a new storage slot
    await planter.open("/app/profile")
    await planter.should_see(marker="login", retries=WAIT)
    await planter.should_not_see("Sam Rivera")


async def test_behind_https_the_login_sets_a_secure_session_long_cookie(user: User, make_user, db, settings):
    use_settings(Settings(**{**settings.model_dump(), "desk_public_https": True}))
    sam = await make_user("user")
    await user.open("/login")
    browser = _browser_id(user.http_client.cookies["session"])
    ticket = await auth_service.login_ticket(db=db, email=sam["email"], password=PASSWORD, ip="test", browser=browser)

    response = await user.http_client.get(f"{session.SIGNED_IN_PATH}?ticket={ticket}&redirect_to=/app")

    assert response.status_code == 303 and response.headers["location"] == "/app"
    cookie = next(c for c in response.headers.get_list("set-cookie") if "desk_session" in c)
    assert cookie.startswith("__Host-desk_session=")
    attributes = {part.strip().split("=")[0].lower(): part for part in cookie.split(";")[1:]}
    assert {"secure", "httponly", "path"} <= attributes.keys() and "samesite=lax" in cookie.lower()
    assert attributes["max-age"].strip() == f"Max-Age={settings.desk_session_max_hours * 3600}"
    again = await user.http_client.get(f"{session.SIGNED_IN_PATH}?ticket={ticket}&redirect_to=/app")
    assert again.headers["location"].startswith("/login") and "desk_session" not in again.headers.get("set-cookie", "")


def _browser_id(cookie: str) -> str:
    """NiceGUI's browser id inside its signed session cookie (base64 JSON, then the signature)."""
    payload = cookie.strip('"').split(".")[0]
    return json.loads(base64.b64decode(payload + "=" * (-len(payload) % 4)))["id"]
