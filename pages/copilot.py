"""/app/copilot: the conversation's full page, with a new conversation and one's own runs, live (COP-8, COP-10)."""

from nicegui import APIRouter, background_tasks, ui

from components.copilot.panel import Copilot, ai_off_reason, show_current_conversation
from components.formats import ago, when
from components.runtime import session
from components.runtime.page import desk_page
from desk import access, state
from desk.agent.copilot import sessions as agent_sessions
from desk.agent.copilot.turn import UNREACHED  # the run's call never reached the model: nothing was billed
from desk.agent.core import switch
from desk.config import get_settings
from desk.db.client import get_db
from desk.errors import DeskError, NotFound
from desk.labels import RUN_STATUSES

router = APIRouter()
RUNS_REFRESH_SECONDS = 3.0  # the list of runs follows turns of other tabs and processes
RUNS_PATH = "/app/copilot/runs"
SPEAKERS = {"user": "You", "assistant": "Assistant"}  # a transcript's tool results and system text are the admin's


@desk_page(router, "/app/copilot", title="Assistant", heading=True)
async def copilot_page(visit: session.Visit, me: session.SessionUser) -> None:
    body = _Body(visit, me)
    drawn = body.draw(ai_off_reason(me))
    body.follow()  # before the load: a flip while it loads is not missed
    if drawn is not None:
        await drawn.load()


@desk_page(router, RUNS_PATH + "/{run_id}", title="A past conversation")
async def past_run_page(visit: session.Visit, me: session.SessionUser, run_id: str) -> None:
    """One of the person's own runs, read only: what was asked and answered (the service refuses anyone else's)."""
    ui.link("← Back to the assistant", "/app/copilot").classes("text-sm")
    try:
        detail = await agent_sessions.own_run(db=get_db(), actor=me.actor, run_id=run_id)
    except NotFound:
        ui.label("There is no such run of yours (runs are kept 90 days).").classes("text-lg").mark("missing")
        return
    run = detail.run
    ui.label(f"Asked {when(run.started_at)}").classes("text-2xl font-semibold")
    ui.label(RUN_STATUSES.get(run.status, run.status)).classes("text-sm text-grey-8").mark("past-run-status")
    with ui.column().classes("w-full max-w-3xl gap-2").mark("past-transcript"):
        said = [m for m in detail.messages if m.role in SPEAKERS and m.content]
        if not said:
            ui.label("No messages kept for this run.").classes("text-grey-7")
        for message in said:
            with ui.card().classes("w-full gap-1" if message.role == "assistant" else "w-full gap-1 bg-grey-1"):
                ui.label(f"{SPEAKERS[message.role]} · {when(message.created_at)}").classes("text-xs text-grey-8")
                ui.label(message.content).classes("whitespace-pre-wrap wrap-anywhere").mark("past-message")


class _Body:
    """The page's body: the assistant, or why there is none. It follows the desk's AI switch while the page is open,
    as the header does (components/frame.py): an admin's flip, here or (read by any tab's header check) in another
    process, swaps one for the other without a reload."""

    def __init__(self, visit: session.Visit, me: session.SessionUser) -> None:
        self.visit, self.me = visit, me
        self.into = ui.element("div").classes("w-full")
        self.off: str | None = None
        self.drawn = False

    def draw(self, off: str | None) -> "_Assistant | None":
        """Draw the body for `off` (None: the assistant, returned to be loaded); nothing when it shows that already."""
        if self.drawn and off == self.off:
            return None
        self.off, self.drawn = off, True
        self.into.clear()
        with self.into:
            if off is not None:
                _unavailable(off)
                return None
            return _Assistant(self.visit)

    def follow(self) -> None:
        client = ui.context.client

        def flipped(seen: switch.Switch) -> None:
            if client.is_deleted or self.visit.gone:  # a page left behind; its on_delete may not have run yet
                unsubscribe()
                return
            with client:
                panel = self.draw(ai_off_reason(self.me, desk_switch=seen))
            if panel is not None:
                background_tasks.create(panel.load(), name="copilot-page-back")

        unsubscribe = state.current().bus.subscribe("ai_switch", None, flipped)
        client.on_delete(unsubscribe)


class _Assistant:
    """The conversation, a new conversation, and the person's runs, live (drawn where it is made)."""

    def __init__(self, visit: session.Visit) -> None:
        self.visit = visit
        with ui.row().classes("w-full gap-6 items-start no-wrap max-md:flex-wrap"):  # a phone: the runs below
            with ui.column().classes("w-[40rem] max-w-full shrink-0 gap-2"):
                with ui.card().classes("w-full h-[calc(100vh-12rem)] min-h-[24rem]"):
                    self.panel = Copilot(visit)
                    self.panel.build()
                new = ui.button("New conversation", icon="add", on_click=lambda: _new(visit)).props("outline")
                new.mark("copilot-new")
            with ui.column().classes("grow min-w-0 gap-2"):
                ui.label("Your runs").classes("text-lg font-semibold")
                self.runs_list = ui.column().classes("w-full gap-0")
                self.panel.on_change = lambda: ui.timer(0.2, self.refresh, once=True)
                ui.timer(RUNS_REFRESH_SECONDS, self.refresh)

    async def refresh(self) -> None:
        if not self.runs_list.is_deleted:  # the switch took this assistant off the page meanwhile
            await _runs(self.visit, self.runs_list)

    async def load(self) -> None:
        if not self.runs_list.is_deleted:
            await self.panel.load()
        await self.refresh()


def _unavailable(off: str) -> None:
    """Why there is no assistant here, and what would bring it."""
    with ui.card().classes("w-full max-w-xl gap-2 bg-grey-2").mark("copilot-page-off"):
        ui.label(off).classes("text-lg font-semibold")
        if off == access.AI_OFF_FOR_YOU:  # off for this person alone: theirs to turn on
            ui.link("Turn AI assistance on in your profile", "/app/profile").mark("copilot-page-profile")
        elif get_settings().ai_enabled:  # an admin's kill switch: their sentence says who turns it on
            return
        else:
            ui.label(
                "The assistant answers questions about your work orders and drafts changes for you to approve. "
                "An administrator of the server turns it on with AI_ENABLED and a provider, then restarts the desk."
            ).classes("text-grey-8")


async def _new(visit: session.Visit) -> None:
    """Archive the conversation and start an empty one (refused while a turn in it runs or a change waits)."""
    actor = await visit.actor()
    try:
        await agent_sessions.open_session(db=get_db(), settings=get_settings(), actor=actor)
    except DeskError as error:
        ui.notify(error.message, type="warning")
        return
    await show_current_conversation(actor.id)  # this panel and the person's other tabs


async def _runs(visit: session.Visit, into: ui.column) -> None:
    """The person's newest runs: what was asked, how it ended, what it used."""
    if visit.gone:
        return
    actor = await visit.actor(touch=False)
    db = get_db()
    found = (await agent_sessions.own_runs(db=db, actor=actor))[:25]
    asked = await agent_sessions.asked_in(db=db, actor=actor, run_ids=[run.id for run in found])
    into.clear()
    with into:
        if not found:
            ui.label("No runs yet.").classes("text-grey-7")
            return
        with ui.column().classes("w-full gap-0 border rounded").mark("runs"):
            for run in found:
                # the question on a line of its own, what came of it below: beside three fixed columns a
                # question had a few letters' width left, a word per line
                with ui.column().classes("w-full gap-0 px-3 py-1 border-b text-sm"):
                    question = asked.get(run.id, "")
                    shown = question if len(question) <= 80 else question[:80] + "…"
                    opened = ui.link(shown or "(no question kept)", f"{RUNS_PATH}/{run.id}")
                    opened.classes("w-full wrap-anywhere").mark("run-asked")
                    with ui.row().classes("gap-x-3 gap-y-0"):
                        ui.label(RUN_STATUSES.get(run.status, run.status))
                        if run.error_code == UNREACHED:
                            used = "Not reached · no cost"
                        else:
                            used = f"{run.input_tokens + run.output_tokens:,} tokens"
                        spent = ui.label(used).classes("text-grey-8")
                        spent.tooltip("Tokens: the model's pieces of text, read and written; what the assistant costs.")
                        ui.label(ago(run.started_at)).classes("text-grey-7").tooltip(when(run.started_at))
