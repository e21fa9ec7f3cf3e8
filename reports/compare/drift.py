"""Drift of a comparison: each run's yardstick (profiler.rundir.yardstick), in the order the runs ran.

The yardstick is a number the compared change cannot move; plotted per repeat, it shows when
the machine moved instead. The section is plain data in compare.json and drawn by compare/charts.py.
"""

from __future__ import annotations

from typing import TypedDict

import numpy as np

from ...profiler.rundir.results import RunData
from ...profiler.rundir.yardstick import yardstick
from ..rundata import run_start_ns


class DriftRun(TypedDict):
    """One run's yardstick: which side, its directory, when it ran among all (1 first), its value."""

    side: str  # "before" or "after"
    run: str
    order: int
    value: float


class YardstickDrift(TypedDict, total=False):
    """compare.json's `yardstick`: each run's yardstick in run order, the sides' means and how far they moved."""

    name: str
    label: str
    unit: str
    runs: list[DriftRun]
    before_mean: float
    after_mean: float
    ratio: float
    spread: float


def yardstick_section(before: list[RunData], after: list[RunData]) -> YardstickDrift:
    """{name, label, unit, runs: [{side, run, order, value}], before_mean, after_mean, ratio, spread} or {}.

    `order` is when the run ran among all of them (by its recorded time, then its clock), 1 first;
    `ratio` is after mean / before mean; `spread` is max / min - 1 over all runs. Empty when a run has
    no yardstick (profiling off)."""
    figures = [
        (side, run, yardstick(run)) for side, runs in (("before", before), ("after", after)) for run in runs
    ]
    if not figures or any(figure is None for _, _, figure in figures):
        return {}
    ranked = sorted(
        range(len(figures)), key=lambda i: (figures[i][1].result.created_at, run_start_ns(figures[i][1]))
    )
    order = {index: rank + 1 for rank, index in enumerate(ranked)}
    first = figures[0][2]
    assert first is not None
    runs: list[DriftRun] = [
        {"side": side, "run": str(run.path), "order": order[index], "value": figure.value}
        for index, (side, run, figure) in enumerate(figures)
        if figure is not None
    ]
    means = {
        side: float(np.mean([entry["value"] for entry in runs if entry["side"] == side]))
        for side in ("before", "after")
    }
    values = [entry["value"] for entry in runs]
    return {
        "name": first.name,
        "label": first.label,
        "unit": first.unit,
        "runs": runs,
        "before_mean": means["before"],
        "after_mean": means["after"],
        "ratio": means["after"] / means["before"],
        "spread": max(values) / min(values) - 1.0,
    }


def drift_note(section: YardstickDrift) -> str | None:
    """One sentence for the comparison's notes: how far the yardstick moved."""
    if not section:
        return None
    return (
        f"Yardstick ({section['label']}, which the compared twins cannot move): after/before "
        f"{section['ratio']:.3f}x, and {section['spread']:.1%} between the fastest and slowest run. A metric "
        "that moved less than that may have moved with the machine, not with the change."
    )
