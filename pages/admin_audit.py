"""/app/admin/audit: the desk-wide audit log for admins, newest first, filtered by what happened, by whom and
to whom.

The filters and the page live in the address (`?action=role_changed&subject=<id>&page=2`), so Back, reload
and a link sent to another admin open the same view. New entries show up while the page is open.
"""

from dataclasses import dataclass, replace
from typing import assert_never

from fastapi import Request
from nicegui import APIRouter, ui

from components.formats import when
from components.paging import address, last_page, page_from, pager
from components.people.tokens import scope_text
from components.runtime import session
from components.runtime.page import desk_page
from desk.audit import service as audit_service
from desk.audit.models import AuditQuery, AuditRead
from desk.db.client import get_db
from desk.errors import DeskError
from desk.schema import parse_object_id
from desk.users import service as users_service
from desk.work_orders import service as work_orders_service

router = APIRouter()
PATH = "/app/admin/audit"
PAGE_SIZE = 25
FOLLOW_SECONDS = 3.0  # how often an open log looks for new entries (one indexed read of the newest)
ACTIONS = {
    "work_order_deleted": "Work order deleted",
    "user_created": "Person added",
    "user_details_changed": "Name or email changed",
    "role_changed": "Role changed",
    "activation_changed": "Activation changed",
    "ai_access_changed": "AI assistance changed",
    "password_reset": "Password reset",
    "account_locked": "Account locked",
    "account_unlocked": "Account unlocked",
    "token_created": "API token created",
    "token_revoked": "API token revoked",
    "tokens_revoked": "All API tokens revoked",
    "orders_returned_to_queue": "Orders returned to the queue",
}


@desk_page(router, PATH, title="Audit log", admin=True, heading=True)
async def admin_audit_page(visit: session.Visit, me: session.SessionUser, request: Request) -> None:
    people = {str(p["_id"]): p["name"] for p in await users_service.everyone(db=get_db())}
    subject = _an_id(request.query_params.get("subject"))
    order = None
    if subject and subject not in people:  # an order's entries (the order page links here): named by its title
        order = await work_orders_service.get(db=get_db(), actor=me.actor, order_id=subject)
    orders = {order.id: f"Work order “{order.title}”"} if order else {}
    await AuditScreen(visit, request.query_params, people, orders).build()


def _gone(named: str | None, known: dict[str, str]) -> dict[str, str]:
    return {named: f"{named} (not on the desk now)"} if named is not None and named not in known else {}


@dataclass(frozen=True)
class AuditView:
    """What the log shows: its filters and page, as its address names them."""

    action: str | None = None
    actor_id: str | None = None
    subject_id: str | None = None
    page: int = 1

    @classmethod
    def from_params(cls, params) -> "AuditView":
        """The view an address names; what is not understood is left out rather than refused."""
        return cls(
            action=params.get("action") if params.get("action") in ACTIONS else None,
            actor_id=_an_id(params.get("actor")),
            subject_id=_an_id(params.get("subject")),
            page=page_from(params.get("page"), PAGE_SIZE),
        )

    def url(self) -> str:
        pairs = (("action", self.action), ("actor", self.actor_id), ("subject", self.subject_id))
        return address(PATH, [(key, value) for key, value in pairs if value], self.page)

    def query(self) -> AuditQuery:
        filters = {"action": self.action, "actorId": self.actor_id, "subjectId": self.subject_id}
        return AuditQuery.model_validate({"offset": (self.page - 1) * PAGE_SIZE, "limit": PAGE_SIZE, **filters})


class AuditScreen:
    """The filters, the entries of one page and a pager."""

    def __init__(self, visit: session.Visit, params, people: dict[str, str], orders: dict[str, str]) -> None:
        """`params`: the address's query; `people`: everyone's names by id, the choices of the person filters;
        `orders`: the order the address names, by its title ("Done to" only). An id in the address that names
        nothing on the desk now (someone since removed, a deleted order) is kept and shown as such, so a link
        still shows what it was sent for."""
        self.visit, self.view = visit, AuditView.from_params(params)
        actor, subject = self.view.actor_id, self.view.subject_id
        self.names = people | _gone(actor, people)
        self.subjects = people | orders | _gone(subject, people | orders)
        self.seen: str | None = None  # the newest entry of the filter when the page was last drawn
        self.latest = 0  # draws overlap when the filter or the page change quickly: only the newest may draw

    async def build(self) -> None:
        view = self.view
        ui.label("Kept for one year; nobody can change or delete an entry.").classes("text-sm text-grey-7")
        with ui.row().classes("items-end gap-3"):
            choose = ui.select(ACTIONS, label="What happened", value=view.action, clearable=True)
            choose.props("dense").classes("w-64")
            choose.mark("audit-action").on_value_change(lambda e: self._go(1, action=e.value))
            by = ui.select(self.names, label="Done by", value=view.actor_id, clearable=True)
            by.props("dense").classes("w-56").mark("audit-actor")
            by.on_value_change(lambda e: self._go(1, actor_id=e.value))
            to = ui.select(self.subjects, label="Done to", value=view.subject_id, clearable=True)
            to.props("dense").classes("w-56").mark("audit-subject")
            to.on_value_change(lambda e: self._go(1, subject_id=e.value))
        self.count = ui.label().classes("text-sm text-grey-7").mark("audit-count")
        self.entries = ui.column().classes("w-full gap-0 border rounded").mark("audit-entries")
        self.pager = pager().mark("audit-pages")
        self.pager.on_value_change(lambda e: e.value != self.view.page and self._go(e.value))
        await self.load()
        ui.timer(FOLLOW_SECONDS, self._follow)

    def _go(self, page: int, **changes: str | None) -> None:
        """Show `page` of the log, with the filters in `changes` changed."""
        self.view = replace(self.view, page=page, **changes)
        self.visit.moved_to(self.view.url())  # Back, reload, bookmarks and a new login come back to this view
        ui.timer(0, self.load, once=True)

    async def _follow(self) -> None:
        """Draw again when an entry was logged since (by anyone, in any web process): entries are only added."""
        try:
            actor = await self.visit.actor(touch=False)
            if await audit_service.newest_id(db=get_db(), actor=actor, query=self.view.query()) != self.seen:
                await self.load(touch=False)
        except DeskError:
            return  # refused (no longer an admin): the frame's session check closes the page

    async def load(self, *, touch: bool = True) -> None:
        self.latest += 1
        mine = self.latest
        actor = await self.visit.actor(touch=touch)
        db = get_db()
        view = self.view
        query = view.query()
        newest = await audit_service.newest_id(db=db, actor=actor, query=query)
        found = await audit_service.list_entries(db=db, actor=actor, query=query)
        if mine != self.latest:
            return
        if not found.items and found.total and view.page > 1:  # an old link past the end: its last page
            self._go(last_page(found.total, PAGE_SIZE))
            return
        ids = {e.actor_id for e in found.items if e.actor_id} | {e.subject_id for e in found.items if e.subject_id}
        names = await users_service.display_names(db=db, user_ids=ids)
        if mine != self.latest:
            return
        self.seen = newest
        self.entries.clear()
        with self.entries:
            for entry in found.items:
                _entry(entry, names)
        self.entries.set_visibility(bool(found.items))
        total = f"{found.total:,}" if found.total_exact else f"{found.total:,}+"
        noun = "entry" if found.total == 1 and found.total_exact else "entries"
        self.count.set_text(f"{total} {noun}" if found.items else self._nothing(view))
        self.pager.max = last_page(found.total, PAGE_SIZE)
        self.pager.set_value(view.page)
        self.pager.set_visibility(self.pager.max > 1)

    def _nothing(self, view: AuditView) -> str:
        """What the count says when no entry matches: which filters found nothing, in words."""
        if not (view.action or view.actor_id or view.subject_id):
            return "Nothing logged yet."
        kind = f"“{ACTIONS[view.action]}” entries" if view.action else "entries"
        by = f" by {self.names[view.actor_id]}" if view.actor_id else ""
        to = f" concerning {self.subjects[view.subject_id]}" if view.subject_id else ""
        return f"No {kind}{by}{to}."


def _an_id(text: str | None) -> str | None:
    """A well-formed id from the address, as the desk writes ids; None for anything else."""
    found = parse_object_id(text or "")
    return str(found) if found else None


def _entry(entry: AuditRead, names: dict[str, str]) -> None:
    who = names.get(entry.actor_id or "", "the desk" if entry.actor_id is None else "someone since removed")
    with ui.row().classes("w-full items-start gap-3 px-3 py-2 border-b").mark("audit-entry"):
        ui.label(when(entry.at)).classes("text-xs text-grey-7 w-40 shrink-0")
        ui.label(ACTIONS[entry.action]).classes("font-medium w-48 shrink-0")
        ui.label(f"by {who}").classes("text-sm w-40 shrink-0")
        ui.label(_what(entry, names)).classes("text-sm grow wrap-anywhere")


def _what(entry: AuditRead, names: dict[str, str]) -> str:  # noqa: PLR0911 - one return per kind of entry
    """The entry's facts in words (plain text: a deleted order's title is shown, never rendered)."""
    details = entry.details
    known = names.get(entry.subject_id or "")
    person = known or details.get("name") or entry.subject_id or ""  # one since removed: as named when written
    match entry.action:
        case "work_order_deleted":
            order = details.get("order", {})
            return f"“{order.get('title', '')}” ({order.get('status', '')}, version {order.get('version')})"
        case "user_created":  # as added (name and email together), and who that is now when renamed since
            door = f", with {details['via']}" if details.get("via") else ""
            added = details.get("name") or person
            now = f" (now {known})" if known and known != added else ""
            return f"{added}{now} <{details.get('email')}>, {details.get('role')}{door}"
        case "user_details_changed":
            return f"{person}: {_changed(details)}"
        case "role_changed":
            return f"{person}: {details.get('before')} → {details.get('after')}"
        case "activation_changed":
            return f"{person}: {'activated' if details.get('active') else 'deactivated'}"
        case "ai_access_changed":
            return f"{person}: AI assistance turned {'on' if details.get('aiEnabled') else 'off'}"
        case "password_reset" | "account_unlocked":
            return person
        case "account_locked":  # by the desk, after a guesser spread over many addresses
            until = f", until {when(details['until'])}" if details.get("until") else ""
            tries = f"{details.get('failures')} failed logins from {details.get('addresses')} addresses within an hour"
            return f"{person}: {tries}{until}"
        case "token_created" | "token_revoked":
            token = f"“{details['name']}” ({details.get('prefix', '')}…)" if details.get("name") else "a token"
            return f"{token} of {known or entry.subject_id}{_grants(details)}"  # `name` is the token's here
        case "tokens_revoked":
            return f"{details.get('count', 0)} tokens of {person}"
        case "orders_returned_to_queue":  # when they were made a viewer
            return f"{details.get('count', 0)} open work orders of {person}"
        case unknown:
            assert_never(unknown)


def _grants(details: dict) -> str:
    """What a new token may do, and until when: ": Read, Write; expires 03 Mar 2027, 17:05 UTC" (nothing for a
    revocation, or for a token made before tokens had scopes)."""
    scopes = f": {scope_text(details['scopes'])}" if details.get("scopes") else ""
    expires = f"; expires {when(details['expiresAt'])}" if details.get("expiresAt") else ""
    return f"{scopes}{expires}"


def _changed(details: dict) -> str:
    """Each field that changed, from what to what: "email a@x → b@x, name Sam → Samuel"."""
    before, after = details.get("before") or {}, details.get("after") or {}
    return ", ".join(f"{key} {before.get(key, '')} → {value}" for key, value in after.items())
