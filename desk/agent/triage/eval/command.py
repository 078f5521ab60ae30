"""`desk eval triage`: the options as the command takes them, the progress line, one run or one per form."""

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from pymongo.asynchronous.database import AsyncDatabase

from desk.agent.core import switch
from desk.agent.triage import answer
from desk.agent.triage.eval import labels, runner, runs
from desk.config import Settings
from desk.schema import now

ALL = "all"
BAR = 24


def add_to(commands: argparse._SubParsersAction) -> None:
    """`desk eval triage ...` among the desk's commands."""
    evals = commands.add_parser("eval", help="measure an agent against a labelled set").add_subparsers(
        dest="agent", required=True
    )
    triage = evals.add_parser("triage", help="the triage agent's prompt and call over a labelled set")
    triage.add_argument("--set", type=Path, help="a labelled set, JSON Lines (default: the one the desk ships)")
    triage.add_argument("--out", type=Path, help="a directory for the results (default: DESK_DATA_DIR/evals/...)")
    triage.add_argument("--limit", type=_positive, help="only the first N orders of the set")
    triage.add_argument("--model", help="the model to ask instead of AI_MODEL")
    triage.add_argument("--concurrency", type=_positive, default=2, help="calls at once (default 2)")
    triage.add_argument("--resume", type=Path, metavar="DIR", help="go on with the stopped run in DIR")
    triage.add_argument(
        "--structured-output",
        choices=[*answer.FORMS, ALL],
        help="how the answer is asked for (default AI_STRUCTURED_OUTPUT); all: one run per form, side by side",
    )


@dataclass(frozen=True)
class Line:
    """The progress line: a bar, the running accuracy and cost; redrawn in a terminal, every tenth otherwise."""

    to: TextIO = sys.stderr

    def __call__(self, progress: runner.Progress) -> None:
        terminal = self.to.isatty()
        every = max(1, progress.total // 10)
        if not terminal and progress.done % every and progress.done != progress.total:
            return
        filled = BAR * progress.done // max(1, progress.total)
        text = (
            f"[{'#' * filled}{'.' * (BAR - filled)}] {progress.done}/{progress.total}"
            f"  accuracy {progress.accuracy * 100:.1f} %  cost ${progress.cost_usd:.4f}"
        )
        end = "\n" if progress.done == progress.total or not terminal else ""
        print(f"\r{text}" if terminal else text, end=end, file=self.to, flush=True)


async def triage(db: AsyncDatabase, settings: Settings, args: argparse.Namespace) -> None:
    """Run (or resume) the eval and print where its results are; EvalStopped or labels.BadSet say why not."""
    if not (await switch.read(db)).on:
        raise runner.EvalStopped("AI is turned off for the desk (the switch on /app/admin/agents): turn it on first")
    if args.resume is not None:
        if any(getattr(args, name) is not None for name in ("set", "out", "limit", "model", "structured_output")):
            raise runner.EvalStopped("--resume goes on with the run's own set, model, limit and form: give it alone")
        await _one(db, settings, runner.resumed(args.resume), args.resume, args.concurrency)
        return
    model = args.model or settings.ai_model
    out = args.out or runs.new_dir(settings, model=model, when=now())
    chosen = args.structured_output or settings.ai_structured_output
    set_path = args.set or labels.SHIPPED
    if chosen != ALL:
        plan = runner.plan_for(set_path, limit=args.limit, model=model, form=chosen)
        await _one(db, settings, plan, out, args.concurrency)
        return
    side_by_side: dict[str, dict] = {}
    for form in answer.FORMS:  # a form the provider refuses stops its own run, not the others'
        print(f"structured output: {form}", file=sys.stderr)
        plan = runner.plan_for(set_path, limit=args.limit, model=model, form=form)
        try:
            summary = await _one(db, settings, plan, out / form, args.concurrency)
        except runner.EvalStopped as stopped:
            side_by_side[form] = {"stopped": str(stopped)}
            continue
        side_by_side[form] = {key: summary[key] for key in ("items", "valid", "invalidRate", "accuracy")}
    (out / "forms.json").write_text(json.dumps(side_by_side, indent=1), encoding="utf-8")
    print("form          invalidRate  accuracy")
    for form, numbers in side_by_side.items():
        if "stopped" in numbers:
            print(f"{form:<13} stopped: {numbers['stopped']}")
        else:
            print(f"{form:<13} {numbers['invalidRate'] * 100:>10.1f} % {numbers['accuracy'] * 100:>7.1f} %")
    if stopped_forms := [form for form, numbers in side_by_side.items() if "stopped" in numbers]:
        raise runner.EvalStopped(f"not every form finished ({', '.join(stopped_forms)}): see above")


async def _one(db: AsyncDatabase, settings: Settings, plan: runner.Plan, out: Path, concurrency: int) -> dict:
    summary = await runner.run(db=db, settings=settings, plan=plan, out=out, concurrency=concurrency, progress=Line())
    medium = summary["baselines"]["alwaysMedium"]["accuracy"]
    print(
        f"{summary['model']} ({plan.structuredOutput}): accuracy {summary['accuracy'] * 100:.1f} % "
        f"(always medium {medium * 100:.1f} %), invalid {summary['invalidRate'] * 100:.1f} %, "
        f"cost ${summary['costUsd']:.4f}; report: {out / runs.REPORT}"
    )
    return summary


def _positive(text: str) -> int:
    try:
        number = int(text)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError("must be a whole number, 1 or more")
    return number
