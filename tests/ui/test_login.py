"""The login page and the session in the browser."""

import pytest
from bson import ObjectId
from nicegui.testing import User

from components.frame import SESSION_CHECK_SECONDS
from components.runtime.session import safe_target
from desk.auth import service as auth_service
from desk.config import use_settings
from tests.helpers import PASSWORD, until
from tests.ui.conftest import WAIT, submit


async def test_logging_in_lands_on_the_work_orders(user: User, make_user, log_in):
    sam = await make_user("user", name="Sam Rivera")
    await log_in(user, sam)
    await user.should_see("Sam Rivera")
    await user.should_see("Work orders")


async def test_a_protected_page_sends_you_to_login_and_back(user: User, make_user, make_order):
    sam = await make_user("user")
    order = await make_order(sam, "Leaking tap")

    await user.open(f"/app/work-orders/{order.id}")
    await user.should_see(marker="login", retries=WAIT)
    submit(user, sam["email"], PASSWORD)

    await user.should_see(marker="detail-title", retries=WAIT)
    await user.should_see("Leaking tap")


async def test_wrong_password_says_so_and_never_which_part(user: User, make_user):
    sam = await make_user("user")
    await user.open("/login")
    submit(user, sam["email"], "not the password")
    await user.should_see(
        "Wrong email or password. After a few failed attempts, each further try from this address has to wait "
        "a little longer."
    )


async def test_after_three_failures_the_next_try_is_told_to_wait(user: User, make_user, db, clock):
    sam = await make_user("user")
    await user.open("/login")
    for attempt in range(1, 4):
        submit(user, sam["email"], "not the password")
        # each click is handled before the next (a click while the page still checks the last is not taken)
        await until(lambda n=attempt: _answered(user, db, sam["email"], n), what=f"failed login {attempt} answered")
    # the clock stands still: the second's wait after the third failure has not passed, however slow the clicks
    submit(user, sam["email"], PASSWORD)
    await user.should_see("Too many failed logins with this email from this address; try again in", retries=WAIT)
    await until(lambda: _login_pressable(user), what="the refused login answered")
    await user.should_not_see(marker="current-user")


async def test_rate_limit_message(user: User, make_user, settings, db, clock):
    use_settings(settings.model_copy(update={"desk_login_attempts_per_minute": 1}))
    sam = await make_user("user")
    await user.open("/login")  # the budget is per clock minute: the test's clock stands still in one
    submit(user, sam["email"], "not the password")
    await until(lambda: _answered(user, db, sam["email"], 1), what="the failed login answered")
    submit(user, sam["email"], PASSWORD)
    await user.should_see("Too many login attempts from this address; try again in", retries=WAIT)


@pytest.mark.parametrize(
    "query",
    [
        "//evil.example/phish",
        "%2F%09%2Fexample.com%2Fphish",  # the tab is stripped by the browser: //example.com/phish
        "%2F%0A%2Fexample.com%2Fphish",
        "%2F%0D%2Fexample.com%2Fphish",
        "%2F%5C%2Fexample.com%2Fphish",
        "https%3A%2F%2Fexample.com%2Fphish",
    ],
)
async def test_redirect_to_never_leaves_the_desk(query, user: User, make_user):
    sam = await make_user("user")
    await user.open(f"/login?redirect_to={query}")
    submit(user, sam["email"], PASSWORD)
    await user.should_see(marker="current-user")
    await user.should_see("Work orders")


# What reaches safe_target is the query value already percent-decoded by the framework.
@pytest.mark.parametrize(
    "hostile",
    [
        None,
        "",
        "app",
        "//example.com",
        "/\t/example.com",
        "/\t/example.com/phish",
        "/\n/example.com",
        "/\r/example.com",
        "/\r\n/example.com",
        "\t//example.com",
        "/\\example.com",
        "\\/example.com",
        "/ /example.com",
        "/\x00/example.com",
        "/\x0b/example.com",
        "/\u00a0/example.com",
        "/app\n",
        "/app/%zz",
        "/app#//example.com",
        "https://example.com/phish",
        "javascript:alert(1)",
        "/app/work-orders/\u00e9",
    ],
)
def test_safe_target_refuses_anything_but_a_plain_path_on_this_desk(hostile):
    assert safe_target(hostile) == "/app"


@pytest.mark.parametrize(
    "path",
    [
        "/",
        "/app",
        "/app/work-orders/65f0c0ffee0000000000abcd?x=1",
        "/app/work-orders?q=leaking%20tap&status=open",
        "/app/admin/users?offset=25&limit=25",
        "/%09/example.com",  # an encoded tab stays in the path: the browser asks this desk for it
    ],
)
def test_safe_target_keeps_a_path_on_this_desk(path):
    assert safe_target(path) == path


async def test_logging_out_ends_the_session_in_every_tab(user: User, make_user, log_in, db):
    sam = await make_user("user")
    await log_in(user, sam)
    await user.should_see(marker="current-user")

    # Another tab of this browser logs out: the session ends on the server.
    await db["sessions"].delete_many({})

    await user.should_see(marker="login", retries=int(SESSION_CHECK_SECONDS * 10) + 20)


async def test_log_out_button(user: User, make_user, log_in, db):
    sam = await make_user("user")
    await log_in(user, sam)
    user.find(marker="logout").click()
    await user.should_see(marker="login", retries=WAIT)
    assert await db["sessions"].count_documents({}) == 0
    await user.open("/app")
    await user.should_see(marker="login", retries=WAIT)


async def test_an_expired_session_lands_on_login(user: User, make_user, log_in, db):
    sam = await make_user("user")
    await log_in(user, sam)
    await auth_service.end_sessions(db=db, user_id=ObjectId(sam["id"]))
    await user.open("/app")
    await user.should_see(marker="login", retries=WAIT)


async def _answered(user: User, db, email: str, failures: int) -> bool:
    """The page is done with the failed login that made `failures`: counted, and Log in can be pressed again
    (the failure is stored before the page has finished with it, and Log in is off meanwhile)."""
    return await _failures(db, email, failures) and _login_pressable(user)


def _login_pressable(user: User) -> bool:
    """The page is done with the last login: Log in is off while it checks one."""
    return all(button.enabled for button in user.find(marker="login").elements)


async def _failures(db, email: str, expected: int) -> bool:
    stored = await db["users"].find_one({"email": email})
    return stored["failedLoginCount"] == expected
