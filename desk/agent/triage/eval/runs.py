"""Eval runs on disk: where they go (under the data directory), what identifies their prompt, the latest one.

A run's directory holds `run.json` (what it was asked: the set, the model, the structured-output form, the
prompt's hash), `results.jsonl` (one line per order, appended as each answer comes), and once it is
complete `summary.json` and `report.html`. `desk eval triage --structured-output all` puts one such
directory per form under its own.
"""

import hashlib
import json
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from desk.agent.triage import answer, prompt
from desk.config import Settings

RUN, RESULTS, SUMMARY, REPORT = "run.json", "results.jsonl", "summary.json", "report.html"
SAMPLE = {"title": "", "description": "", "priority": "medium"}  # the prompt without an order in it
NAME = re.compile(r"^[A-Za-z0-9._-]{1,120}(/[A-Za-z0-9._-]{1,40})?$")  # a run's path below the evals directory


def prompt_hash(form: answer.StructuredOutput) -> str:
    """What the model is asked besides the order: the system prompt, the message around the order, and the
    tool or schema as this form sends it. Another prompt or form is another hash: its evals do not count."""
    asked = json.dumps([prompt.messages(SAMPLE), answer.asked(form)], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(asked.encode()).hexdigest()[:16]


def evals_dir(settings: Settings) -> Path:
    return settings.desk_data_dir / "evals"


def new_dir(settings: Settings, *, model: str, when: datetime) -> Path:
    """`DESK_DATA_DIR/evals/<UTC time>-<model>`: where a run goes when no --out is given."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "-", model).strip("-.")[:60] or "model"
    return evals_dir(settings) / f"{when:%Y%m%d-%H%M%S}-{safe}"


@dataclass(frozen=True)
class Finished:
    """A complete run found under the evals directory: its name (its path below it) and its summary."""

    name: str
    summary: dict[str, Any]


def latest(settings: Settings, *, model: str, prompt_hash: str) -> Finished | None:
    """The most recent complete run of this model and prompt under the data directory, if any."""
    found = [
        run
        for run in finished(settings)
        if (run.summary.get("model"), run.summary.get("promptHash")) == (model, prompt_hash)
    ]
    return max(found, key=lambda run: str(run.summary.get("finishedAt", "")), default=None)


def finished(settings: Settings) -> list[Finished]:
    """Every complete run (one with a readable summary) under the evals directory."""
    root = evals_dir(settings)
    runs = []
    for path in [*root.glob(f"*/{SUMMARY}"), *root.glob(f"*/*/{SUMMARY}")]:
        try:
            summary = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue  # being written, or not ours: not a run to show
        name = path.parent.relative_to(root).as_posix()
        if isinstance(summary, dict) and NAME.match(name):  # a name the report's route would serve
            runs.append(Finished(name, summary))
    return runs


def report_path(settings: Settings, name: str) -> Path | None:
    """The report of the run called `name` (a path below the evals directory, nothing above it), if it exists."""
    if not NAME.match(name) or {".", ".."} & set(name.split("/")):
        return None
    path = evals_dir(settings) / name / REPORT
    return path if path.is_file() else None
