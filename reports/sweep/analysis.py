"""The crossover map of a sweep: its cells laid out over two axes, where the interpreter share crosses 1%
and 30%, which way it moves along each axis, predicted vs measured native gains, the cell to look at first."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

import numpy as np
import pandas as pd

from ...errors import SweepError
from ...profiler.rundir.sweepdir import AxisValue, MapAxes, SweepData, read_sweep

# The field's rule of thumb: near 1% of a step, leave Python alone; from 30%, a native rewrite pays.
LOW_LINE, HIGH_LINE = 0.01, 0.30
NATIVE_AXIS = "native"
LOAD_AXES = ("clients", "rate", "burstiness")  # preferred on the horizontal axis: load grows to the right
MAX_FACETS = 8


@dataclass
class Facet:
    """One map: the cells that share the values of every axis but x, y and native (`label` names them)."""

    label: str
    share: np.ndarray  # (len(y), len(x)) Python cells' interpreter share; NaN where no cell finished
    share_se: np.ndarray
    verdict: list[list[str | None]]
    gain: np.ndarray  # the chosen native cells' measured gain over their Python cells
    gain_se: np.ndarray
    predicted: np.ndarray
    # True where the native cell's gain is unresolved (its noise swamps it): drawn grey, kept off the colour scale.
    unresolved: np.ndarray | None = None


class SweepPoint(TypedDict):
    """One native cell's Amdahl prediction (from its Python neighbour) beside its measured gain."""

    cell: str
    label: str  # its map axes' values, y first
    native: object  # the native axis' value (a sweep file's value, checked by sweep.spec)
    group: object  # its y axis' value, None without one
    predicted: float
    measured: float
    measured_se: float | None
    unresolved: bool  # the cell's interval is too wide to tell the gain from noise


@dataclass
class FirstLook:
    cell: str
    values: dict[str, object]  # the cell's axis values as its table row holds them (pandas' scalars)
    share: float | None
    share_se: float | None
    measured_gain: float | None
    predicted_gain: float | None
    why: str


@dataclass
class Crossover:
    """Everything the sweep's summary, HTML and PDF say, computed once."""

    path: Path
    name: str
    description: str
    x: str | None
    y: str | None
    x_values: list[AxisValue | None]  # [None] without that axis
    y_values: list[AxisValue | None]
    native_value: str | None  # which native value the gain map shows
    facets: list[Facet]
    cells: pd.DataFrame
    runs_finished: int
    runs_total: int
    repeats: int
    crossings: list[str] = field(default_factory=list)
    trends: list[str] = field(default_factory=list)
    first_look: FirstLook | None = None
    points: list[SweepPoint] = field(default_factory=list)  # predicted vs measured, one per native cell
    notes: list[str] = field(default_factory=list)
    axes: dict[str, list[AxisValue]] = field(default_factory=dict)


def read_crossover(sweep_dir: str | Path, *, x: str | None = None, y: str | None = None) -> Crossover:
    """The crossover map of a sweep directory (its tables as last written)."""
    return build_crossover(read_sweep(sweep_dir), x=x, y=y)


def build_crossover(data: SweepData, *, x: str | None = None, y: str | None = None) -> Crossover:
    axes = {name: [_value(name, value) for value in values] for name, values in data.axes.items()}
    chosen: MapAxes = data.manifest.get("map") or {"x": None, "y": None}
    x_axis, y_axis = choose_axes(axes, x or chosen.get("x"), y or chosen.get("y"), source=str(data.path))
    cells = data.cells.copy()
    native_value = _gain_native_value(cells, axes)
    crossover = Crossover(
        path=data.path,
        name=str(data.manifest.get("name", "sweep")),
        description=str(data.manifest.get("description", "")),
        x=x_axis,
        y=y_axis,
        x_values=_map_values(axes, x_axis),
        y_values=_map_values(axes, y_axis),
        native_value=native_value,
        facets=[],
        cells=cells,
        runs_finished=int(data.manifest.get("runs_finished", len(data.runs))),
        runs_total=int(data.manifest.get("runs_total", 0)),
        repeats=int(data.manifest.get("repeats", 1)),
        axes=axes,
    )
    if cells.empty:
        crossover.notes.append("No run of this sweep has finished yet: there is nothing to map.")
        return crossover
    crossover.facets = _facets(crossover, cells)
    crossover.crossings = crossings(crossover)
    crossover.trends = trends(crossover)
    crossover.points = _points(crossover, cells)
    crossover.first_look = first_look(crossover, cells)
    crossover.notes = _notes(crossover, cells)
    return crossover


def choose_axes(
    axes: dict[str, list[AxisValue]], x: str | None, y: str | None, *, source: str
) -> tuple[str | None, str | None]:
    """The map's axes: as asked, else a load axis across and another axis with several values down."""
    for option, name in (("--x", x), ("--y", y)):
        if name is not None and (name not in axes or name == NATIVE_AXIS):
            allowed = ", ".join(axis for axis in axes if axis != NATIVE_AXIS)
            raise SweepError(
                f"{source}: {option} {name}: not an axis of this sweep to map; allowed: {allowed}"
                " (native pairs each cell with its Python twin: it makes the gain map)"
            )
    if x is not None and x == y:
        raise SweepError(f"{source}: --x and --y are both {x}; allowed: two different axes")
    several = [
        name
        for name, values in axes.items()
        if name != NATIVE_AXIS and len(values) > 1 and name not in (x, y)
    ]
    if x is None:
        x = next((name for name in several if name in LOAD_AXES), None) or (several[-1] if several else None)
        several = [name for name in several if name != x]
    if y is None:
        y = several[0] if several else None
    return x, y


def _map_values(axes: dict[str, list[AxisValue]], axis: str | None) -> list[AxisValue | None]:
    """A map axis' values in the file's order; [None] (one row or column) without that axis."""
    return list(axes.get(axis, [None])) if axis else [None]


def _value(axis: str, value: AxisValue) -> AxisValue:
    return math.inf if axis == "rate" and value == "inf" else value


def _gain_native_value(cells: pd.DataFrame, axes: dict[str, list[AxisValue]]) -> str | None:
    """The native value whose cells make the gain map: the one switching on the most twins."""
    if NATIVE_AXIS not in axes or cells.empty or "twins" not in cells:
        return None
    native = cells[cells["twins"] != "none"]
    if native.empty:
        return None
    counts = {value: len(str(twins).split(",")) for value, twins in zip(native[NATIVE_AXIS], native["twins"])}
    # str(): the native axis' values are text (the --native option's), as sweep.spec checked them.
    return str(max(axes[NATIVE_AXIS], key=lambda value: counts.get(value, -1))) if counts else None


def _facets(crossover: Crossover, cells: pd.DataFrame) -> list[Facet]:
    others = [
        name
        for name, values in crossover.axes.items()
        if name not in (crossover.x, crossover.y, NATIVE_AXIS) and len(values) > 1
    ]
    python = cells[cells["twins"] == "none"]
    native = (
        cells[cells[NATIVE_AXIS] == crossover.native_value]
        if crossover.native_value is not None
        else cells.iloc[0:0]
    )
    groups = (
        [()]
        if not others
        else list(dict.fromkeys(tuple(row) for row in cells[others].itertuples(index=False)))
    )
    facets = []
    for group in groups[:MAX_FACETS]:
        label = ", ".join(f"{name}={_text(value)}" for name, value in zip(others, group))
        chosen_python, chosen_native = python, native
        for name, value in zip(others, group):
            chosen_python = chosen_python[chosen_python[name] == value]
            chosen_native = chosen_native[chosen_native[name] == value]
        facets.append(_facet(crossover, label, chosen_python, chosen_native))
    return facets


def _facet(crossover: Crossover, label: str, python: pd.DataFrame, native: pd.DataFrame) -> Facet:
    shape = (len(crossover.y_values), len(crossover.x_values))
    grids = {name: np.full(shape, np.nan) for name in ("share", "share_se", "gain", "gain_se", "predicted")}
    verdict: list[list[str | None]] = [[None] * shape[1] for _ in range(shape[0])]
    unresolved = np.zeros(shape, dtype=bool)
    for frame, columns in (
        (python, {"share": "interpreter_share", "share_se": "interpreter_share_se"}),
        (native, {"gain": "measured_gain", "gain_se": "measured_gain_se", "predicted": "predicted_gain"}),
    ):
        for _, row in frame.iterrows():
            position = _position(crossover, row)
            if position is None:
                continue
            for grid, column in columns.items():
                grids[grid][position] = _float(row.get(column))
            if frame is native:
                unresolved[position] = _unresolved(row)
            if frame is python:
                verdict[position[0]][position[1]] = row.get("verdict")
    return Facet(
        label,
        grids["share"],
        grids["share_se"],
        verdict,
        grids["gain"],
        grids["gain_se"],
        grids["predicted"],
        unresolved,
    )


def _unresolved(row: pd.Series) -> bool:
    """The cell's `resolved` column is False (older sweeps have none: resolved)."""
    value = row.get("resolved")
    return value is not None and not (isinstance(value, float) and math.isnan(value)) and not bool(value)


def _position(crossover: Crossover, row: pd.Series) -> tuple[int, int] | None:
    try:
        column = crossover.x_values.index(row[crossover.x]) if crossover.x else 0
        line = crossover.y_values.index(row[crossover.y]) if crossover.y else 0
    except ValueError:
        return None
    return line, column


def crossings(crossover: Crossover) -> list[str]:
    """Per row of each map (each y value), where along x the interpreter share first reaches 1% and 30%."""
    sentences = []
    for facet in crossover.facets:
        for line, y_value in enumerate(crossover.y_values):
            shares = facet.share[line]
            if np.isnan(shares).all():
                continue
            where = ", ".join(_crossing(crossover, shares, level) for level in (LOW_LINE, HIGH_LINE))
            prefix = ", ".join(part for part in (facet.label, _named(crossover.y, y_value)) if part)
            sentences.append(f"{prefix}: {where}" if prefix else where)
    return sentences


def _crossing(crossover: Crossover, shares: np.ndarray, level: float) -> str:
    known = [(index, float(share)) for index, share in enumerate(shares) if not np.isnan(share)]
    line = f"{level:.0%}"
    if all(share >= level for _, share in known):
        return f"at or above {line} from {_named(crossover.x, crossover.x_values[known[0][0]])} on"
    if all(share < level for _, share in known):
        return f"below {line} everywhere (at most {max(share for _, share in known):.1%})"
    for (before, low), (after, high) in zip(known, known[1:]):
        if (low < level) != (high < level):
            direction = "rises through" if high > low else "falls through"
            return (
                f"{direction} {line} between {_named(crossover.x, crossover.x_values[before])} ({low:.1%}) and "
                f"{_named(crossover.x, crossover.x_values[after])} ({high:.1%})"
            )
    return f"crosses {line} more than once"


def trends(crossover: Crossover) -> list[str]:
    """Which way the interpreter share moves from the first to the last value of each map axis."""
    sentences = []
    for axis, values, along_rows in (
        (crossover.x, crossover.x_values, True),
        (crossover.y, crossover.y_values, False),
    ):
        if axis is None or len(values) < 2:
            continue
        rising = falling = lines = 0
        for facet in crossover.facets:
            grid = facet.share if along_rows else facet.share.T
            for shares in grid:
                known = shares[~np.isnan(shares)]
                if known.size < 2:
                    continue
                lines += 1
                rising += int(known[-1] > known[0])
                falling += int(known[-1] < known[0])
        if lines:
            other = (crossover.y if along_rows else crossover.x) or "the sweep"
            word = "rises" if rising > falling else ("falls" if falling > rising else "moves both ways")
            sentences.append(
                f"Along {axis} ({_text(values[0])} to {_text(values[-1])}) the interpreter share {word}: "
                f"up in {rising}, down in {falling} of {lines} lines of constant {other}."
            )
    return sentences


def first_look(crossover: Crossover, cells: pd.DataFrame) -> FirstLook | None:
    """The cell where a native rewrite surely measured the most: the largest measured gain less two standard
    errors, so that one lucky pair of runs does not win (else the cell with the most Python time)."""
    python = cells[cells["twins"] == "none"]
    native = (
        cells[(cells[NATIVE_AXIS] == crossover.native_value)]
        if crossover.native_value is not None
        else cells.iloc[0:0]
    )
    measured = native[native["measured_gain"].notna()] if not native.empty else native
    if not measured.empty:
        surely = measured["measured_gain"] - 2 * measured["measured_gain_se"].fillna(0.0)
        best = measured.loc[surely.idxmax()]
        base = python[python["cell"] == best["baseline_cell"]]
        share = _float(base["interpreter_share"].iloc[0]) if not base.empty else None
        share_se = _float(base["interpreter_share_se"].iloc[0]) if not base.empty else None
        why = (
            f"the largest measured gain of --native {best[NATIVE_AXIS]} (less two standard errors): "
            f"{best['measured_gain']:+.1%} of busy time per token (predicted {_pct_signed(best['predicted_gain'])})"
        )
        if share is not None:
            why += f"; Python control paths there take {share:.1%} of the engine's busy time"
        return FirstLook(
            str(best["baseline_cell"] or best["cell"]),
            _axis_values(crossover, best, skip_native=True),
            share,
            share_se,
            _float(best["measured_gain"]),
            _float(best["predicted_gain"]),
            why,
        )
    known = python[python["interpreter_share"].notna()]
    if known.empty:
        return None
    best = known.loc[known["interpreter_share"].idxmax()]
    return FirstLook(
        str(best["cell"]),
        _axis_values(crossover, best, skip_native=True),
        _float(best["interpreter_share"]),
        _float(best["interpreter_share_se"]),
        None,
        _float(best["predicted_gain"]),
        f"the largest interpreter share ({best['interpreter_share']:.1%}); no native gain was measured "
        '(add native = ["none", "all"] to [axes] to measure one)',
    )


def _points(crossover: Crossover, cells: pd.DataFrame) -> list[SweepPoint]:
    native = cells[
        (cells["twins"] != "none") & cells["measured_gain"].notna() & cells["predicted_gain"].notna()
    ]
    return [
        {
            "cell": row["cell"],
            "label": " ".join(f"{axis}={_text(row[axis])}" for axis in (crossover.y, crossover.x) if axis),
            "native": row[NATIVE_AXIS],
            "group": row[crossover.y] if crossover.y else None,
            "predicted": float(row["predicted_gain"]),
            "measured": float(row["measured_gain"]),
            "measured_se": _float(row["measured_gain_se"]),
            "unresolved": _unresolved(row),
        }
        for _, row in native.iterrows()
    ]


def _notes(crossover: Crossover, cells: pd.DataFrame) -> list[str]:
    notes = []
    if crossover.runs_finished < crossover.runs_total:
        notes.append(
            f"{crossover.runs_finished} of {crossover.runs_total} runs have finished: the map shows those "
            "(`infer-prof sweep FILE --out DIR --resume` runs the rest)."
        )
    if crossover.repeats < 2 or cells["interpreter_share_se"].isna().all():
        notes.append("One run per cell: no noise estimate (set repeats = 2 or more to get one).")
    if crossover.native_value is None:
        notes.append(
            'No measured native gain: the sweep has no native axis with "none" beside C twins '
            '(add native = ["none", "all"] to [axes]).'
        )
    if len(crossover.facets) < _facet_count(crossover):
        notes.append(f"Only the first {MAX_FACETS} maps are drawn; the tables hold every cell.")
    off = [
        point
        for point in crossover.points
        if point["measured_se"] and abs(point["measured"] - point["predicted"]) > 2 * point["measured_se"]
    ]
    if off:
        worst = max(off, key=lambda point: abs(point["measured"] - point["predicted"]))
        notes.append(
            f"The prediction misses by more than twice the repeats' noise in {len(off)} cell(s); most at "
            f"{worst['label']}: predicted {worst['predicted']:+.1%}, measured {worst['measured']:+.1%}."
        )
    return notes


def _facet_count(crossover: Crossover) -> int:
    count = 1
    for name, values in crossover.axes.items():
        if name not in (crossover.x, crossover.y, NATIVE_AXIS):
            count *= len(values)
    return count


def _axis_values(crossover: Crossover, row: pd.Series, *, skip_native: bool) -> dict[str, object]:
    return {axis: row[axis] for axis in crossover.axes if not (skip_native and axis == NATIVE_AXIS)}


def _named(axis: str | None, value: object) -> str:
    return f"{axis}={_text(value)}" if axis else ""


def _text(value: object) -> str:
    if isinstance(value, float) and math.isinf(value):
        return "inf"
    if isinstance(value, (bool, np.bool_)):
        return str(bool(value)).lower()
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _float(value: Any) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return math.nan
    return number


def _pct_signed(value: Any) -> str:
    number = _float(value)
    return "–" if math.isnan(number) else f"{number:+.1%}"
