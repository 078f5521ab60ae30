"""The triage's measured quality for admins: the last eval of the configured model and prompt, whether it
earns auto-apply, and its report.

An eval counts for the desk's triage when it ran the model the desk is configured with (AI_MODEL) and the
same prompt and structured-output form (its `promptHash`). Auto-apply is earned when that eval's accuracy
beats always answering "medium" by MARGIN or more; without it the admin is warned, may still confirm, and
the confirmation is audited.
"""

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pymongo.asynchronous.database import AsyncDatabase

from desk.access import require_admin
from desk.actors import Actor
from desk.agent.triage import policy
from desk.agent.triage.eval import runs
from desk.config import Settings
from desk.errors import NotFound

MARGIN = 0.10  # accuracy points over always-medium that earn auto-apply
REPORTS = "/api/v1/admin/agents/triage/evals"
WHY = "see or run the agents"


@dataclass(frozen=True)
class Quality:
    """The configured model and prompt, and their last eval (None: never measured here)."""

    model: str
    prompt_hash: str
    structured_output: str
    latest: runs.Finished | None

    @property
    def summary(self) -> dict[str, Any] | None:
        return self.latest.summary if self.latest else None

    @property
    def report_url(self) -> str | None:
        return f"{REPORTS}/{self.latest.name}/report" if self.latest else None

    @property
    def lead(self) -> float | None:
        """Accuracy points over always-medium (0.12 is 12 points), or None without an eval."""
        if self.summary is None:
            return None
        return self.summary["accuracy"] - self.summary["baselines"]["alwaysMedium"]["accuracy"]

    def warning(self) -> str | None:
        """Why auto-apply is not earned yet, in words, or None when it is."""
        if self.lead is None:
            return (
                f"No eval of {self.model} with this prompt exists: nobody has measured how often its priorities "
                "are right. Run `desk eval triage` first."
            )
        if self.lead < MARGIN - 1e-9:
            summary = self.summary or {}
            return (
                f"The last eval of {self.model} was right on {summary['accuracy'] * 100:.1f} % of orders; always "
                f"answering medium was right on {summary['baselines']['alwaysMedium']['accuracy'] * 100:.1f} %. "
                f"It should beat that by {MARGIN * 100:.0f} points before it changes priorities by itself."
            )
        return None


async def quality(*, settings: Settings, actor: Actor) -> Quality:
    """The configured model and prompt, with their last eval under the data directory (read off the event loop:
    every eval's summary file)."""
    require_admin(actor, WHY)
    form = settings.ai_structured_output
    prompt_hash = runs.prompt_hash(form)
    latest = await asyncio.to_thread(runs.latest, settings, model=settings.ai_model, prompt_hash=prompt_hash)
    return Quality(settings.ai_model, prompt_hash, form, latest)


async def confirm_unproven(*, db: AsyncDatabase, actor: Actor, seen: Quality) -> None:
    """Audit an admin's switch to auto-apply despite the warning they were shown."""
    require_admin(actor, WHY)
    after = {
        "warning": seen.warning(),
        "model": seen.model,
        "promptHash": seen.prompt_hash,
        "eval": seen.latest.name if seen.latest else None,
    }
    await policy.record(db, agent=policy.AGENT, actor_id=actor.id, action="auto_apply_unproven", after=after)


def report(*, settings: Settings, actor: Actor, name: str) -> Path:
    """The report of the eval called `name`, for admins only; NotFound when there is none."""
    require_admin(actor, WHY)
    found = runs.report_path(settings, name)
    if found is None:
        raise NotFound("No eval report by that name.")
    return found
