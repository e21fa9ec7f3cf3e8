"""The words and tables of a comparison, shared by the terminal, HTML and PDF comparison reports."""

from __future__ import annotations

from collections import Counter

from ..format import NOT_RECORDED, fmt_ms, fmt_number, fmt_pp, fmt_ratio
from ..run.summary import Table
from .analysis import (
    FASTER,
    NOT_COMPARABLE,
    SLOWER,
    ComparisonResult,
    MetricComparison,
    metric_group,
)


def headline(result: ComparisonResult) -> str:
    """One sentence: how many directional metrics got faster, slower, or did not move (or why none can be read)."""
    unlike = (
        f"Unlike runs ({result.unlike}), compared on purpose. " if getattr(result, "unlike", None) else ""
    )
    if result.void:
        return f"{unlike}{result.void[:1].upper()}{result.void[1:]}: no metric's change can be read."
    directional = [m for m in result.metrics if m.better is not None and m.verdict != NOT_COMPARABLE]
    counts = Counter(m.verdict for m in directional)
    if counts[SLOWER] and not counts[FASTER]:
        lead = "After is slower"
    elif counts[FASTER] and not counts[SLOWER]:
        lead = "After is faster"
    elif counts[FASTER] and counts[SLOWER]:
        lead = "Mixed result"
    else:
        lead = "No significant change"
    unchanged = len(directional) - counts[FASTER] - counts[SLOWER]
    return unlike + (
        f"{lead}: {_count(counts[FASTER], 'metric')} faster, {counts[SLOWER]} slower, {unchanged} without a "
        f"significant change ({result.confidence:.0%} intervals; {_count(len(result.before), 'run')} before, "
        f"{_count(len(result.after), 'run')} after)."
    )


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


def _value(metric: MetricComparison, which: float | None) -> str:
    if which is None:
        return NOT_RECORDED
    if metric.unit == "%":
        return f"{which:.2f}%"
    return fmt_ms(which) if metric.unit == "ms" else fmt_number(which, metric.unit)


def metrics_table(result: ComparisonResult) -> Table:
    columns = ["metric", "before", "after", "ratio", f"{result.confidence:.0%} interval", "verdict"]
    if result.mode == "repeats":
        columns.insert(5, "p")
    table = Table("Metrics (ratio = after / before; shares are % of step time)", columns)
    group = None
    for metric in result.metrics:
        kind = metric_group(metric)
        if group is not None and kind != group:
            table.sections.append(len(table.rows))
        group = kind
        interval = (
            f"{metric.ci_low:.3f} to {metric.ci_high:.3f}"
            if metric.ci_low is not None and metric.ci_high is not None
            else NOT_RECORDED
        )
        ratio = (
            fmt_ratio(metric.ratio)
            if metric.ratio is not None
            else f"n/a ({metric.why})"
            if metric.why
            else "n/a"
        )
        row = [
            metric.label,
            _value(metric, metric.before),
            _value(metric, metric.after),
            ratio,
            interval,
            metric.verdict,
        ]
        if result.mode == "repeats":
            row.insert(5, NOT_RECORDED if metric.p_value is None else f"{metric.p_value:.3f}")
        table.rows.append(row)
    return table


def shift_table(result: ComparisonResult) -> Table:
    """Time-split shift after - before in percentage points (spans, else samples)."""
    method = result.time_split_method or "spans"
    table = Table(f"Time split shift ({method}, after - before)", ["", "shift"])
    for group in ("categories", "components"):
        values = result.time_split_shift.get(group)
        if not values:
            continue
        table.sections.append(len(table.rows))
        table.rows.extend([name, fmt_pp(value, 2)] for name, value in values.items())
    if not table.rows:
        table.note = "not available: the runs share no time split (neither spans nor samples on both sides)"
    return table
