"""A finished run's summary (the model beside its baselines, over the same orders), written with its report."""

import json
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from desk.agent.triage.eval import baselines, report, runs
from desk.agent.triage.eval.labels import LabelledOrder
from desk.agent.triage.eval.metrics import Label, Pair, from_result, percentile, quality

if TYPE_CHECKING:
    from desk.agent.triage.eval.runner import Plan


def summarize(
    orders: list[LabelledOrder],
    results: list[dict[str, Any]],
    *,
    model: str,
    prompt_hash: str,
    form: str,
    finished_at: datetime,
) -> dict[str, Any]:
    """summary.json: the model's metrics, latency and cost, what it ran as, and the baselines' metrics."""
    latencies = [result["latencyMs"] for result in results]
    return {
        **quality([from_result(result) for result in results]),
        "latencyP50Ms": percentile(latencies, 50),
        "latencyP95Ms": percentile(latencies, 95),
        "costUsd": round(sum(result["costUsd"] for result in results), 6),
        "model": model,
        "promptHash": prompt_hash,
        "baselines": {
            "alwaysMedium": quality([Pair(_label(order), baselines.ALWAYS_MEDIUM) for order in orders]),
            "keywordRule": quality([Pair(_label(order), baselines.keyword_rule(order)) for order in orders]),
        },
        "structuredOutput": form,
        "finishedAt": finished_at.isoformat(),
    }


def write(
    out: Path, orders: list[LabelledOrder], results: list[dict[str, Any]], plan: "Plan", *, finished_at: datetime
) -> dict[str, Any]:
    """Write `out`/summary.json and `out`/report.html for a complete run; the summary."""
    summary = summarize(
        orders,
        results,
        model=plan.model,
        prompt_hash=plan.promptHash,
        form=plan.structuredOutput,
        finished_at=finished_at,
    )
    (out / runs.SUMMARY).write_text(json.dumps(summary, indent=1), encoding="utf-8")
    (out / runs.REPORT).write_text(report.page(summary, orders, results), encoding="utf-8")
    return summary


def _label(order: LabelledOrder) -> Label:
    return Label(order.priority, order.flag)
