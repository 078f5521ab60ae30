"""One eval run: the triage's own prompt and structured-output call, order by order, billed to `agent:eval`.

Each answer is appended to `results.jsonl` as it comes, so a run stopped anywhere (Ctrl+C, a kill, a failed
call, the budget) goes on from where it was with `--resume DIR`: the orders already answered are not asked
again. A failed provider call stops the run (it says which order and why) rather than scoring an outage as
the model's wrong answers; an invalid answer is a result, and counts as wrong.
"""

import asyncio
import contextlib
import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pymongo.asynchronous.database import AsyncDatabase

from desk.agent.core import budget
from desk.agent.core.provider import CHARS_PER_TOKEN, AIUnavailable, Completed, Provider, Usage
from desk.agent.triage import answer, prompt
from desk.agent.triage.eval import labels, runs, scoring
from desk.agent.triage.eval.labels import LabelledOrder
from desk.config import Settings
from desk.schema import now

AGENT = "eval"  # its spend scope: agent:eval, under the desk's global cap
NEW_ORDER_PRIORITY = "medium"  # what a new order says before the triage reads it (the form's default)


class EvalStopped(Exception):
    """The run cannot start or go on; the message is one line for the person who ran it."""


@dataclass(frozen=True)
class Plan:
    """What a run is asked to do; stored as its run.json, so `--resume` does exactly the same."""

    set: str
    limit: int | None
    model: str
    structuredOutput: answer.StructuredOutput  # run.json's field, camelCase like the summary's
    promptHash: str


@dataclass(frozen=True)
class Progress:
    done: int
    total: int
    accuracy: float
    cost_usd: float


def plan_for(set_path: Path, *, limit: int | None, model: str, form: answer.StructuredOutput) -> Plan:
    return Plan(str(set_path.resolve()), limit, model, form, runs.prompt_hash(form))


def resumed(out: Path) -> Plan:
    """The plan of the run in `out`; EvalStopped when there is none, or the prompt has changed since it began."""
    try:
        plan = Plan(**json.loads((out / runs.RUN).read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError):
        raise EvalStopped(f"{out} holds no eval run to resume (no readable {runs.RUN})") from None
    if runs.prompt_hash(plan.structuredOutput) != plan.promptHash:
        raise EvalStopped(f"the triage prompt has changed since the run in {out} began: start a new run")
    return plan


async def run(
    *,
    db: AsyncDatabase,
    settings: Settings,
    plan: Plan,
    out: Path,
    concurrency: int,
    progress: Callable[[Progress], None] = lambda _: None,
) -> dict[str, Any]:
    """Run `plan` into `out` (going on from its results so far), then write its summary and report; the summary."""
    orders, done = _prepare(plan, out)  # labels.BadSet before anything is called
    todo = [order for order in orders if order.id not in done]
    provider = Provider.from_settings(settings.model_copy(update={"ai_model": plan.model}))
    try:
        this = _Run(db, settings, provider, plan, await budget.desk_zone(db))
        await this.affordable(todo)
        tally = _Tally(len(orders), list(done.values()), progress)
        await this.ask_all(todo, out, concurrency, tally)
    finally:
        await provider.aclose()
    return scoring.write(out, orders, _finished(out, orders), plan, finished_at=now())


def _prepare(plan: Plan, out: Path) -> tuple[list[LabelledOrder], dict[str, dict[str, Any]]]:
    """The plan's orders (the set checked whole) and the results already in `out`; the plan written there."""
    orders = labels.load(Path(plan.set))[: plan.limit]
    out.mkdir(parents=True, exist_ok=True)
    (out / runs.RUN).write_text(json.dumps(asdict(plan), indent=1), encoding="utf-8")
    return orders, _results_so_far(out / runs.RESULTS, {order.id for order in orders})


def _finished(out: Path, orders: list[LabelledOrder]) -> list[dict[str, Any]]:
    results = _results_so_far(out / runs.RESULTS, {order.id for order in orders})
    return [results[order.id] for order in orders]


@dataclass(frozen=True)
class _Run:
    db: AsyncDatabase
    settings: Settings
    provider: Provider
    plan: Plan
    zone: str  # the desk's time zone: the spend ledger's days

    async def affordable(self, todo: list[LabelledOrder]) -> None:
        """Refuse to start when the most the orders left can cost, on top of today's spend, would pass a cap."""
        most = sum(self.provider.cost(self.most(order)) for order in todo)
        caps = (
            (self.settings.agent_daily_spend_usd, "AGENT_DAILY_SPEND_USD"),
            (self.settings.ai_global_daily_spend_usd, "AI_GLOBAL_DAILY_SPEND_USD"),
        )
        for key, (cap, name) in zip(budget.keys(user_id=None, agent=AGENT, zone=self.zone), caps, strict=True):
            spent = await budget.spent(self.db, key)
            if spent + most > cap:
                raise EvalStopped(
                    f"{len(todo)} orders could cost up to ${most:.4f}; with ${spent:.4f} spent today that passes "
                    f"{name} (${cap:.2f}): use --limit, or run it another day"
                )

    def most(self, order: LabelledOrder) -> Usage:
        """The most one order's call can cost: its whole request in tokens, and every output token allowed."""
        sent = json.dumps([_messages(order), answer.asked(self.plan.structuredOutput)], ensure_ascii=False)
        return Usage(len(sent) // CHARS_PER_TOKEN, self.provider.max_output_tokens)

    async def ask_all(self, todo: list[LabelledOrder], out: Path, concurrency: int, tally: "_Tally") -> None:
        slots = asyncio.Semaphore(concurrency)
        with (out / runs.RESULTS).open("a", encoding="utf-8") as results:

            async def one(order: LabelledOrder) -> None:
                async with slots:
                    result = await self.ask(order)
                results.write(json.dumps(result, ensure_ascii=False) + "\n")
                results.flush()  # a kill loses at most the answers still in flight
                tally.add(result)

            try:
                async with asyncio.TaskGroup() as group:
                    for order in todo:
                        group.create_task(one(order))
            except* EvalStopped as stopped:
                raise EvalStopped(f"{stopped.exceptions[0]}; the answers so far are kept: --resume {out}") from None

    async def ask(self, order: LabelledOrder) -> dict[str, Any]:
        """One order's call, reserved before it is made and billed after; its result line."""
        form, provider = self.plan.structuredOutput, self.provider
        meter = budget.Meter(self.db, cost=provider.cost, user_id=None, agent=AGENT, zone=self.zone)
        try:
            await meter.reserve(self.settings, self.most(order))
        except budget.BudgetExceeded as refused:
            raise EvalStopped(f"stopped at order {order.id}: {refused.message}") from None
        started = time.monotonic()
        try:
            completed = await _complete(provider, _messages(order), form)
        except AIUnavailable as failure:
            await meter.charge(failure.usage)  # a call made is a call paid
            raise EvalStopped(f"the provider failed on order {order.id} ({failure.kind})") from None
        latency_ms = round((time.monotonic() - started) * 1000)
        await meter.charge(completed.usage)
        proposal = answer.read(completed, form).proposal
        predicted = (
            None if proposal is None else {"priority": proposal.suggestedPriority, "flag": proposal.flagForDispatcher}
        )
        return {
            "id": order.id,
            "expected": {"priority": order.priority, "flag": order.flag},
            "predicted": predicted,
            "valid": predicted is not None,
            "latencyMs": latency_ms,
            "inputTokens": completed.usage.input_tokens,
            "outputTokens": completed.usage.output_tokens,
            "costUsd": round(provider.cost(completed.usage), 8),
        }


def _messages(order: LabelledOrder) -> list[dict[str, str]]:
    return prompt.messages({"title": order.title, "description": order.description, "priority": NEW_ORDER_PRIORITY})


async def _complete(provider: Provider, messages: list[dict], form: answer.StructuredOutput) -> Completed:
    async with contextlib.aclosing(provider.stream(messages, **answer.asked(form))) as events:
        async for event in events:
            if isinstance(event, Completed):
                return event
    raise AIUnavailable(kind="no_completion")


def _results_so_far(path: Path, ids: set[str]) -> dict[str, dict[str, Any]]:
    """The results already in the file, by order id; a last line cut short by a kill is dropped from the file."""
    if not path.exists():
        return {}
    found: dict[str, dict[str, Any]] = {}
    kept = 0
    with path.open("rb+") as file:
        for line in file:
            try:
                result = json.loads(line) if line.endswith(b"\n") else None
            except ValueError:
                result = None
            if not isinstance(result, dict):
                break  # the line a kill cut: it, and nothing after it, is asked again
            kept += len(line)
            if result.get("id") in ids:
                found[result["id"]] = result
        file.truncate(kept)
    return found


class _Tally:
    """The running accuracy and cost, for the progress line."""

    def __init__(self, total: int, earlier: list[dict[str, Any]], show: Callable[[Progress], None]) -> None:
        self.total, self.show = total, show
        self.done = self.right = 0
        self.cost = 0.0
        for result in earlier:
            self._count(result)
        show(self._now())

    def add(self, result: dict[str, Any]) -> None:
        self._count(result)
        self.show(self._now())

    def _count(self, result: dict[str, Any]) -> None:
        self.done += 1
        self.cost += result["costUsd"]
        predicted = result["predicted"]
        self.right += predicted is not None and predicted["priority"] == result["expected"]["priority"]

    def _now(self) -> Progress:
        return Progress(self.done, self.total, self.right / self.done if self.done else 0.0, self.cost)
