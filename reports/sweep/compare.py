"""Two sweeps side by side (before and after a rewrite, or one machine against a Ray cluster): cells
matched by axis values, the difference of interpreter share and measured gain against the repeats' noise."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

import numpy as np
import pandas as pd

from ...errors import CompareError
from ...profiler.rundir.sweepdir import AxisValue, MapAxes, read_sweep
from .analysis import Crossover, Facet, build_crossover

NOISE_SIGMAS = 2.0  # a difference within two combined standard errors is called noise


@dataclass
class FacetDifference:
    """One map of after - before: its label, the two sweeps' share grids and the differences."""

    label: str
    before: Facet
    after: Facet
    share_diff: np.ndarray
    gain_diff: np.ndarray


class SweepComparisonDict(TypedDict):
    """A sweep comparison as JSON writes it (`infer-prof compare` of two sweep directories)."""

    kind: str
    before: str
    after: str
    axes: list[str]
    map: MapAxes
    cells: list[dict[str, object]]  # one per matched cell: its row, NaN as null and inf as "inf"
    only_before: int
    only_after: int
    summary: SweepCounts
    notes: list[str]


@dataclass
class SweepComparison:
    before: Path
    after: Path
    axes: list[str]
    x: str | None
    y: str | None
    x_values: list[AxisValue | None]  # [None] without that axis
    y_values: list[AxisValue | None]
    native_value: str | None
    rows: pd.DataFrame  # one per cell found in both sweeps
    facets: list[FacetDifference] = field(default_factory=list)
    only_before: int = 0
    only_after: int = 0
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> SweepComparisonDict:
        rows = self.rows.replace({np.nan: None}).to_dict("records")
        return {
            "kind": "sweeps",
            "before": str(self.before),
            "after": str(self.after),
            "axes": self.axes,
            "map": {"x": self.x, "y": self.y},
            "cells": [{key: _json(value) for key, value in row.items()} for row in rows],
            "only_before": self.only_before,
            "only_after": self.only_after,
            "summary": summary_counts(self),
            "notes": self.notes,
        }


def compare_sweeps(
    before_dir: str | Path, after_dir: str | Path, *, x: str | None = None, y: str | None = None
) -> SweepComparison:
    """Match the cells of two sweep directories by axis values and difference them (after - before)."""
    before_data, after_data = read_sweep(before_dir), read_sweep(after_dir)
    if list(before_data.axes) != list(after_data.axes):
        raise CompareError(
            f"the sweeps have different axes ({before_dir}: {', '.join(before_data.axes)}; {after_dir}: "
            f"{', '.join(after_data.axes)}); compare two sweeps of the same sweep file"
        )
    before, after = build_crossover(before_data, x=x, y=y), build_crossover(after_data, x=x, y=y)
    if before.cells.empty or after.cells.empty:
        empty = before_dir if before.cells.empty else after_dir
        raise CompareError(f"{empty}: no finished cell to compare; finish the sweep first (--resume)")
    axes = list(before_data.axes)
    rows = _rows(before.cells, after.cells, axes)
    comparison = SweepComparison(
        before=Path(before_dir),
        after=Path(after_dir),
        axes=axes,
        x=before.x,
        y=before.y,
        x_values=before.x_values,
        y_values=before.y_values,
        native_value=before.native_value,
        rows=rows,
        only_before=len(before.cells) - len(rows),
        only_after=len(after.cells) - len(rows),
    )
    comparison.facets = _facets(before, after)
    comparison.notes = _notes(comparison, before, after)
    return comparison


def _rows(before: pd.DataFrame, after: pd.DataFrame, axes: list[str]) -> pd.DataFrame:
    columns = [
        "cell",
        "twins",
        "interpreter_share",
        "interpreter_share_se",
        "verdict",
        "measured_gain",
        "measured_gain_se",
        "predicted_gain",
    ]
    merged = before[[*axes, *columns]].merge(
        after[[*axes, *columns]], on=axes, suffixes=("_before", "_after")
    )
    rows = merged[axes].copy()
    rows["cell"] = merged["cell_before"]
    rows["twins"] = merged["twins_before"]
    for name, column in (("share", "interpreter_share"), ("gain", "measured_gain")):
        rows[f"{name}_before"] = merged[f"{column}_before"].astype(float)
        rows[f"{name}_after"] = merged[f"{column}_after"].astype(float)
        before, after = (merged[f"{column}_{side}"].astype(float) for side in ("before", "after"))
        rows[f"{name}_diff"] = after - before
        errors = [merged[f"{column}_se_{side}"].astype(float) for side in ("before", "after")]
        noise = np.sqrt(errors[0] ** 2 + errors[1] ** 2)
        rows[f"{name}_noise"] = noise
        rows[f"{name}_within_noise"] = [
            None if math.isnan(n) or math.isnan(d) else bool(abs(d) <= NOISE_SIGMAS * n)
            for d, n in zip(rows[f"{name}_diff"].astype(float), noise.astype(float))
        ]
    rows["verdict_before"] = merged["verdict_before"]
    rows["verdict_after"] = merged["verdict_after"]
    rows["verdict_same"] = merged["verdict_before"] == merged["verdict_after"]
    return rows


def _facets(before: Crossover, after: Crossover) -> list[FacetDifference]:
    paired = {facet.label: facet for facet in after.facets}
    differences = []
    for facet in before.facets:
        other = paired.get(facet.label)
        if other is None or other.share.shape != facet.share.shape:
            continue
        differences.append(
            FacetDifference(facet.label, facet, other, other.share - facet.share, other.gain - facet.gain)
        )
    return differences


class SweepCounts(TypedDict):
    """How many cells of two sweeps agree (summary_counts): verdicts, and shares and gains within noise."""

    cells: int
    python_cells: int
    verdicts_same: int
    share_within_noise: int
    share_with_noise: int  # the Python cells whose share difference has a noise estimate
    largest_share_diff: float | None
    gain_within_noise: int
    gain_with_noise: int


def summary_counts(comparison: SweepComparison) -> SweepCounts:
    """How many cells agree: verdicts, and shares and gains within noise (of those with a noise estimate)."""
    rows = comparison.rows
    python = rows[rows["twins"] == "none"]
    native = rows[rows["twins"] != "none"]

    def within(frame: pd.DataFrame, name: str) -> tuple[int, int]:
        known = [value for value in frame[f"{name}_within_noise"] if value is not None]
        return sum(bool(value) for value in known), len(known)

    share_within, share_known = within(python, "share")
    gain_within, gain_known = within(native, "gain")
    share_diffs = python["share_diff"].dropna().abs()
    return {
        "cells": len(rows),
        "python_cells": len(python),
        "verdicts_same": int(python["verdict_same"].sum()),
        "share_within_noise": share_within,
        "share_with_noise": share_known,
        "largest_share_diff": float(share_diffs.max()) if not share_diffs.empty else None,
        "gain_within_noise": gain_within,
        "gain_with_noise": gain_known,
    }


def headline(comparison: SweepComparison) -> str:
    counts = summary_counts(comparison)
    sentence = (
        f"{counts['cells']} cells in both sweeps; the verdict is the same in {counts['verdicts_same']} of "
        f"{counts['python_cells']} Python cells"
    )
    if counts["largest_share_diff"] is not None:
        sentence += (
            f"; the interpreter share differs by at most {counts['largest_share_diff'] * 100:.1f} points"
        )
    if counts["share_with_noise"]:
        sentence += (
            f", within noise ({NOISE_SIGMAS:g} standard errors) in {counts['share_within_noise']} of "
            f"{counts['share_with_noise']}"
        )
    if counts["gain_with_noise"]:
        sentence += (
            f"; measured gains within noise in {counts['gain_within_noise']} of {counts['gain_with_noise']}"
        )
    return sentence + "."


def _notes(comparison: SweepComparison, before: Crossover, after: Crossover) -> list[str]:
    notes = []
    if comparison.only_before or comparison.only_after:
        notes.append(
            f"{comparison.only_before} cell(s) only in before and {comparison.only_after} only in after are "
            "left out (unfinished, or the sweeps' axis values differ)."
        )
    for name, crossover in (("before", before), ("after", after)):
        if crossover.runs_finished < crossover.runs_total:
            notes.append(f"{name}: {crossover.runs_finished} of {crossover.runs_total} runs finished.")
        if crossover.repeats < 2:
            notes.append(
                f"{name}: one repeat per cell, so no noise estimate: no difference can be called noise."
            )
    return notes


def _json(value: Any) -> object:  # Any: a pandas record's value
    if isinstance(value, (np.bool_,)):
        return bool(value)
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating, float)):
        number = float(value)
        return None if math.isnan(number) else ("inf" if math.isinf(number) else number)
    return value
