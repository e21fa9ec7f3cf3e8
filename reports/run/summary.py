"""The words and tables of a run's summary, built once and rendered by the terminal, HTML and PDF reports."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from profiler.rundir.results import CATEGORIES, COMPONENTS, RunResult
from reports.format import NOT_RECORDED, fmt_gain, fmt_ms, fmt_number, fmt_pct, fmt_pp
from reports.rundata import LATENCY_LABELS, why_not_measured


@dataclass
class Table:
    """A titled table of printable cells; `note` explains an empty or partial table."""

    title: str
    columns: list[str]
    rows: list[list[str]] = field(default_factory=list)
    sections: list[int] = field(default_factory=list)  # row indices that start a new group
    note: str | None = None


def headline(result: RunResult) -> str:
    """The verdict in one sentence."""
    verdict = result.verdict
    if not verdict:
        return f"No verdict: the time split was not measured ({why_not_measured(result, 'verdict')})."
    spans = _spans(result)
    categories = spans.get("categories", {})
    category = verdict.get("category")
    category_share = f" ({fmt_pct(categories[category])} of the engine thread)" if category in categories else ""
    rule = str(verdict.get("rule") or "no rule recorded")
    sentence = (
        f"{rule[:1].upper()}{rule[1:]}: interpreter (Python) time is {fmt_pct(verdict.get('interpreter_share'))} "
        f"of the engine's busy time; most time goes to {category}{category_share}, mostly in {verdict.get('component')}"
    )
    control = {name: share for name, share in (spans.get("components") or {}).items()
               if name in CONTROL_PATHS and isinstance(share, (int, float))}  # fmt: skip
    if control:
        biggest = max(control, key=lambda name: control[name])
        sentence += f"; the largest control path is the {biggest} ({fmt_pct(control[biggest])})"
    return sentence + "."


# Components that are per-token control flow (what a native rewrite could speed up), not compute or waiting.
CONTROL_PATHS = ("scheduler", "sampler", "kv_alloc", "prepare", "tokenizer", "detokenizer", "model_glue")


def reasons(result: RunResult) -> list[str]:
    return [str(reason) for reason in (result.verdict or {}).get("reasons", [])]


def blind_spots(result: RunResult) -> list[str]:
    return [str(spot) for spot in (result.verdict or {}).get("blind_spots", [])]


def key_figures(result: RunResult) -> list[tuple[str, str]]:
    """The handful of numbers a reader wants next to the verdict."""
    metrics = result.metrics
    figures = [
        ("Output tokens/s", fmt_number(metrics.get("output_token_throughput"))),
        ("Requests/s", fmt_number(metrics.get("request_throughput"))),
        ("TTFT p50 / p99", _pair_ms(metrics, "ttft_ms")),
        ("TPOT p50 / p99", _pair_ms(metrics, "tpot_ms")),
    ]
    if result.verdict:
        figures.append(("Interpreter share", fmt_pct(result.verdict.get("interpreter_share"))))
    figures.append(
        (
            "Completed / failed",
            f"{fmt_number(metrics.get('completed'))} / {fmt_number(metrics.get('failed'))}",
        )
    )
    return figures


def _pair_ms(metrics: dict[str, Any], name: str) -> str:
    # "22.3 / 29.6 ms": one unit for the pair keeps a figure card on one line.
    low, high = _p(metrics, name, "p50"), _p(metrics, name, "p99")
    if low is None or high is None:
        return NOT_RECORDED
    return f"{_short(low)} / {_short(high)} ms"


def _short(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def _p(metrics: dict[str, Any], name: str, stat: str) -> Any:
    return (metrics.get(name) or {}).get(stat)


def _spans(result: RunResult) -> dict[str, Any]:
    return ((result.breakdown or {}).get("methods") or {}).get("spans") or {}


def time_split_table(result: RunResult) -> Table:
    """Categories and components by method, with the two methods' disagreement in percentage points."""
    table = Table("Time split (share of engine-thread wall time)", ["", "spans", "samples", "disagreement"])
    breakdown = result.breakdown
    if not breakdown:
        table.note = f"not measured ({why_not_measured(result, 'breakdown')})"
        return table
    methods = breakdown.get("methods") or {}
    spans, samples = methods.get("spans") or {}, methods.get("samples")
    client = breakdown.get("client_threads")
    if client:
        table.columns.append("client threads")
    disagreement = breakdown.get("disagreement") or {}
    for group, names in (("categories", CATEGORIES), ("components", COMPONENTS)):
        table.sections.append(len(table.rows))
        for name in names:
            span_value = (spans.get(group) or {}).get(name)
            sample_value = ((samples or {}).get(group) or {}).get(name)
            if group == "categories" and name in disagreement:
                gap = fmt_pp(disagreement[name]).lstrip("+")
            elif span_value is not None and sample_value is not None:
                gap = fmt_pp(abs(sample_value - span_value) * 100).lstrip("+")
            else:
                gap = NOT_RECORDED
            row = [name, fmt_pct(span_value), fmt_pct(sample_value), gap]
            if client:
                row.append(fmt_pct((client.get(group) or {}).get(name)))
            table.rows.append(row)
    dispatch = [
        "dispatch",
        fmt_pct(spans.get("dispatch")),
        fmt_pct((samples or {}).get("dispatch")),
        NOT_RECORDED,
    ]
    table.rows.append(dispatch + ([fmt_pct(client.get("dispatch"))] if client else []))
    if samples is None:
        table.note = f"samples not measured ({why_not_measured(result, 'samples')})"
    return table


def latency_table(result: RunResult) -> Table:
    table = Table(
        "Serving latency (measured requests, warm-up excluded)", ["metric", "mean", "p50", "p90", "p99"]
    )
    for name, label in LATENCY_LABELS.items():
        stats = result.metrics.get(name) or {}
        table.rows.append([label] + [fmt_ms(stats.get(stat)) for stat in ("mean", "p50", "p90", "p99")])
    return table


def throughput_table(result: RunResult) -> Table:
    metrics = result.metrics
    table = Table("Throughput", ["metric", "value"])
    table.rows = [
        ["request throughput", fmt_number(metrics.get("request_throughput"), "req/s")],
        ["output token throughput", fmt_number(metrics.get("output_token_throughput"), "tok/s")],
        ["total token throughput", fmt_number(metrics.get("total_token_throughput"), "tok/s")],
        ["goodput (within SLO)", fmt_number(metrics.get("goodput"), "req/s")],
        [
            "completed / failed",
            f"{fmt_number(metrics.get('completed'))} / {fmt_number(metrics.get('failed'))}",
        ],
        ["duration", fmt_number(metrics.get("duration_s"), "s")],
    ]
    return table


def engine_table(result: RunResult) -> Table:
    engine = result.engine or {}
    table = Table("Engine", ["figure", "value"])
    for name in ("steps", "preemptions", "blocks_total", "blocks_free_at_end"):
        if name in engine:
            table.rows.append([name.replace("_", " "), fmt_number(engine[name])])
    for name in ("batch_size", "kv_utilization", "fragmentation_slots"):
        stats = engine.get(name)
        if isinstance(stats, dict):
            show = fmt_pct if name == "kv_utilization" else fmt_number
            table.rows.append(
                [
                    f"{name.replace('_', ' ')} mean / max",
                    f"{show(stats.get('mean'))} / {show(stats.get('max'))}",
                ]
            )
    for name, value in (result.counters or {}).items():
        table.rows.append([name.replace("_", " "), fmt_number(value)])
    overhead = result.overhead or {}
    if overhead.get("throughput_ratio") is not None:
        table.rows.append(["profiling overhead (throughput ratio)", fmt_number(overhead["throughput_ratio"])])
    if not table.rows:
        table.note = "the run recorded no engine figures"
    return table


def predictions_table(result: RunResult) -> Table:
    """Amdahl predictions per component, and the measured gain when a verify run switched the twin on."""
    table = Table(
        "Predicted native gains (end to end)",
        ["component", "share", "native speedup", "predicted", "measured", "gap"],
    )
    predictions = (result.verdict or {}).get("predictions") or {}
    if not predictions:
        table.note = f"no predictions ({why_not_measured(result, 'verdict')})"
    for component, prediction in predictions.items():
        predicted, measured = prediction.get("predicted_gain"), prediction.get("measured_gain")
        gap = (
            fmt_pp((measured - predicted) * 100)
            if predicted is not None and measured is not None
            else NOT_RECORDED
        )
        speedup = prediction.get("native_speedup")
        table.rows.append([
            component, fmt_pct(prediction.get("share")), NOT_RECORDED if speedup is None else f"{speedup:.1f}x",
            fmt_gain(predicted), fmt_gain(measured) if measured is not None else "not measured", gap,
        ])  # fmt: skip
    return table


def collectors_table(result: RunResult) -> Table:
    table = Table("Collectors", ["collector", "status", "reason"])
    for name, status in (result.collectors or {}).items():
        status = status or {}
        table.rows.append([name, str(status.get("status", "unknown")), status.get("reason") or ""])
    if not table.rows:
        table.note = "the run recorded no collector statuses"
    return table


def skipped_collectors(result: RunResult) -> list[tuple[str, str, str]]:
    """(names, status, reason) of the collectors that did not run; one entry per shared status and reason."""
    groups: dict[tuple[str, str], list[str]] = {}
    for name, status in (result.collectors or {}).items():
        status = status or {}
        if status.get("status") != "ok":
            key = (str(status.get("status")), status.get("reason") or "no reason recorded")
            groups.setdefault(key, []).append(name)
    return [(", ".join(names), status, reason) for (status, reason), names in groups.items()]
