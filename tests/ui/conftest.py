"""UI tests: NiceGUI's `user` fixture drives the real pages against the test database."""

from collections.abc import Awaitable, Callable, Sequence
from functools import partialmethod

import pytest
from nicegui import context, ui
from nicegui.testing import User

from desk.db.client import use_database
from desk.work_orders import service
from desk.work_orders.models import CommentCreate, WorkOrderRead
from tests.helpers import PASSWORD, actor

# should_see retries (0.1 s each) for outcomes that wait on the database or password hashing,
# which take longer than the default 0.3 s when both cores are busy.
WAIT = 50


@pytest.fixture(autouse=True)
def _patient_user(monkeypatch: pytest.MonkeyPatch) -> None:
    # What a person would see after a click often waits on the database or password hashing; on two
    # busy cores that can take longer than should_see's default 0.3 s. Wait up to WAIT instead.
    monkeypatch.setattr(User, "should_see", partialmethod(User.should_see, retries=WAIT))
    # And for what must go away (0.05 s a retry): up to 5 s too. No check gets weaker: it answers as soon as
    # the page does not show the thing, as before; only a page slow to take it away is waited for.
    monkeypatch.setattr(User, "should_not_see", partialmethod(User.should_not_see, retries=2 * WAIT))


@pytest.fixture(autouse=True)
def _navigation_goes_to_the_page_that_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    """NiceGUI's simulated browsers share one `ui.navigate`: reading any attribute of a User puts that User's there,
    and a simulated browser answering a page's JavaScript reads its own. So a page that navigates after an await
    (the login, after hashing the password) could send another person's browser onwards while its own stayed put.
    Each navigation goes to the browser whose page asked, as it would over that page's own socket."""
    users: list[User] = []
    last: list[User] = []  # the User read last: the simulation's own choice, when no page is asking
    remember = User.__init__

    def init(self: User, *args, **kwargs) -> None:
        remember(self, *args, **kwargs)
        users.append(self)

    class PageNavigate:
        def __getattr__(self, name: str):
            try:
                asking = context.client
            except RuntimeError:  # not inside a page
                asking = None
            pages = {id(object.__getattribute__(u, "client")): u for u in users}
            owner = pages.get(id(asking)) if asking is not None else None
            chosen = owner or (last[-1] if last else users[-1])
            return getattr(object.__getattribute__(chosen, "navigate"), name)

    navigate = PageNavigate()

    def getattribute(self: User, name: str):
        if name not in {"notify", "navigate", "download"}:
            last[:] = [self]
            ui.navigate = navigate
            ui.notify = object.__getattribute__(self, "notify")
            ui.download = object.__getattribute__(self, "download")
        return object.__getattribute__(self, name)

    monkeypatch.setattr(User, "__init__", init)
    monkeypatch.setattr(User, "__getattribute__", getattribute)


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


async def open_order(user: User, order_id: str) -> None:
    """Open the page and wait until it is fully drawn (the timeline comes last)."""
    await user.open(f"/app/work-orders/{order_id}")
    await user.should_see(marker="timeline", retries=WAIT)


@pytest.fixture
async def sam(make_user) -> dict:
    """Sam Rivera, a user."""
    return await make_user("user", name="Sam Rivera")


@pytest.fixture
def open_sams_order(user: User, sam: dict, make_order, log_in, db) -> Callable[..., Awaitable[WorkOrderRead]]:
    """Sam files an order titled `title` and adds `comments` to it, then logs in and opens its page; gives the order."""

    async def open_it(title: str, *, comments: Sequence[str] = (), **fields: object) -> WorkOrderRead:
        order = await make_order(sam, title, **fields)
        for text in comments:
            await service.add_comment(db=db, actor=actor(sam), order_id=order.id, data=CommentCreate(text=text))
        await log_in(user, sam)
        await open_order(user, order.id)
        return order

    return open_it


async def text_shown_as_typed(user: User, label: ui.element) -> str:
    """`label`'s text, once sure it is a plain label and nothing on the page is drawn as HTML or Markdown."""
    assert isinstance(label, ui.label)
    await user.should_not_see(kind=ui.html, retries=WAIT)
    await user.should_not_see(kind=ui.markdown, retries=WAIT)
    return label.text
