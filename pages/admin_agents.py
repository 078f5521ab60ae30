"""/app/admin/agents: the agents for admins: the desk-wide AI switch, the triage policy, the attention list, the
worker, the audit.

Everything here goes through the triage services in process (desk/agent/triage/policy.py, desk/agent/triage/
service.py), as the API does. The policy is saved at the version the admin read, so a second admin who
saved first is never overwritten; the desk-wide switch is apart from it, so flipping it trips no open form.
The switch, the stored policy, the worker's health and the audit are re-read every few seconds; the attention
list follows the change feed, which every stored or decided suggestion enters.
"""

from nicegui import APIRouter, ui

from components.agents.attention import AttentionList
from components.agents.heading import SETTINGS_PATH, agents_tabs, ai_off_notice
from components.agents.policy_form import PolicyForm
from components.agents.quality_card import acceptance_chart, quality_card
from components.agents.switch import AiSwitch
from components.agents.worker_health import WorkerHealth
from components.runtime import live, session
from components.runtime.page import desk_page
from desk.actors import Actor
from desk.agent.triage import acceptance, policy
from desk.agent.triage import service as triage
from desk.agent.triage.eval import quality
from desk.agent.triage.models import AgentConfigRead, AiSwitchRead
from desk.config import get_settings
from desk.db.client import get_db
from desk.errors import DeskError

router = APIRouter()
PATH = SETTINGS_PATH
REFRESH_SECONDS = 2.0


@desk_page(router, PATH, title="Agents", admin=True)
async def admin_agents_page(visit: session.Visit, me: session.SessionUser) -> None:
    agents_tabs(PATH)
    if not get_settings().ai_enabled:
        ai_off_notice()
        return
    config = await policy.get_config(db=get_db(), settings=get_settings(), actor=me.actor)
    state = await triage.ai_switch(db=get_db(), actor=me.actor)
    screen = AgentsScreen(visit, me.actor, config, state)
    await screen.build()
    ui.timer(REFRESH_SECONDS, screen.refresh)
    live.on_change(screen.on_changes)


class AgentsScreen:
    """The agent's sections, kept in step: the worker's figures say when the switch or the stored policy holds it
    off, and the lines under the off banner say why triage waits."""

    def __init__(self, visit: session.Visit, actor: Actor, config: AgentConfigRead, state: AiSwitchRead) -> None:
        # `actor` serves the background re-reads: the frame's own check closes the page of someone no longer admin
        self.visit, self.actor = visit, actor
        self.switch = AiSwitch(visit, state=state, switched=self._switched)
        self.policy = PolicyForm(visit, config, saved=self._saved, reloaded=self._reloaded)
        # the policy as stored: what holds the agent now, which another admin may have changed under an open form
        self.stored = config
        self.refreshing = False

    async def build(self) -> None:
        self.switch.banner()
        why = ui.column().classes("w-full gap-2")  # why triage waits (outage, hours, policy), under the off banner
        with ui.row().classes("w-full gap-4 items-stretch no-wrap max-md:flex-wrap"):  # a phone: one above the other
            self.switch.card()
            self.policy.build()
        with ui.row().classes("w-full gap-4 items-stretch no-wrap max-md:flex-wrap"):  # how good it is, how it fares
            quality_card(await quality.quality(settings=get_settings(), actor=self.actor))
            acceptance_chart(await acceptance.by_week(db=get_db(), actor=self.actor))
        await self.switch.show(self.switch.state)
        self.attention = AttentionList(self.actor)
        self.health = WorkerHealth(self.visit, self.actor, why=why)
        self._hold()
        await self.attention.show()
        await self.health.show()

    def _hold(self) -> None:
        """Tell the worker's figures what holds the triage agent off (the desk-wide switch, or its own in the policy
        as stored) and whose day the spend is counted in (the stored policy's time zone)."""
        if not self.switch.on:
            self.health.held_by = "switch"
        else:
            self.health.held_by = None if self.stored.enabled else "policy"
        self.health.zone = self.stored.time_zone

    async def _switched(self, on: bool) -> None:
        self._hold()
        await self.health.show()

    async def _saved(self, saved: AgentConfigRead) -> None:
        self.stored = saved
        self._hold()
        await self.health.show()

    def _reloaded(self, current: AgentConfigRead) -> None:
        self.stored = current
        self._hold()

    async def refresh(self) -> None:
        """The switch and the policy as stored (another admin, another tab), the worker and the audit, every few
        seconds; the open form keeps what its admin is editing."""
        if self.refreshing:
            return
        self.refreshing = True
        try:
            state = await triage.ai_switch(db=get_db(), actor=self.actor)
            if self.switch.newer(state):
                await self.switch.show(state)
            self.stored = await policy.get_config(db=get_db(), settings=get_settings(), actor=self.actor)
            self._hold()
            await self.health.show()
        except DeskError:
            return  # no longer an admin: the frame's check closes the page
        finally:
            self.refreshing = False

    async def on_changes(self, batch: list[dict]) -> None:
        await self.attention.show()
