"""report.html: one self-contained page (no script, no outside file; it opens offline, from disk or the desk).

Every piece of text that came from an order, a label or a model is escaped here, and the page's own
Content-Security-Policy allows no script at all: a hostile order reads as the text it is.
"""

from html import escape
from typing import Any

from desk.agent.triage.eval.labels import LabelledOrder
from desk.agent.triage.eval.metrics import INVALID, PRIORITIES, confusion, distance, from_result
from desk.labels import EVAL_METRICS

WORST = 15  # misses shown with their text
TEXT_SHOWN = 600  # characters of a description shown
STYLE = """
body{font:15px/1.45 system-ui,sans-serif;margin:2rem auto;max-width:1000px;padding:0 1rem;color:#1b1b1b}
table{border-collapse:collapse;margin:.5rem 0 1.5rem}td,th{border:1px solid #ccc;padding:.3rem .6rem;text-align:right}
th:first-child,td.text{text-align:left}caption{text-align:left;font-weight:600;padding:.3rem 0}
.right{background:#e3f4e3}.miss{background:#fbe9e7}.meta{color:#555}svg{display:block;margin-bottom:1.5rem}
td.text{max-width:520px;white-space:pre-wrap;word-break:break-word}
"""
CSP = "default-src 'none'; style-src 'unsafe-inline'"


def page(summary: dict[str, Any], orders: list[LabelledOrder], results: list[dict[str, Any]]) -> str:
    """The whole report as one HTML document."""
    title = f"Triage eval: {summary['model']}"
    parts = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
        f"<title>{escape(title)}</title><style>{STYLE}</style></head><body>",
        f"<h1>{escape(title)}</h1>",
        f'<p class="meta">{summary["items"]} orders · structured output {escape(summary["structuredOutput"])} · '
        f"prompt {escape(summary['promptHash'])} · finished {escape(summary['finishedAt'])} · "
        f"latency p50 {summary['latencyP50Ms']} ms, p95 {summary['latencyP95Ms']} ms · "
        f"cost ${summary['costUsd']:.4f}</p>",
        _metrics(summary),
        _matrix(results),
        _latency_chart([result["latencyMs"] for result in results]),
        _worst(orders, results),
        "</body></html>",
    ]
    return "\n".join(parts)


def _metrics(summary: dict[str, Any]) -> str:
    columns = [("Model", summary), *((name, values) for name, values in _baseline_names(summary))]
    head = "".join(f"<th>{escape(name)}</th>" for name, _ in columns)
    rows = "".join(
        f"<tr><th>{label}</th>{''.join(f'<td>{_percent(values[key])}</td>' for _, values in columns)}</tr>"
        for key, label in EVAL_METRICS.items()
    )
    return f"<table><caption>The model beside its baselines</caption><tr><th></th>{head}</tr>{rows}</table>"


def _baseline_names(summary: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    names = {"alwaysMedium": "Always medium", "keywordRule": "Keyword rule"}
    return [(names.get(key, key), values) for key, values in summary["baselines"].items()]


def _matrix(results: list[dict[str, Any]]) -> str:
    counts = confusion(from_result(result) for result in results)
    head = "".join(f"<th>{answer}</th>" for answer in (*PRIORITIES, INVALID))
    rows = []
    for expected in PRIORITIES:
        cells = "".join(
            f'<td class="{"right" if answer == expected else "miss" if counts[expected][answer] else ""}">'
            f"{counts[expected][answer]}</td>"
            for answer in (*PRIORITIES, INVALID)
        )
        rows.append(f"<tr><th>{expected}</th>{cells}</tr>")
    caption = "Confusion matrix: labelled priority (rows) against the model's answer (columns)"
    return f"<table><caption>{caption}</caption><tr><th></th>{head}</tr>{''.join(rows)}</table>"


def _latency_chart(latencies: list[int], *, bins: int = 12, width: int = 640, height: int = 160) -> str:
    """A histogram of the answers' latencies, as inline SVG."""
    if not latencies:
        return "<p>No latencies.</p>"
    low, high = min(latencies), max(latencies)
    step = max(1, -(-(high - low + 1) // bins))
    counts = [0] * bins
    for latency in latencies:
        counts[min(bins - 1, (latency - low) // step)] += 1
    tallest, bar = max(counts), width // bins
    rects = []
    for index, count in enumerate(counts):
        tall = round((height - 30) * count / tallest)
        x, y = index * bar, height - 20 - tall
        start = low + index * step
        rects.append(
            f'<rect x="{x + 2}" y="{y}" width="{bar - 4}" height="{tall}" fill="#4a78b5">'
            f"<title>{start}–{start + step - 1} ms: {count}</title></rect>"
        )
        rects.append(f'<text x="{x + bar // 2}" y="{height - 6}" font-size="10" text-anchor="middle">{start}</text>')
    return (
        "<h2>Latency (ms)</h2>"
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
        f'aria-label="Latency histogram">{"".join(rects)}</svg>'
    )


def _worst(orders: list[LabelledOrder], results: list[dict[str, Any]]) -> str:
    """The misses furthest from their label (no answer first), with the order's text and its label's reason."""
    by_id = {order.id: order for order in orders}
    misses = []
    for result in results:
        predicted = result["predicted"]
        answer = predicted["priority"] if predicted else None
        if answer != result["expected"]["priority"]:
            misses.append((distance(result["expected"]["priority"], answer), result))
    misses.sort(key=lambda miss: -miss[0])
    rows = []
    for _, result in misses[:WORST]:
        order = by_id[result["id"]]
        predicted = result["predicted"]
        said = f"{predicted['priority']}{', flag' if predicted['flag'] else ''}" if predicted else "no valid answer"
        text = order.description[:TEXT_SHOWN] + ("…" if len(order.description) > TEXT_SHOWN else "")
        rows.append(
            f"<tr><td class='text'>{escape(order.id)}</td><td class='text'><b>{escape(order.title)}</b>\n{escape(text)}"
            f"</td><td>{escape(order.priority)}{', flag' if order.flag else ''}</td><td>{escape(said)}</td>"
            f"<td class='text'>{escape(order.note)}</td></tr>"
        )
    if not rows:
        return "<h2>Worst misses</h2><p>None: every priority was right.</p>"
    head = "<tr><th>id</th><th>order</th><th>label</th><th>model</th><th>why the label</th></tr>"
    return f"<h2>Worst misses</h2><table>{head}{''.join(rows)}</table>"


def _percent(value: float) -> str:
    return f"{value * 100:.1f} %"
