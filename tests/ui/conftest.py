"""UI tests: NiceGUI's `user` fixture drives the real pages against the test database."""

from collections.abc import Awaitable, Callable
from functools import partialmethod

import pytest
from nicegui.testing import User

from desk.db.client import use_database
from tests.helpers import PASSWORD

# should_see retries (0.1 s each) for outcomes that wait on the database or password hashing,
# which take longer than the default 0.3 s when both cores are busy.
WAIT = 50


@pytest.fixture(autouse=True)
def _patient_user(monkeypatch: pytest.MonkeyPatch) -> None:
    # What a person would see after a click often waits on the database or password hashing; on two
    # busy cores that can take longer than should_see's default 0.3 s. Wait up to WAIT instead.
    monkeypatch.setattr(User, "should_see", partialmethod(User.should_see, retries=WAIT))


@pytest.fixture(autouse=True)
def _pages_use_the_test_database(db, settings) -> None:
    # autouse: set up before the `user` fixture starts the app and its live feed
    use_database(db)


@pytest.fixture
def log_in() -> Callable[[User, dict], Awaitable[None]]:
    """Log a person in through the login page, as they would."""

    async def login(user: User, person: dict, *, landing: str = "/login") -> None:
        await user.open(landing)
        submit(user, person["email"], PASSWORD)
        await user.should_see(marker="current-user", retries=WAIT)

    return login


def submit(user: User, email: str, password: str) -> None:
    """Fill in the login form and press Log in."""
    user.find(marker="email").clear().type(email)
    user.find(marker="password").clear().type(password)
    user.find(marker="login").click()
