"""The head of both agent screens (settings and runs): their tabs, and the off states an admin must not miss."""

from nicegui import ui

from components import theme
from desk.actors import Actor
from desk.agent.triage import policy
from desk.agent.triage import service as triage
from desk.config import get_settings
from desk.db.client import get_db

SETTINGS_PATH = "/app/admin/agents"
RUNS_PATH = f"{SETTINGS_PATH}/runs"


def agents_tabs(path: str) -> None:
    """Settings and runs, side by side under the one "Agents" entry of the navigation."""
    with ui.row().classes("gap-4 items-center"):
        theme.page_heading(ui.label("Agents").classes("text-2xl font-semibold"))
        for label, target in (("Triage settings", SETTINGS_PATH), ("All runs", RUNS_PATH)):
            link = ui.link(label, target).classes("text-base")
            if target == path:
                link.classes("font-semibold no-underline")


def ai_off_notice() -> None:
    with ui.card().classes("w-full bg-grey-2").mark("ai-off"):
        ui.label("AI is not enabled on this desk.").classes("text-lg font-semibold")
        ui.label(
            "The triage agent and the copilot do not run, and nothing can be changed here. "
            "An administrator of the server turns AI on with AI_ENABLED and a provider, then restarts the desk."
        ).classes("text-grey-8")


async def switch_banner(actor: Actor) -> None:
    """The off states an admin must not miss: AI off on this desk (the environment, or the admins' switch), or the
    triage agent switched off in its policy."""
    settings = get_settings()
    if not settings.ai_enabled:
        ai_off_notice()
        return
    if not (await triage.ai_switch(db=get_db(), actor=actor)).enabled:
        said = "AI is turned off on this desk: the triage agent and the assistant do not run."
    elif not (await policy.get_config(db=get_db(), settings=settings, actor=actor)).enabled:
        said = "The triage agent is turned off. New work orders wait untriaged."
    else:
        return
    with ui.card().classes("w-full bg-red-1").mark("agents-off-banner"), ui.row().classes("items-center gap-2"):
        ui.icon("power_off", size="md").classes("text-red-8")
        ui.label(said).classes("font-medium")
        ui.link("Turn it on in the triage settings", SETTINGS_PATH)
