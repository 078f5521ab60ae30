"""The eval's HTTP shapes."""

from typing import Any

from desk.agent.triage.eval.quality import Quality
from desk.schema import ReadModel


class QualityRead(ReadModel):
    model: str
    prompt_hash: str
    structured_output: str
    eval_name: str | None
    summary: dict[str, Any] | None
    report_url: str | None
    auto_apply_warning: str | None

    @classmethod
    def of(cls, found: Quality) -> "QualityRead":
        return cls(
            model=found.model,
            prompt_hash=found.prompt_hash,
            structured_output=found.structured_output,
            eval_name=found.latest.name if found.latest else None,
            summary=found.summary,
            report_url=found.report_url,
            auto_apply_warning=found.warning(),
        )
