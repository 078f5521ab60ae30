"""The copilot's run record: a run in a conversation, whose changes wait for the person's approval."""

from typing import Any

from desk.agent.copilot import approvals
from desk.agent.core.record import RunRecord


class CopilotRecord(RunRecord):
    staged = False  # a change was put before the person (only then can an approval be pending)

    async def stage(self, **proposal: Any) -> dict:
        """Put a change before the person (`approvals.stage`'s arguments but the run's own); the staged call."""
        self.staged = True
        return await approvals.stage(self.db, run_id=self.run["_id"], user_id=self.run["userId"], **proposal)

    async def ended(self) -> None:
        if self.staged:  # whoever ended the run, none of its approvals may stay pending
            await approvals.expire_for_run(self.db, self.run["_id"])
