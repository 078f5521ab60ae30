"""/app/admin/users: admins add people, find them by name or email, edit their name and email, set their role,
AI access and whether they may log in, reset passwords; everyone sorted by name, with their last login.
Each person's row and its dialogs are components/people/person_row.py.

What other admins change (and the logins people make) shows up while the page is open."""

from nicegui import APIRouter, Client, ui
from pydantic import ValidationError

from components.fields import clear_problems, new_password, password_problem, show_problems
from components.once import one_at_a_time
from components.paging import last_page, pager
from components.people.person_row import UserRow
from components.runtime import session
from components.runtime.page import desk_page
from desk.actors import Actor
from desk.db.client import get_db
from desk.errors import DeskError
from desk.labels import ROLE_LABELS, ROLE_NOUNS
from desk.schema import OffsetPage
from desk.users import service as users_service
from desk.users.models import UserCreate, UserQuery, UserRead

router = APIRouter()
PAGE_SIZE = 25
FOLLOW_SECONDS = 3.0  # how often an open list reads its page again, to show what changed meanwhile


@desk_page(router, "/app/admin/users", title="Users", admin=True, heading=True)
async def admin_users_page(visit: session.Visit, me: session.SessionUser) -> None:
    screen = UsersScreen(visit)
    screen.new_user_form()
    await screen.build_list()
    ui.timer(FOLLOW_SECONDS, screen.follow)


class UsersScreen:
    """The form to add a person above the list of everyone, by name."""

    def __init__(self, visit: session.Visit) -> None:
        self.visit = visit
        self.page = 1
        self.q: str | None = None
        self.rows: list[UserRow] = []
        self.total = 0
        self.latest = 0  # reads overlap (a search typed, a page turned, the timer): only the newest may draw

    def new_user_form(self) -> None:
        with ui.card().classes("w-full gap-2").mark("new-user"):
            ui.label("Add a person").classes("text-lg font-semibold")
            with ui.row().classes("w-full items-start gap-3"):
                email = ui.input("Email").props("autocomplete=off").classes("w-64").mark("new-email")
                name = ui.input("Name").props("counter maxlength=100").classes("w-56").mark("new-name")
                role = ui.select(ROLE_LABELS, value="user", label="Role").classes("w-32").mark("new-role")
                password = new_password("First password").classes("w-56").mark("new-password")
            ui.label("Give them the first password in person; they can change it on their profile.").classes(
                "text-sm text-grey-7"
            )
            problem = ui.label().classes("text-negative text-sm").mark("new-user-problem")
            inputs = {"email": email, "name": name, "role": role, "password": password}

            @one_at_a_time
            async def create() -> None:
                clear_problems(inputs, problem)
                values = {k: (e.value or "") for k, e in inputs.items()}
                try:
                    made = await users_service.create_user(
                        db=get_db(), actor=await self.visit.actor(), data=UserCreate.model_validate(values)
                    )
                except (ValidationError, DeskError) as error:
                    show_problems(error, inputs, problem)
                    if isinstance(error, ValidationError) and not password.error:  # every problem at once
                        password.error = password_problem(password.value or "")
                    return
                email.value, name.value, password.value, role.value = "", "", "", "user"
                ui.notify(f"Added {made.name} as {ROLE_NOUNS[made.role]}.", type="positive")
                self.page = 1
                await self.build_list()

            for field in (email, name, password):  # Enter in a one-line field adds, as in any form
                field.on("keydown.enter", create)
            with ui.row().classes("w-full justify-end"):
                ui.button("Add user", icon="person_add", on_click=create).mark("create-user")
        search = ui.input("Find people", placeholder="Name or email").props("clearable dense debounce=300")
        search.classes("w-72").mark("user-search").on_value_change(lambda e: self._find(e.value))
        self.list_area = ui.column().classes("w-full gap-2")

    async def _find(self, text: str | None) -> None:
        self.q, self.page = (text or "").strip() or None, 1
        await self.build_list()

    async def follow(self) -> None:
        """Show what changed since the list was drawn: rows in place, or the whole list when people came or went.

        Not while a dialog is open (editing someone, their tokens, a confirmation): it belongs to a row. A row
        whose change is being saved is left to that change.
        """
        self.latest += 1
        mine = self.latest
        try:
            actor = await self.visit.actor(touch=False)
            found = await users_service.list_users(db=get_db(), actor=actor, page=self._query())
        except DeskError:
            return  # refused (no longer an admin): the frame's session check closes the page
        if mine != self.latest:
            return
        if [person.id for person in found.items] == [row.shown.id for row in self.rows] and found.total == self.total:
            for row, person in zip(self.rows, found.items, strict=True):
                if person != row.shown and not row.saving:
                    row.show(person)
        elif not _dialog_open(self.visit.client):
            self._draw(found, actor)

    def _query(self) -> UserQuery:
        return UserQuery(q=self.q, offset=(self.page - 1) * PAGE_SIZE, limit=PAGE_SIZE)

    async def build_list(self) -> None:
        self.latest += 1
        mine = self.latest
        actor = await self.visit.actor()
        found = await users_service.list_users(db=get_db(), actor=actor, page=self._query())
        if mine == self.latest:
            self._draw(found, actor)

    def _draw(self, found: OffsetPage[UserRead], actor: Actor) -> None:
        self.total = found.total
        self.list_area.clear()
        with self.list_area:
            count = f"{found.total} {'person' if found.total == 1 else 'people'}"
            if self.q and not found.total:
                count = "Nobody's name or email contains that."
            ui.label(count).classes("text-sm text-grey-7").mark("user-count")
            self.rows = []
            if not found.items:  # no table of nobody: the count says why
                return
            with ui.column().classes("w-full gap-0 border rounded"):
                with ui.row().classes("w-full gap-3 px-3 py-1 text-xs text-grey-7 border-b"):
                    columns = (("Name ↑", "w-40"), ("Email", "w-56"), ("Last login", "w-28"), ("Role", "w-32"))
                    for heading, width in (*columns, ("AI", "w-28")):
                        ui.label(heading).classes(width)
                    ui.label("Access")
                self.rows = [UserRow(self.visit, person, you=person.id == actor.id) for person in found.items]
            pages = last_page(found.total, PAGE_SIZE)
            if pages > 1:
                numbers = pager(pages, self.page).mark("user-pages")
                numbers.on_value_change(lambda e: self._go(e.value))

    async def _go(self, page: int) -> None:
        self.page = page
        await self.build_list()


def _dialog_open(client: Client) -> bool:
    return any(isinstance(element, ui.dialog) and element.value for element in client.elements.values())
