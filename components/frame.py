"""The frame around every page: header, navigation by role, who is logged in, logout, and the page's Visit.

Every page opens the frame and gets its `Visit` from it: handlers take the actor from `await visit.actor()`,
and the frame checks the session every few seconds (without extending it), so a session that ends or a
role that changes closes the page on the server (components/runtime/session.py).
"""

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from nicegui import app, ui

from components import theme
from components.confirm import confirm
from components.copilot.panel import Copilot, ai_off_reason
from components.notifications.bell import Bell
from components.runtime import session
from components.runtime.session import SessionUser
from components.work_order import drafts
from desk import state
from desk.agent.core import switch
from desk.db.client import get_db

SESSION_CHECK_SECONDS = 3.0
SWITCH_CHECK_SECONDS = 3.0  # how soon a tab's header sees the AI switch flipped in another process (plus its read)
NOTICE = "notice"  # in the tab's storage: what the next page of this tab tells the person (notify_next_page)
LIST_VIEW = "list_view"  # in the tab's storage: the work-order list's address as this tab last showed it
COPILOT_PAGE = "/app/copilot"  # the conversation's own page: no second panel in a drawer there
ADMIN_SCREENS = [
    ("Users", "/app/admin/users"),
    ("Metrics", "/app/admin/metrics"),
    ("Agents", "/app/admin/agents"),
    ("Audit", "/app/admin/audit"),
    ("Settings", "/app/admin/settings"),
]


@contextmanager
def frame(title: str, me: SessionUser, *, path: str) -> Iterator[session.Visit]:
    """Open the page chrome for `me` (just read from the request); the body goes inside the `with` block.

    Pages get it through `@desk_page` (components/runtime/page.py), which also turns away who may not see them.
    """
    visit = session.visit(me, path)
    drafts.own(visit.drafts_owner)  # the browser drops the drafts of any other session, and those a day old
    retitle(title)
    theme.look()
    off = ai_off_reason(me)
    # Whether this person has an assistant when the desk's AI switch is on: then the header follows the switch live
    # (an admin turning AI back on must not leave every open tab grey until a reload), else it says why not for good.
    follows = ai_off_reason(me, desk_switch=switch.NEVER_FLIPPED) is None
    toggle, escape, drawer = None, None, None
    if follows:
        if path != COPILOT_PAGE:
            toggle, escape, drawer = _copilot_drawer(visit)
        else:
            toggle = _focus_page_copilot
    header = _AssistantHeader(me, off, drawer)
    _shortcut(header.shortcut(toggle), on_escape=escape)
    # On a phone the header's buttons show their icons alone, and the name is cut short: two rows, not three.
    # (NiceGUI puts a button's text in as a bare text node: no element to hide, so its size goes to 0.)
    ui.add_css(
        "@media (max-width: 639px) { .icon-on-phone .q-btn__content { font-size: 0; }"
        " .icon-on-phone .q-btn__content .q-icon { font-size: 24px; margin: 0; } }"
        # a notification quoting a long unbroken title wraps inside its box instead of running out of it
        " .q-notification__message { overflow-wrap: anywhere; }"
        # the assistant's code blocks wrap too: a long line in one would widen the drawer
        " .copilot-log pre { white-space: pre-wrap; overflow-wrap: anywhere; }"
    )
    with ui.header().classes("items-center gap-x-2 gap-y-0 sm:gap-x-4 px-2 sm:px-4 py-1 sm:py-2 bg-primary"):
        ui.link("Work Order Desk", "/app").classes("text-lg font-semibold text-white no-underline")
        screens = [("Work orders", "/app"), *([("Assistant", COPILOT_PAGE)] if follows else [])]
        screens += ADMIN_SCREENS if me.is_admin else []
        # An admin's seven links need a wide screen: narrower, they fold into a menu (on a phone they made the
        # header three rows, 165 px of every screen). A person's two always fit.
        fold = me.is_admin
        with ui.row().classes("gap-3") as links:
            if fold:
                links.classes("max-xl:hidden")
            for label, target in screens:
                link = _nav(label, target, path)
                if target == COPILOT_PAGE:
                    header.available.append(link)
        if fold and (assistant := _nav_menu(screens, path).get(COPILOT_PAGE)) is not None:
            header.available.append(assistant)
        ui.space()
        header.build(toggle)
        Bell(me)
        with ui.row().classes("items-center gap-2 text-white"):
            name = ui.link(me.name, "/app/profile").classes("text-white max-sm:max-w-32 truncate")
            name.mark("current-user")
            ui.label(me.role).classes("text-xs opacity-80 border rounded px-1")
            log_out = ui.button("Log out", icon="logout", on_click=lambda: _log_out(visit)).props("flat color=white")
            log_out.classes("icon-on-phone").props('aria-label="Log out"').mark("logout")
    # Logout in another tab, an admin deactivating or demoting the person, the idle or absolute limit.
    ui.timer(SESSION_CHECK_SECONDS, visit.check)
    if follows:  # a flip made in another process: `current` reads it (once a second at most for all tabs here)
        ui.timer(SWITCH_CHECK_SECONDS, lambda: switch.current(get_db()))
        header.follow()
    ui.timer(0, _tell_notice, once=True)  # a timer runs once the browser is connected: the tab is known then
    with ui.column().classes("w-full max-w-6xl mx-auto p-4 gap-4"):
        yield visit


def retitle(title: str) -> None:
    """Name the tab after what the page shows (a work order's title, once it is read)."""
    ui.page_title(f"{title} · Work Order Desk")


def notify_next_page(message: str) -> None:
    """Tell the person `message` on the page this tab opens next (a notification dies with the page it is on)."""
    app.storage.tab[NOTICE] = message


def remember_list_view(url: str) -> None:
    """The list's address with its filters, for this tab's way back to it (`back_to_list`).

    The tab is known once the browser is connected: before that (a page still being built), the list page
    remembers its view from a timer instead.
    """
    if (tab := _tab()) is not None:
        tab[LIST_VIEW] = url


def back_to_list(link: ui.link | None = None) -> str:
    """The list as this tab last showed it (its filters kept), or the plain list; `link` is pointed there.

    Only once the browser is connected is the tab known: a page calls it from a handler, or a timer.
    """
    url = tab.get(LIST_VIEW, "/app") if (tab := _tab()) is not None else "/app"
    url = url if url == "/app" or url.startswith("/app?") else "/app"  # only ever an address of the list
    if link is not None:
        link.props["href"] = url
    return url


def _tell_notice() -> None:
    if (tab := _tab()) is not None and (message := tab.pop(NOTICE, None)) is not None:
        ui.notify(message, type="positive")


def _tab() -> dict | None:
    """This tab's storage, or None until the browser is connected. NiceGUI marks the client connected, then
    creates the tab's storage: a timer or a live update can run in between, and must not fail there."""
    if not ui.context.client.has_socket_connection:
        return None
    try:
        return app.storage.tab
    except (AssertionError, KeyError):  # "tab storage … should be created before accessing it" (KeyError under -O)
        return None


# Where the keyboard was when the drawer opened (a field, the Assistant button), to go back there when it closes.
KEEP_FOCUS = "window.deskFocusBefore = document.activeElement"
# Only from inside the drawer or nowhere: a field clicked meanwhile keeps it (and a phone opens no keyboard).
GIVE_FOCUS_BACK = """const was = window.deskFocusBefore, now = document.activeElement;
window.deskFocusBefore = null;
if (was?.isConnected && (!now || now === document.body || now.closest('.q-drawer'))) was.focus();"""


class _AssistantHeader:
    """The header's assistant: its button (and nav link) while the person may use it, else a dimmed icon that says
    why not. For a person who has an assistant whenever the desk's AI switch is on, it follows the switch: the bus's
    "ai_switch" (desk/agent/core/switch.py) shows one or the other in every open tab of this process."""

    def __init__(self, me: SessionUser, off: str | None, drawer: ui.right_drawer | None) -> None:
        self.me, self.off, self.drawer = me, off, drawer
        self.available: list[ui.element] = []  # shown while the assistant is: its button, its nav link
        self.unavailable: ui.button | None = None
        self.why: ui.tooltip | None = None

    def build(self, toggle: Callable | None) -> None:
        if toggle is not None:
            assistant = ui.button("Assistant", icon="auto_awesome", on_click=toggle).props("flat color=white")
            assistant.classes("icon-on-phone").props('aria-label="Assistant"')
            assistant.mark("copilot-toggle").tooltip("Ctrl+K / ⌘K")
            self.available.append(assistant)
        # where the assistant would be, a dimmed icon that says why not (one icon: the header stays one row)
        self.unavailable = ui.button(icon="auto_awesome", on_click=self.say_why)
        self.unavailable.props("flat round color=white").classes("opacity-50").mark("copilot-off")
        with self.unavailable:
            self.why = ui.tooltip("")
        self._show(self.off)

    def shortcut(self, toggle: Callable | None) -> Callable:
        """Ctrl+K: the assistant while there is one, else why not (it is not a dead key)."""

        def pressed():
            return toggle() if toggle is not None and self.off is None else self.say_why()

        return pressed

    def say_why(self) -> None:
        if self.off is not None:
            ui.notify(self.off, type="info")

    def follow(self) -> None:
        """Show the assistant, or why not, as the desk's switch flips, while the page is open."""
        client = ui.context.client

        def flipped(seen: switch.Switch) -> None:
            if client.is_deleted:  # a page left behind; its on_delete may not have run yet
                unsubscribe()
                return
            with client:
                self._show(ai_off_reason(self.me, desk_switch=seen))

        unsubscribe = state.current().bus.subscribe("ai_switch", None, flipped)
        client.on_delete(unsubscribe)

    def _show(self, off: str | None) -> None:
        self.off = off
        for element in self.available:
            element.set_visibility(off is None)
        assert self.unavailable is not None and self.why is not None
        self.unavailable.set_visibility(off is not None)
        if off is not None:
            self.unavailable.props["aria-label"] = f"Assistant unavailable: {off}"  # as data, not a props string
            self.unavailable.update()
            self.why.set_text(off)
            if self.drawer is not None:
                self.drawer.hide()


def _copilot_drawer(visit: session.Visit) -> tuple[Callable, Callable[[], None], ui.right_drawer]:
    """The assistant in a right drawer, opened and closed with Ctrl+K / Cmd+K (focus lands in its input).

    It shows the person's conversation as the server has it (components/copilot/panel.py), read again on opening.
    """
    # Never wider than the screen: on a phone a 420 px drawer lost its left edge and hid the backdrop
    # a tap would close it by, so it also has a close button. (Quasar sets the width on the drawer's
    # outer element, which `.style` does not reach.)
    ui.add_css(".q-drawer--mobile { max-width: 100vw; }")
    with ui.right_drawer(value=False).props("width=420 bordered").classes("p-3") as drawer:
        panel = Copilot(visit)
        panel.build(on_close=drawer.hide)
    ui.timer(0, panel.load, once=True)
    # However it closes (Escape, Ctrl+K, its button, a tap beside it), the keyboard's place is given back
    drawer.on_value_change(lambda e: None if e.value else ui.run_javascript(GIVE_FOCUS_BACK))

    async def toggle() -> None:
        drawer.toggle()
        if drawer.value:
            ui.run_javascript(KEEP_FOCUS)
            panel.input.run_method("focus")
            await panel.load()
            panel.open_approval()  # a change waiting (after a reload, or from another page) is what to see first

    def escape() -> None:
        if drawer.value and panel.dialog is None:  # with a change waiting, Escape is the approval's "Not now"
            drawer.hide()

    return toggle, escape, drawer


def _focus_page_copilot() -> None:
    """On the Assistant page, Ctrl+K and the button go to its own panel's input."""
    ui.run_javascript("document.querySelector('.copilot-input textarea')?.focus()")


def _shortcut(toggle: Callable, *, on_escape: Callable[[], None] | None = None) -> None:
    """Ctrl+K / Cmd+K toggles the assistant; Escape calls `on_escape` (the drawer closes)."""

    async def shortcut(event) -> None:
        if event.action.keydown and event.key == "k" and (event.modifiers.ctrl or event.modifiers.meta):
            result = toggle()
            if result is not None:
                await result
        elif event.action.keydown and event.key == "Escape" and on_escape is not None:
            on_escape()

    ui.keyboard(on_key=shortcut, ignore=[])


def _is_here(target: str, path: str) -> bool:
    under = "/app/work-orders/" if target == "/app" else target  # an order's page is under "Work orders"
    return path == target or path.startswith(under)


def _nav_menu(screens: list[tuple[str, str]], path: str) -> dict[str, ui.item]:
    """The nav folded into a menu button, shown where the links do not fit (the links are hidden there);
    its items by address."""
    items = {}
    button = ui.button(icon="menu").props('flat round color=white aria-label="Screens"').classes("xl:hidden")
    with button, ui.menu(), ui.list().props("dense"):
        for label, target in screens:
            items[target] = ui.item(label)
            items[target].props["href"] = target  # as data: a props string is parsed (the desk's own address anyway)
            if _is_here(target, path):
                items[target].classes("font-semibold").props('aria-current="page" active')
    return items


def _nav(label: str, target: str, path: str) -> ui.link:
    """A link of the nav; the one for the screen you are on stands out, and says so to screen readers."""
    active = _is_here(target, path)
    link = ui.link(label, target).classes("text-white no-underline px-2 py-1 rounded")
    if active:
        link.classes("bg-white/20 font-semibold underline underline-offset-4").props('aria-current="page"')
        link.mark("nav-current")
    return link


async def _log_out(visit: session.Visit) -> None:
    """End the session; with unsaved edits (on this page, in another tab, kept from before), only once the
    person says to discard them."""
    here = visit.draft is not None and visit.draft.dirty
    unsaved = max(await drafts.kept(visit.user_id), int(here))  # this page's may not have reached the browser yet
    if unsaved:
        orders = "1 work order" if unsaved == 1 else f"{unsaved} work orders"
        lines = (f"You have changes on {orders} that are not saved.", "Log out and discard them?")
        if not await confirm(*lines, action="Log out", marker="confirm-logout"):
            return
    await drafts.forget_all()  # on a shared computer, the next person must find none of this one's typing
    await session.sign_out(visit)
    visit.close("/login")
