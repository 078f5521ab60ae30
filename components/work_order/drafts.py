"""Unsaved edits of an order page: asked about before leaving, and kept in this browser while the session lives.

While the form differs from the order as loaded, or a comment is being typed, leaving the page (a
link, Back, closing the tab) asks first, and the text is kept in the browser's localStorage under
the person's and the order's ids (a comment's key ends in ":comment"). A reload, another tab, or a
role lowered mid-typing (`show_kept_to_copy`) finds it again, as long as the session it was typed in
lives. Kept text belongs to that session: each draft carries a name of the session (`owner`, derived
one way from its secret, never the secret) and when it was typed (`at`). Every page load tells the
browser whose session it now has (`own`: the frame, for the session; the login page, for none) and
the browser drops every draft of another session, and any older than a day. So a session that
ended for any reason (logout, an admin, idle or age limits) leaves nothing for the next person on
a shared desk, nor for a script reading localStorage. Logging out on purpose forgets every kept text
(`forget_all`), after asking when this page or any other tab has one (`kept`); the other tabs stop
asking before they are left, and stop keeping what is typed in them. Values travel as JSON and go
back into inputs or labels, never into HTML.
"""

import json
from contextlib import suppress
from typing import Any

from nicegui import Client, background_tasks, ui

from components.work_order.changes import why_read_only
from components.work_order.due_field import due_day, kept_day
from desk.actors import Actor
from desk.db.client import get_db
from desk.labels import CHOICE_LABELS, FIELD_NAMES
from desk.work_orders.models import EDITABLE, WorkOrderRead
from desk.zone import desk_zone

KEY = "desk-draft:"
# Static (no user text in it): the browser's side of kept drafts, installed once per page. A draft
# is written only while the browser's session (OWNER, in localStorage) is still the one this page
# was built for: after a logout, or someone else's login, in another tab, this page keeps nothing more
# and stops asking before it is left (the storage event).
LIBRARY = """
if (!window.deskDrafts) {
  const PREFIX = 'desk-draft:', OWNER = 'desk-drafts-owner', DAY = 24 * 60 * 60 * 1000;
  const keys = () => Object.keys(localStorage).filter((key) => key.startsWith(PREFIX));
  const read = (key) => { try { return JSON.parse(localStorage.getItem(key)); } catch { return null; } };
  const ours = () => !!window.deskDraftsOwner && localStorage.getItem(OWNER) === window.deskDraftsOwner;
  const fresh = (kept) => !!kept && kept.owner === window.deskDraftsOwner && Date.now() - kept.at < DAY;
  window.deskDrafts = {
    own(owner) {
      window.deskDraftsOwner = owner;
      if (owner) localStorage.setItem(OWNER, owner); else localStorage.removeItem(OWNER);
      this.expire();
    },
    expire() { keys().filter((key) => !fresh(read(key))).forEach((key) => localStorage.removeItem(key)); },
    keep(key, value) {
      if (!ours()) return false;
      localStorage.setItem(key, JSON.stringify({...value, owner: window.deskDraftsOwner, at: Date.now()}));
      window.deskDirty = {...window.deskDirty, [key]: 1};
      return true;
    },
    drop(key) {
      if (ours()) localStorage.removeItem(key);  // not another session's, in a tab left open
      delete (window.deskDirty || {})[key];
    },
    get(key) { const kept = read(key); return ours() && fresh(kept) ? kept : null; },
    count(prefix) {
      const theirs = ours() ? keys().filter((key) => key.startsWith(prefix) && fresh(read(key))) : [];
      return new Set(theirs.map((key) => key.split(':')[2])).size;
    },
    forgetAll() {
      keys().forEach((key) => localStorage.removeItem(key));
      localStorage.removeItem(OWNER);
      window.deskDirty = {};
    },
  };
  // The browser's session is no longer this page's (a logout or a login in another tab): stop asking before
  // leaving, and drop what this page wrote while the news was on its way (tabs see localStorage a moment apart).
  window.addEventListener('storage', (event) => {
    if ((event.key !== OWNER && event.key !== null) || !window.deskDraftsOwner) return;
    if (event.newValue === window.deskDraftsOwner) return;
    window.deskDirty = {};
    keys().filter((key) => read(key)?.owner === window.deskDraftsOwner).forEach((key) => localStorage.removeItem(key));
  });
  setInterval(() => ours() && window.deskDrafts.expire(), 60 * 1000);  // a day old while the page stays open
}
"""
# Static too: asks before the page is left while the desk marked it dirty, and sends Ctrl+S / Cmd+S
# to the page. Run, not added to <head>: the page may be sent already (the frame waits for the
# socket), and a <script> inserted after that is never run by the browser.
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


def own(owner: str | None) -> None:
    """On every page load: the browser's session is now `owner` (None: it has none, the login page); the browser
    drops the drafts of any other session, and those older than a day. Sent before any draft is read back."""
    background_tasks.create(_own(ui.context.client, owner), name="drop the drafts of other sessions")


async def _own(client: Client, owner: str | None) -> None:
    with suppress(TimeoutError):  # a slow browser still runs it, first of the page's scripts
        await client.run_javascript(f"{LIBRARY}\ndeskDrafts.own({json.dumps(owner)})", timeout=READ_SECONDS)


class Draft:
    """The browser side of one order page's edit (or, with `part`, of another text on it, such as a comment being
    typed): `track` after every change, `restore` once connected."""

    def __init__(self, user_id: str, order_id: str, part: str = "") -> None:
        self.key = json.dumps(f"{KEY}{user_id}:{order_id}" + (f":{part}" if part else ""))  # ids: no one's text
        self.dirty = False
        self.client = ui.context.client
        self.waiting: str | None = None  # the newest code not yet sent
        self.sending = False
        self.client.run_javascript(LIBRARY + GUARD)

    def track(self, edits: dict[str, Any], version: int) -> None:
        """Keep `edits` in the browser and guard leaving while there are any; none: forget and stop asking."""
        if edits:
            # all JSON: what the person typed reaches the browser as data, never as code
            self._send(f"deskDrafts.keep({self.key}, {json.dumps({'version': version, 'edits': edits}, default=str)})")
        elif self.dirty:
            self._send(f"deskDrafts.drop({self.key})")
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
        """The edits this browser kept for the order in this session, if any (None when nothing or unreadable)."""
        try:
            kept = await self.client.run_javascript(f"deskDrafts.get({self.key})", timeout=READ_SECONDS)
        except TimeoutError:
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
    zone = await desk_zone(get_db())
    if (day := kept_day(kept, zone)) is not None and day != due_day(order.due_at, zone):
        typed["dueAt"] = day or "no day"
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
    """On how many orders this browser keeps the person's unsaved text in this session, from any of their tabs (0:
    it does not answer)."""
    with suppress(TimeoutError):  # an edit and a comment of one order count as one
        found = await ui.run_javascript(f"deskDrafts.count({json.dumps(f'{KEY}{user_id}:')})", timeout=ASK_SECONDS)
        return found if isinstance(found, int) else 0
    return 0


async def forget_all() -> None:
    """Forget every draft this browser keeps (the person logs out: nothing of theirs stays behind); the session's
    other tabs keep nothing more from now on."""
    with suppress(TimeoutError):  # awaited, so it is done before the browser is sent away
        await ui.run_javascript("deskDrafts.forgetAll()")
