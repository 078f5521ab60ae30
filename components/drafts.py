"""Unsaved edits of an order page: asked about before leaving, and kept in this browser meanwhile.

While the form differs from the order as loaded, or a comment is being typed, leaving the page (a
link, Back, closing the tab) asks first, and the text is kept in the browser's localStorage under
the person's and the order's ids (a comment's key ends in ":comment"). A session that ends
mid-typing sends the person to log in; the page restores the kept text when they come back (or, when
they may no longer change the order, shows it to copy: `show_kept_to_copy`), and only to them:
someone else signing in on the same browser (a shared desk) never sees it. Logging out on purpose
forgets the person's kept texts (`forget_all`), after asking when this page or any other tab has one
(`kept`). Values travel as JSON strings and go back into inputs or labels, never into HTML.
"""

import json
from contextlib import suppress
from typing import Any

from nicegui import background_tasks, ui

from components.chips import CHOICE_LABELS, FIELD_NAMES
from components.order_changes import why_read_only
from desk.actors import Actor
from desk.work_orders.models import EDITABLE, WorkOrderRead

KEY = "desk-draft:"
OLD_KEYS = r"/^desk-draft:[0-9a-f]{24}$/"  # kept under the order's id alone, before keys named the person
# Static (no user text in it): asks before the page is left while the desk marked it dirty, and
# sends Ctrl+S / Cmd+S to the page. Run, not added to <head>: the page may be sent already (the
# frame waits for the socket), and a <script> inserted after that is never run by the browser.
GUARD = """
if (!window.deskGuard) {
  window.deskGuard = true;
  window.addEventListener('beforeunload', (event) => {
    if (Object.keys(window.deskDirty || {}).length) { event.preventDefault(); event.returnValue = ''; }
  });
  document.addEventListener('keydown', (event) => {
    if ((event.ctrlKey || event.metaKey) && event.key.toLowerCase() === 's') {
      event.preventDefault();  // not the browser's "save page"
      emitEvent('desksave');
    }
  });
}
"""
READ_SECONDS = 5.0
ASK_SECONDS = 2.0  # a logout waits this long at most to learn whether it must ask (a browser answers at once)


class Draft:
    """The browser side of one order page's edit (or, with `part`, of another text on it, such as a comment being
    typed): `track` after every change, `restore` once connected."""

    def __init__(self, user_id: str, order_id: str, part: str = "") -> None:
        self.key = json.dumps(f"{KEY}{user_id}:{order_id}" + (f":{part}" if part else ""))
        self.dirty = False
        self.client = ui.context.client
        self.waiting: str | None = None  # the newest code not yet sent
        self.sending = False
        self.client.run_javascript(GUARD)

    def track(self, edits: dict[str, Any], version: int) -> None:
        """Keep `edits` in the browser and guard leaving while there are any; none: forget and stop asking."""
        if edits:
            value = json.dumps(json.dumps({"version": version, "edits": edits}, default=str))
            # which texts of the page are unsaved: one of them saved does not let the page go without asking
            dirty = f"window.deskDirty = {{...window.deskDirty, [{self.key}]: 1}}"
            self._send(f"localStorage.setItem({self.key}, {value}); {dirty}")
        elif self.dirty:
            self._send(f"localStorage.removeItem({self.key}); delete (window.deskDirty || {{}})[{self.key}]")
        self.dirty = bool(edits)

    def _send(self, code: str) -> None:
        """Send `code`, after any send under way; only the newest waiting one goes (it holds the whole edit)."""
        self.waiting = code
        if not self.sending:
            self.sending = True
            background_tasks.create(self._sender(), name="keep an edit in the browser")

    async def _sender(self) -> None:
        try:
            while self.waiting is not None:
                code, self.waiting = self.waiting, None
                with suppress(TimeoutError):  # a slow browser: the next change sends the whole edit again
                    await self.client.run_javascript(code, timeout=READ_SECONDS)
        finally:
            self.sending = False

    def forget(self) -> None:
        """The edit is gone on purpose (deleted order, discarded): leave without asking."""
        self.dirty = True
        self.track({}, 0)

    async def restore(self) -> dict[str, Any] | None:
        """The edits this browser kept for the order, if any (None when nothing or unreadable)."""
        try:
            raw = await self.client.run_javascript(f"localStorage.getItem({self.key})", timeout=READ_SECONDS)
        except TimeoutError:
            return None
        try:
            kept = json.loads(raw) if isinstance(raw, str) else None
        except ValueError:
            return None
        edits = kept.get("edits") if isinstance(kept, dict) else None
        return edits if isinstance(edits, dict) and edits else None


async def show_kept_to_copy(actor: Actor, order: WorkOrderRead, into: ui.element) -> None:
    """On the page of an order the person may not change, the edit this browser kept for it, if any: shown to copy,
    with why it cannot be saved, never put back in a form (their role was lowered, or the order handed on, while
    they typed). Discarding it forgets it."""
    client = into.client  # a background task: no page context of its own
    await client.connected()
    with client:
        draft = Draft(actor.id, order.id)
    kept = await draft.restore() or {}
    typed = {field: v for field in EDITABLE if isinstance(v := kept.get(field), str) and v != getattr(order, field)}
    if not typed or client.is_deleted:
        return
    with client, into, ui.card().classes("w-full bg-amber-1 gap-1").mark("draft-kept") as card:
        ui.label("Your unsaved edit was kept in this browser, but you cannot save it here now:").classes("font-medium")
        ui.label(why_read_only(actor, order)).classes("text-sm")
        for field, value in typed.items():
            shown = CHOICE_LABELS.get(field, {}).get(value, value)
            ui.label(f"{FIELD_NAMES[field]}: {shown}").classes("whitespace-pre-wrap wrap-anywhere").mark("kept-text")
        ui.label("Copy what you need from it first.").classes("text-sm text-grey-8")

        def discard() -> None:
            draft.forget()
            card.delete()

        ui.button("Discard my edit", on_click=discard).props("outline").mark("draft-discard")


async def kept(user_id: str) -> int:
    """On how many orders this browser keeps the person's unsaved text, from any of their tabs (0: it does not
    answer)."""
    orders = f"new Set({_theirs(user_id)}.map((key) => key.split(':')[2])).size"  # an edit and a comment: one order
    with suppress(TimeoutError):
        found = await ui.run_javascript(orders, timeout=ASK_SECONDS)
        return found if isinstance(found, int) else 0
    return 0


async def forget_all(user_id: str) -> None:
    """Forget every edit this browser keeps for the person (they log out: nothing of theirs stays behind), and
    any kept before keys named their person (whose they were is unknown)."""
    old = f"Object.keys(localStorage).filter((key) => {OLD_KEYS}.test(key))"
    code = f"{_theirs(user_id)}.concat({old}).forEach((key) => localStorage.removeItem(key)); window.deskDirty = {{}}"
    with suppress(TimeoutError):  # awaited, so it is done before the browser is sent away
        await ui.run_javascript(code)


def _theirs(user_id: str) -> str:
    prefix = json.dumps(f"{KEY}{user_id}:")  # ids only: no text of anyone's goes into the code
    return f"Object.keys(localStorage).filter((key) => key.startsWith({prefix}))"
