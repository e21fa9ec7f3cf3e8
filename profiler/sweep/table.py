"""The merged tables of a sweep: one row per finished run read from its run directory, and one row per
cell with its repeats averaged and its measured native gain paired against the same cell with Python twins."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TypedDict

import numpy as np
import pandas as pd

from ...errors import ResultError
from ...native_paths.toggles import parse_native
from ..analysis.diagnose import NATIVE_CAPABLE, THRESHOLDS, rule_for
from ..checks.verify import busy_ns_per_token
from ..rundir.health import void_reason
from ..rundir.results import RunResult, read_result, read_run
from ..rundir.sweepdir import CELL_COLUMNS, FIGURES, RUN_COLUMNS, AxisValue, run_dir_of
from ..rundir.yardstick import drift_void, yardstick
from ..stats import Interval, mean_interval, repeats_to_resolve
from .grid import NATIVE_AXIS, CellKey

CELL_FILE = (
    "sweep-cell.json"  # beside result.json: which cell and repeat a run directory is, and where it ran
)


def finished_result(run_dir: Path) -> RunResult | None:
    """The run's result when it finished (result.json written, not partial), else None."""
    if not (run_dir / "result.json").is_file():
        return None
    try:
        result = read_result(run_dir)
    except ResultError:
        return None
    return None if result.partial else result


def run_row(
    cell: CellKey, repeat: int, result: RunResult, run_dir: Path, sweep_dir: Path
) -> dict[str, object]:
    """One finished run as a row of the runs table: the cell's axis values, then RUN_COLUMNS."""
    verdict = result.verdict or {}
    predictions = verdict.get("predictions") or {}
    gains = {name: (predictions.get(name) or {}).get("predicted_gain") for name in NATIVE_CAPABLE}
    known_gains = [gain for gain in gains.values() if gain is not None]
    samples = (((result.breakdown or {}).get("methods") or {}).get("samples") or {}).get("samples")
    busy = busy_ns_per_token(result)
    interval = verdict.get("interpreter_interval") or {}
    row: dict[str, object] = dict(cell.values)
    row.update(
        {
            "cell": cell.id,
            "repeat": repeat,
            "run_dir": str(run_dir.relative_to(sweep_dir)),
            "partial": result.partial,
            "interpreter_share": verdict.get("interpreter_share"),
            "verdict": verdict.get("rule"),
            "category": verdict.get("category"),
            "component": verdict.get("component"),
            "predicted_gain": sum(known_gains) if len(known_gains) == len(gains) else None,
            **{f"predicted_gain_{name}": gain for name, gain in gains.items()},
            "busy_us_per_token": busy / 1e3 if busy else None,
            "tokens": (result.engine or {}).get("tokens_generated"),
            "output_token_throughput": result.metrics.get("output_token_throughput"),
            "engine_samples": samples,
            "steps": (result.engine or {}).get("steps"),
            "native_active": ",".join(result.config.get("native") or []) or "none",
            "torch_threads": result.environment.get("torch_threads"),
            "host": _host(run_dir),
            "interpreter_share_low": interval.get("low"),
            "interpreter_share_high": interval.get("high"),
            "health_void": void_reason(result.health),
            "yardstick_us_per_token": _control(run_dir),
        }
    )
    return row


def _control(run_dir: Path) -> float | None:
    """The run's yardstick (model span time per token), None without spans or when its tables are damaged."""
    try:
        figure = yardstick(read_run(run_dir))
    except ResultError:
        return None
    return figure.value if figure else None


def _host(run_dir: Path) -> str | None:
    try:
        return json.loads((run_dir / CELL_FILE).read_text(encoding="utf-8")).get("host")
    except (OSError, ValueError, AttributeError):
        return None


def runs_table(cells: list[CellKey], repeats: int, sweep_dir: Path) -> pd.DataFrame:
    """Every finished run of the sweep directory, in cell then repeat order."""
    rows: list[dict[str, object]] = []
    for cell in cells:
        for repeat in range(1, repeats + 1):
            run_dir = run_dir_of(sweep_dir, cell.id, repeat)
            result = finished_result(run_dir)
            if result is not None:
                rows.append(run_row(cell, repeat, result, run_dir, sweep_dir))
    return _typed(pd.DataFrame(rows, columns=[*_axes(cells), *RUN_COLUMNS]))


def cells_table(cells: list[CellKey], runs: pd.DataFrame) -> pd.DataFrame:
    """One row per cell with at least one finished run: repeats averaged, native gains paired by repeat."""
    by_cell = (
        {cell_id: group for cell_id, group in runs.groupby("cell", sort=False)} if not runs.empty else {}
    )
    baselines = _baselines(cells)
    rows: list[dict[str, object]] = []
    for cell in cells:
        group = by_cell.get(cell.id)
        if group is None:
            continue
        shares = _numbers(group["interpreter_share"])
        baseline = baselines.get(cell.id)
        gain = _paired_gain(group, by_cell.get(baseline)) if baseline else []
        share_interval = mean_interval(shares) or _one_run_interval(group)
        gain_interval = mean_interval(gain)
        drift = _drift(group, by_cell.get(baseline)) if baseline else None
        voids = [str(value) for value in group.get("health_void", []) if _present(value)] + (
            [drift] if drift else []
        )
        resolution = resolve(share_interval, gain_interval, len(group), gains=bool(baseline), voids=voids)
        share_mean = _mean(shares)
        row: dict[str, object] = dict(cell.values)
        row.update(
            {
                "cell": cell.id,
                "twins": _twins(cell),
                "repeats": len(group),
                "interpreter_share": share_mean,
                "interpreter_share_se": _standard_error(shares),
                "interpreter_share_min": min(shares) if shares else None,
                "interpreter_share_max": max(shares) if shares else None,
                # No verdict where the noise could put the share on either side of a threshold.
                "verdict": rule_for(share_mean)
                if share_mean is not None and resolution["share_resolved"]
                else None,
                "baseline_cell": baseline,
                "predicted_gain": _predicted(cell, group, by_cell.get(baseline) if baseline else None),
                "measured_gain": _mean(gain),
                "measured_gain_se": _standard_error(gain),
                "busy_us_per_token": _mean(_numbers(group["busy_us_per_token"])),
                "output_token_throughput": _mean(_numbers(group["output_token_throughput"])),
                "engine_samples": sum(_numbers(group["engine_samples"]))
                if _numbers(group["engine_samples"])
                else None,
                "interpreter_share_low": share_interval.low if share_interval else None,
                "interpreter_share_high": share_interval.high if share_interval else None,
                "measured_gain_low": gain_interval.low if gain_interval else None,
                "measured_gain_high": gain_interval.high if gain_interval else None,
                "resolved": resolution["resolved"],
                "unresolved_reason": resolution["reason"],
                "repeats_to_resolve": resolution["repeats"],
            }
        )
        rows.append(row)
    return _typed(pd.DataFrame(rows, columns=[*_axes(cells), *CELL_COLUMNS]))


# A cell of one repeat has no gain interval; this many repeats give a first estimate of its noise.
FIRST_NOISE_REPEATS = 3


def _drift(native: pd.DataFrame, python: pd.DataFrame | None) -> str | None:
    """The drift guard across a sweep: a native cell's gain is void when the yardstick moved between it and
    its Python cell (the machine changed between their runs: profiler.rundir.yardstick.drift_void)."""
    if python is None or "yardstick_us_per_token" not in native or "yardstick_us_per_token" not in python:
        return None
    return drift_void(_numbers(python["yardstick_us_per_token"]), _numbers(native["yardstick_us_per_token"]))


def _one_run_interval(group: pd.DataFrame) -> Interval | None:
    """A one-repeat cell's share interval: its run's own (Wilson, over its native samples), when it has one."""
    if len(group) != 1 or "interpreter_share_low" not in group:
        return None
    row = group.iloc[0]
    if not (
        _present(row["interpreter_share"])
        and _present(row["interpreter_share_low"])
        and _present(row["interpreter_share_high"])
    ):
        return None
    return Interval(
        float(row["interpreter_share"]),
        float(row["interpreter_share_low"]),
        float(row["interpreter_share_high"]),
    )


class Resolution(TypedDict):
    """Whether a sweep cell can be read, and if not why and how many repeats would make it so."""

    resolved: bool
    share_resolved: bool
    reason: str | None
    repeats: int | None


def resolve(
    share: Interval | None,
    gain: Interval | None,
    repeats: int,
    *,
    gains: bool,
    voids: list[str] | None = None,
) -> Resolution:
    """Whether a cell can be read: {resolved, share_resolved, reason, repeats}.

    Unresolved: a run was distorted (its health void); the share's interval straddles a rule threshold
    (1%, 30%) or is unknown; a native cell's gain has no interval (one repeat) or one that straddles 0.
    `repeats`: how many repeats would shrink the widest such interval (as 1/sqrt(n)) clear of its threshold."""
    reasons: list[str] = []
    needed: list[int] = []
    share_resolved = True
    if voids:
        reasons.append(f"a run was void: {voids[0]}")
        share_resolved = False
    if share is None:
        share_resolved = False
        reasons.append("the share has no interval (one repeat without native samples)")
        needed.append(FIRST_NOISE_REPEATS)
    else:
        for threshold in THRESHOLDS:
            if share.low <= threshold <= share.high:
                share_resolved = False
                reasons.append(
                    f"the share's interval {share.low:.1%}-{share.high:.1%} straddles the {threshold:.0%} rule"
                )
                half = (share.high - share.low) / 2
                count = repeats_to_resolve(repeats, half, abs(share.point - threshold))
                if count:
                    needed.append(count)
    gain_resolved = True
    if gains:
        if gain is None:
            gain_resolved = False
            reasons.append("one repeat: the gain's noise is unknown")
            needed.append(FIRST_NOISE_REPEATS)
        elif gain.low <= 0 <= gain.high:
            gain_resolved = False
            reasons.append(
                f"the gain's interval {gain.low:+.1%} to {gain.high:+.1%} straddles 0 (noise swamps it)"
            )
            count = repeats_to_resolve(repeats, (gain.high - gain.low) / 2, abs(gain.point))
            if count:
                needed.append(count)
    resolved = share_resolved and gain_resolved
    return {
        "resolved": resolved,
        "share_resolved": share_resolved,
        "reason": "; ".join(reasons) or None,
        "repeats": max(needed) if needed and not resolved else None,
    }


def _baselines(cells: list[CellKey]) -> dict[str, str]:
    """Each cell with C twins on -> the cell with the same values and native "none" (where there is one)."""
    if not cells or NATIVE_AXIS not in dict(cells[0].values):
        return {}
    python_cells = {_without_native(cell): cell.id for cell in cells if not parse_native(cell.native())}
    return {
        cell.id: python_cells[_without_native(cell)]
        for cell in cells
        if parse_native(cell.native()) and _without_native(cell) in python_cells
    }


def _twins(cell: CellKey) -> str:
    if NATIVE_AXIS not in dict(cell.values):
        return "none"
    return ",".join(sorted(parse_native(cell.native()))) or "none"


def _without_native(cell: CellKey) -> tuple[tuple[str, AxisValue], ...]:
    return tuple((axis, value) for axis, value in cell.values if axis != NATIVE_AXIS)


def _paired_gain(native: pd.DataFrame, python: pd.DataFrame | None) -> list[float]:
    """1 - busy/token (native) / busy/token (Python) per repeat both have: neighbours in the run order."""
    if python is None:
        return []
    reference = {int(row.repeat): row.busy_us_per_token for row in python.itertuples()}
    gains: list[float] = []
    for row in native.itertuples():
        base = reference.get(int(row.repeat))
        if base is not None and _present(base) and _present(row.busy_us_per_token) and base > 0:
            gains.append(1.0 - float(row.busy_us_per_token) / float(base))
    return gains


def _predicted(cell: CellKey, group: pd.DataFrame, python: pd.DataFrame | None) -> float | None:
    """The Python runs' Amdahl prediction for the twins this cell switches on (all three: a Python cell)."""
    if python is None:
        return _mean(_numbers(group["predicted_gain"]))
    twins = sorted(parse_native(cell.native()))
    columns = [f"predicted_gain_{name}" for name in twins if f"predicted_gain_{name}" in python]
    totals = [
        sum(float(row[column]) for column in columns)
        for _, row in python.iterrows()
        if all(_present(row[column]) for column in columns)
    ]
    return _mean(totals)


def _axes(cells: list[CellKey]) -> list[str]:
    return [axis for axis, _ in cells[0].values] if cells else []


def _numbers(column: pd.Series) -> list[float]:
    return [float(value) for value in column if _present(value)]


def _present(value: object) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def _mean(values: list[float]) -> float | None:
    return float(np.mean(values)) if values else None


def _standard_error(values: list[float]) -> float | None:
    """The standard error of the mean over repeats; None with fewer than two (the noise is then unknown)."""
    return float(np.std(values, ddof=1) / math.sqrt(len(values))) if len(values) > 1 else None


def _typed(table: pd.DataFrame) -> pd.DataFrame:
    """Columns Parquet can store: figures as floats, an axis mixing numbers and strings as strings."""
    for column in table.columns:
        if column in FIGURES:
            table[column] = pd.to_numeric(table[column], errors="coerce").astype(float)
            continue
        kinds = {
            type(value)
            for value in table[column]
            if value is not None and not (isinstance(value, float) and math.isnan(value))
        }
        if len(kinds) > 1 and not kinds <= {int, float}:
            table[column] = table[column].map(lambda value: None if value is None else str(value))
    return table
