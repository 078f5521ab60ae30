"""/app/admin/agents/runs: every run of the copilot and the triage agent, and one run's transcript.

The list and the detail go through the triage service in process, as GET /admin/agents/runs[/{id}] do;
opening a detail is recorded in the agents' audit by that same service (SEC-11). Messages, tool
arguments and results are untrusted text (the model's, or work-order text): labels and code blocks only.
The list's filters and page live in its address (`?agent=triage&status=error&since=2026-12-01&page=2`),
so Back, reload and a link sent to another admin open the same view.
"""

from datetime import date

from fastapi import Request
from nicegui import APIRouter, ui

from components.agents.heading import RUNS_PATH, agents_tabs, switch_banner
from components.agents.run_detail import run_detail, run_status_chip
from components.formats import usd, when
from components.paging import address, day_from, last_page, page_from, pager
from components.runtime import session
from components.runtime.page import desk_page
from desk.agent.core.models import AgentRunRead
from desk.agent.triage import service as triage
from desk.agent.triage.models import RunQuery
from desk.db.client import get_db
from desk.errors import DeskError, NotFound
from desk.labels import AGENT_NAMES, RUN_STATUSES, run_error
from desk.schema import after, midnight
from desk.users import service as users_service

router = APIRouter()
PATH = RUNS_PATH
PAGE_SIZE = 25


@desk_page(router, PATH, title="Agent runs", admin=True, heading=True)
async def admin_runs_page(visit: session.Visit, me: session.SessionUser, request: Request) -> None:
    agents_tabs(PATH)
    await switch_banner(me.actor)
    people = await users_service.everyone(db=get_db())  # the person filter offers all, not the first page
    await RunsScreen(visit, {str(p["_id"]): p["name"] for p in people}, request.query_params).build()


@desk_page(router, PATH + "/{run_id}", title="Agent run", admin=True)
async def admin_run_page(visit: session.Visit, me: session.SessionUser, run_id: str) -> None:
    ui.link("← All runs", PATH).classes("text-sm")
    try:
        detail = await triage.run_detail(db=get_db(), actor=me.actor, run_id=run_id)  # audited: who looked, when
    except NotFound:
        ui.label("There is no such run (transcripts are kept 90 days).").classes("text-lg").mark("missing")
        return
    extras = await triage.run_extras(db=get_db(), actor=me.actor, run_ids=[run_id])
    names = await users_service.display_names(db=get_db(), user_ids={detail.run.actor_id} - {None})
    run_detail(detail, extras.get(run_id), names)


class RunsScreen:
    """Filters above a page of runs, newest first."""

    def __init__(self, visit: session.Visit, people: dict[str, str], params) -> None:
        """`params`: the address's query; what is not understood is left out rather than refused."""
        self.visit, self.people = visit, people
        self.filters: dict[str, object] = {
            "agent": params.get("agent") if params.get("agent") in AGENT_NAMES else None,
            "status": params.get("status") if params.get("status") in RUN_STATUSES else None,
            "person": params.get("person") if params.get("person") in people else None,
            "since": day_from(params.get("since")),
            "until": day_from(params.get("until")),
        }
        self.page = page_from(params.get("page"), PAGE_SIZE)
        self.latest = 0  # loads overlap when filters change quickly: only the newest may draw

    async def build(self) -> None:
        with ui.row().classes("w-full items-end gap-3"):
            self._select(AGENT_NAMES, "Agent", "agent")
            self._select(RUN_STATUSES, "Status", "status")
            self._select(self.people, "Person (copilot runs)", "person").classes("w-56")
            for key, label in (("since", "From"), ("until", "Until")):
                day = self.filters[key]
                field = ui.input(label, value=day.isoformat() if isinstance(day, date) else "")
                field.props("type=date dense stack-label clearable").classes("w-40")
                field.mark(f"runs-{key}").on_value_change(lambda e, k=key: self._set(k, day_from(e.value)))
        self.count = ui.label().classes("text-sm text-grey-7").mark("runs-count")
        self.list = ui.column().classes("w-full gap-0 border rounded").mark("runs")
        self.pager = pager().mark("runs-pages")
        self.pager.on_value_change(lambda e: e.value != self.page and self._go(e.value))
        await self.load()

    def _select(self, options: dict, label: str, key: str) -> ui.select:
        select = ui.select(options, label=label, value=self.filters[key], clearable=True)
        select.props("dense").classes("w-40").mark(f"runs-{key}")
        select.on_value_change(lambda e: self._set(key, e.value))
        return select

    async def _set(self, key: str, value: object) -> None:
        self.filters[key] = value
        await self._go(1)

    async def _go(self, page: int) -> None:
        self.page = page
        self.visit.moved_to(self.url())  # Back, reload, bookmarks and a new login come back to this view
        await self.load()

    def url(self) -> str:
        filters = [(key, str(value)) for key, value in self.filters.items() if value]  # a day reads YYYY-MM-DD
        return address(PATH, filters, self.page)

    async def load(self) -> None:
        self.latest += 1
        mine = self.latest
        actor = await self.visit.actor()
        since, until = self.filters["since"], self.filters["until"]
        query = RunQuery(
            agent=self.filters["agent"],
            status=self.filters["status"],
            since=midnight(since) if since else None,
            until=after(until) if until else None,  # inclusive
            offset=(self.page - 1) * PAGE_SIZE,
            limit=PAGE_SIZE,
        )
        try:
            found = await triage.list_runs(db=get_db(), actor=actor, query=query, person_id=self.filters["person"])
        except DeskError as error:
            ui.notify(error.message, type="negative")
            return
        if mine != self.latest:
            return
        if not found.items and found.total and self.page > 1:  # an old link past the end: its last page
            await self._go(last_page(found.total, PAGE_SIZE))
            return
        extras = await triage.run_extras(db=get_db(), actor=actor, run_ids=[run.id for run in found.items])
        if mine != self.latest:
            return
        self.list.clear()
        with self.list:
            if not found.items:
                empty = "No runs match these filters." if any(self.filters.values()) else "No runs yet."
                if since and until and since > until:  # as the metrics page says it
                    empty = "No runs match: pick a start day on or before the end day."
                ui.label(empty).classes("text-grey-7 p-4").mark("runs-empty")
            for run in found.items:
                self._row(run, extras.get(run.id))
        first = (self.page - 1) * PAGE_SIZE + 1
        total = f"{found.total:,}" if found.total_exact else f"{found.total:,}+"
        self.count.set_text(f"{first}–{first + len(found.items) - 1} of {total} runs" if found.items else "")
        pages = last_page(found.total, PAGE_SIZE)
        self.pager.max = pages
        self.pager.update()
        self.pager.set_value(self.page)
        self.pager.set_visibility(pages > 1)

    def _row(self, run: AgentRunRead, extra: triage.RunExtra | None) -> None:
        with (
            ui.row()
            .classes("w-full items-center gap-x-3 gap-y-1 px-3 py-2 border-b hover:bg-grey-1 no-wrap max-md:flex-wrap")
            .mark("run-row")
        ):
            ui.link(when(run.started_at), f"{PATH}/{run.id}").classes("w-44 shrink-0").mark("run-open")
            ui.label(AGENT_NAMES.get(run.agent_name or "copilot", run.agent_name or "")).classes("w-28")
            run_status_chip(run.status)
            if run.actor_id and run.actor_kind == "human":
                ui.label(self.people.get(run.actor_id, "someone")).classes("w-40 truncate")
            elif extra and extra.work_order_id:  # a triage run: the order it was about, by its title
                about = extra.work_order_title or "a deleted order"
                ui.link(about, f"/app/work-orders/{extra.work_order_id}").classes("w-40 truncate").mark("run-order")
            else:
                ui.label("—").classes("w-40")
            ui.label(f"{run.input_tokens:,} in · {run.output_tokens:,} out").classes("text-sm text-grey-8 w-40")
            ui.label(usd(extra.cost_usd) if extra else "").classes("text-sm text-grey-8 w-20")
            with ui.column().classes("grow gap-0 min-w-0"):
                if run.error_code:  # the words a person reads, the stored code beneath them for whoever digs further
                    ui.label(run_error(run.error_code)).classes("text-sm text-red-8 wrap-anywhere").mark("run-error")
                    code = ui.label(run.error_code).classes("text-xs text-grey-7 font-mono wrap-anywhere")
                    code.mark("run-error-code")
