"""Charts of a comparison: improvement factors with intervals, and the time-split shift."""

from __future__ import annotations

import numpy as np

from reports.compare.analysis import FASTER, HIGHER, LOWER, SLOWER, ComparisonResult
from reports.format import fmt_pp
from reports.run.charts import COMPONENT_COLOURS, Target

VERDICT_COLOURS = {FASTER: "#1a7f37", SLOWER: "#c0392b", HIGHER: "#0072B2", LOWER: "#E69F00"}


def draw_improvements(target: Target, result: ComparisonResult) -> None:
    """Each directional metric as an improvement factor (right of 1 is better) with its interval."""
    ax = target.subplots()
    rows = [
        (metric, metric.ratio, metric.ci_low, metric.ci_high)
        for metric in result.metrics
        if metric.better is not None and metric.ratio and metric.ci_low and metric.ci_high
    ]
    for position, (metric, ratio, ci_low, ci_high) in enumerate(rows):
        # Latency ratios flip so that every row reads the same way: right of 1 means after is better.
        flip = metric.better == "lower"
        point = 1 / ratio if flip else ratio
        low, high = (1 / ci_high, 1 / ci_low) if flip else (ci_low, ci_high)
        colour = VERDICT_COLOURS.get(metric.verdict, "#777777")
        ax.plot([low, high], [position, position], color=colour, linewidth=2.2, solid_capstyle="butt")
        ax.plot(point, position, "o", color=colour, markersize=6)
        ax.text(high, position, f"  {point:.3f}x  {metric.verdict}", va="center", fontsize=8, color=colour)
    ax.axvline(1.0, color="#333333", linewidth=1)
    ax.set_yticks(range(len(rows)), [metric.label for metric, *_ in rows])
    ax.invert_yaxis()
    ax.set_xscale("log")
    values = [v for _, _, low, high in rows for v in (low, high, 1 / low, 1 / high) if np.isfinite(v)]
    if values:
        spread = max(abs(np.log(min(values))), abs(np.log(max(values))), np.log(1.05))
        ax.set_xlim(np.exp(-spread * 1.1), np.exp(spread * 1.6))  # room on the right for the labels
    ax.minorticks_off()
    ticks = [
        t
        for t in (0.5, 0.67, 0.8, 0.9, 1.0, 1.1, 1.25, 1.5, 2.0)
        if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]
    ]
    ax.set_xticks(ticks, [f"{t:g}x" for t in ticks])
    ax.set_xlabel("improvement factor: throughput after/before, latency before/after (right of 1 is better)")
    ax.set_title(f"After vs before, {result.confidence:.0%} intervals")
    ax.grid(axis="y", visible=False)


def draw_shift(target: Target, result: ComparisonResult) -> None:
    """Percentage-point shift of each component's share of the engine thread."""
    ax = target.subplots()
    shift = result.time_split_shift.get("components") or {}
    if not shift:
        shift = {
            m.name.removeprefix("share."): m.after - m.before
            for m in result.metrics
            if m.name.startswith("share.") and m.before is not None and m.after is not None
        }
        ax.set_title("Phase share of step time: after - before")
    else:
        ax.set_title("Component share of engine-thread time: after - before (spans)")
    names = list(shift)
    values = [shift[name] for name in names]
    ax.barh(range(len(names)), values, color=[COMPONENT_COLOURS.get(name, "#0072B2") for name in names])
    for position, value in enumerate(values):
        ax.text(
            value,
            position,
            f" {fmt_pp(value, 2)} ",
            va="center",
            ha="left" if value >= 0 else "right",
            fontsize=8,
        )
    ax.axvline(0, color="#333333", linewidth=1)
    ax.set_yticks(range(len(names)), names)
    ax.invert_yaxis()
    limit = max([abs(v) for v in values] + [0.5]) * 1.4
    ax.set_xlim(-limit, limit)
    ax.set_xlabel("percentage points")
    ax.grid(axis="y", visible=False)
