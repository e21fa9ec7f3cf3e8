"""Charts of a comparison: ratios after/before with their intervals, and the time-split shift."""

from __future__ import annotations

import numpy as np

from ..format import fmt_number, fmt_pp, fmt_ratio
from ..run.charts import COMPONENT_COLOURS, Target
from .analysis import (
    FASTER,
    HIGHER,
    LOWER,
    SLOWER,
    ComparisonResult,
    MetricComparison,
)
from .drift import YardstickDrift

VERDICT_COLOURS = {FASTER: "#1a7f37", SLOWER: "#c0392b", HIGHER: "#0072B2", LOWER: "#E69F00"}


def draw_improvements(target: Target, result: ComparisonResult) -> None:
    """Each directional metric's ratio after/before (the table's number) with its interval, on a log
    axis: throughput in one panel (right of 1 is better), latency in the other (left of 1 is better)."""
    groups = [
        (title, [m for m in result.metrics if m.better == better and _drawable(m)])
        for title, better in (
            ("Throughput: after / before (right of 1 is better)", "higher"),
            ("Latency: after / before (left of 1 is better)", "lower"),
        )
    ]
    groups = [(title, rows) for title, rows in groups if rows]
    if not groups:
        ax = target.subplots()
        ax.text(0.5, 0.5, "no metric could be compared", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
        return
    axes = target.subplots(
        len(groups), 1, sharex=True, height_ratios=[len(rows) for _, rows in groups], squeeze=False
    )[:, 0]
    values = [v for _, rows in groups for m in rows for v in (m.ci_low, m.ci_high, m.ratio)]
    low, high = ratio_limits(values)
    for ax, (title, rows) in zip(axes, groups):
        for position, metric in enumerate(rows):
            colour = VERDICT_COLOURS.get(metric.verdict, "#777777")
            ax.plot(
                [metric.ci_low, metric.ci_high],
                [position, position],
                color=colour,
                linewidth=2.2,
                solid_capstyle="butt",
            )
            ax.plot(metric.ratio, position, "o", color=colour, markersize=6)
            # The same figure the table prints, so chart and table can be read against each other.
            ax.text(
                metric.ci_high,
                position,
                f"  {fmt_ratio(metric.ratio)}  {metric.verdict}",
                va="center",
                fontsize=8,
                color=colour,
            )
        ax.axvline(1.0, color="#333333", linewidth=1)
        ax.set_yticks(range(len(rows)), [metric.label for metric in rows])
        ax.set_ylim(len(rows) - 0.4, -0.6)
        ax.set_title(title, fontsize=9, loc="left")
        ax.grid(axis="y", visible=False)
    bottom = axes[-1]
    bottom.set_xscale("log")
    bottom.set_xlim(low, high)
    bottom.minorticks_off()
    ticks = log_ticks(low, high)
    bottom.set_xticks(ticks, [f"{tick:g}x" for tick in ticks])
    bottom.set_xlabel(f"ratio after / before, {result.confidence:.0%} interval (the table's ratio column)")


def _drawable(metric: MetricComparison) -> bool:
    return all(
        value is not None and np.isfinite(value) and value > 0
        for value in (metric.ratio, metric.ci_low, metric.ci_high)
    )


def ratio_limits(values: list[float | None]) -> tuple[float, float]:
    """Log-axis limits around 1 that hold every ratio, with room on the right for the labels."""
    logs = [abs(np.log(v)) for v in values if v is not None and np.isfinite(v) and v > 0]
    spread = max(logs + [np.log(1.05)])
    return float(np.exp(-spread * 1.15)), float(np.exp(spread * 1.9))


# Candidate ticks, roundest first: the ratios a reader names (2x, 0.5x, 10x, ... 1.1x, 0.9x).
_TICKS = (
    1.0,
    2.0,
    0.5,
    10.0,
    0.1,
    5.0,
    0.2,
    100.0,
    0.01,
    20.0,
    0.05,
    50.0,
    0.02,
    1.5,
    0.67,
    3.0,
    0.33,
    1.25,
    0.8,
    4.0,
    0.25,
    1.1,
    0.9,
    1.05,
    0.95,
    1.02,
    0.98,
)


def log_ticks(low: float, high: float, max_ticks: int = 8) -> list[float]:
    """Round ratios inside [low, high], 1 always among them, at least 1/max_ticks of the axis apart in
    log space: labels on a log axis collide when two round ratios sit close together (0.9x, 0.95x, 1x).
    The roundest candidates are placed first, so 2x wins over 1.5x when only one fits."""
    gap = (np.log(high) - np.log(low)) / max_ticks
    chosen: list[float] = []
    for tick in _TICKS:
        if low <= tick <= high and all(abs(np.log(tick) - np.log(other)) >= gap for other in chosen):
            chosen.append(tick)
    return sorted(chosen)


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


SIDE_STYLES = {"before": ("#0072B2", "o"), "after": ("#E69F00", "s")}


def draw_yardstick(target: Target, yardstick: YardstickDrift) -> None:
    """The yardstick of every run in the order the runs ran, each side's mean dashed: a figure the
    change cannot move, so a slope or a gap here is the machine."""
    ax = target.subplots()
    for side, (colour, marker) in SIDE_STYLES.items():
        runs = sorted((run for run in yardstick["runs"] if run["side"] == side), key=lambda run: run["order"])
        mean = yardstick["before_mean"] if side == "before" else yardstick["after_mean"]
        ax.plot(
            [run["order"] for run in runs],
            [run["value"] for run in runs],
            marker,
            color=colour,
            markersize=7,
            label=f"{side}: mean {fmt_number(round(mean, 1), yardstick['unit'])}",
        )
        ax.axhline(mean, color=colour, linestyle="--", linewidth=1)
    orders = [run["order"] for run in yardstick["runs"]]
    ax.set_xticks(orders, [str(order) for order in orders])
    values = [run["value"] for run in yardstick["runs"]]
    middle, half = (max(values) + min(values)) / 2, max(max(values) - min(values), 0.02 * max(values)) * 0.8
    ax.set_ylim(middle - half, middle + half)  # at least +-1.6% shown: a flat line must look flat
    ax.set_xlabel("run, in the order the runs ran")
    ax.set_ylabel(f"{yardstick['unit']} per token")
    ax.set_title(
        f"Yardstick: {yardstick['label']} (after/before {yardstick['ratio']:.3f}x, spread {yardstick['spread']:.1%})"
    )
    ax.legend(loc="best", fontsize=8)
