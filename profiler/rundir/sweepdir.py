"""The sweep-directory contract: what `infer-prof sweep` writes and what sweep reports and compare read.

A sweep directory holds:

    sweep.json             the manifest below, rewritten atomically as the sweep goes
    cells/<cell>/r<k>/     one ordinary run directory per cell and repeat (complete once result.json exists)
    runs.parquet, .csv     the merged table, one row per finished run: the axes (one column each, named as
                           in the sweep file) then RUN_COLUMNS
    cells.parquet, .csv    one row per cell: the axes then CELL_COLUMNS (repeats averaged, gains paired)
    sweep.html, sweep.pdf  the crossover map (reports/sweep)

Manifest: {schema_version, kind: "infer-prof sweep", name, description, source, file_text, settings,
repeats, axes: {axis: [values]}, map: {x, y}, cells: [{id, values: {axis: value}}], runner: {kind:
"local"|"ray", address, cell_cpus, cell_gpus}, started_at, updated_at, runs_total, runs_finished, complete}.
"""

from __future__ import annotations

import datetime as _dt
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, NotRequired, TypedDict, cast

import pandas as pd

from ...errors import MAX_DATA_BYTES, SweepError, check_size, read_bounded
from .atomic import write_atomic, write_json_atomic

SCHEMA_VERSION = 1
KIND = "infer-prof sweep"
MANIFEST = "sweep.json"
CELLS_FOLDER = "cells"
RUNS_TABLE = "runs"
CELLS_TABLE = "cells"

# runs table, after the axes: one finished run each.
RUN_COLUMNS = (
    "cell",
    "repeat",
    "run_dir",
    "partial",
    "interpreter_share",
    "verdict",
    "category",
    "component",
    "predicted_gain",
    "predicted_gain_scheduler",
    "predicted_gain_sampler",
    "predicted_gain_kv_alloc",
    "busy_us_per_token",
    "tokens",
    "output_token_throughput",
    "engine_samples",
    "steps",
    "native_active",
    "torch_threads",
    "host",
    "interpreter_share_low",  # the run's own 95% interval of its share (verdict.interpreter_interval; null without)
    "interpreter_share_high",
    "health_void",  # why the run was distorted (a busy machine, a saturated engine: result.json health), or null
    "yardstick_us_per_token",  # the run's yardstick (profiler.rundir.yardstick): the sweep's drift guard
)
# cells table, after the axes. twins is the C twins the cell switches on ("none" for Python control paths,
# else a sorted comma list); interpreter_share is the mean over repeats and interpreter_share_se its
# standard error (null with one repeat); baseline_cell is the cell with the same values but native "none";
# predicted_gain is that baseline's Amdahl prediction for the twins this cell switches on, measured_gain
# 1 - busy time per token (this cell) / (baseline), repeat by repeat, then averaged.
CELL_COLUMNS = (
    "cell",
    "twins",
    "repeats",
    "interpreter_share",
    "interpreter_share_se",
    "interpreter_share_min",
    "interpreter_share_max",
    "verdict",
    "baseline_cell",
    "predicted_gain",
    "measured_gain",
    "measured_gain_se",
    "busy_us_per_token",
    "output_token_throughput",
    "engine_samples",
    # 95% intervals over repeats (Student t; null with one repeat) and whether the cell can be read: a share whose
    # interval straddles a rule threshold (1%, 30%) or a gain whose interval straddles 0 is "unresolved" (no verdict),
    # with the repeats that would resolve it (profiler.sweep.table.resolve).
    "interpreter_share_low",
    "interpreter_share_high",
    "measured_gain_low",
    "measured_gain_high",
    "resolved",
    "unresolved_reason",
    "repeats_to_resolve",
)

# The columns of both tables that hold figures: stored as floats (NaN where a run recorded none); the rest are
# names, flags and counts, stored as they are.
NOT_FIGURES = {
    "cell",
    "repeat",
    "repeats",
    "run_dir",
    "partial",
    "verdict",
    "category",
    "component",
    "native_active",
    "host",
    "health_void",
    "twins",
    "baseline_cell",
    "resolved",
    "unresolved_reason",
}
FIGURES = frozenset(RUN_COLUMNS + CELL_COLUMNS) - NOT_FIGURES

# What a sweep axis sets: a run option's or scenario key's value as the sweep file writes it (text, a whole
# number, a number, true/false), checked against its key by profiler.sweep.spec. An infinite rate is math.inf
# in memory and "inf" in JSON.
AxisValue = str | int | float | bool


class CellEntry(TypedDict):
    """A cell in sweep.json: its folder and its axis values as JSON writes them."""

    id: str
    values: dict[str, AxisValue]


class SweepSettings(TypedDict):
    """What decides the cells and how each runs (repeats excepted): a resumed sweep must match it."""

    axes: dict[str, list[AxisValue]]
    seed: int
    requests: int | None
    seconds: float | None
    profile: str


class MapAxes(TypedDict):
    """The crossover map's two axes as the sweep file names them (None: chosen by the report)."""

    x: str | None
    y: str | None


class RunnerInfo(TypedDict):
    """Where the cells ran: this machine, or Ray tasks with each cell's resources."""

    kind: Literal["local", "ray"]
    address: NotRequired[str]
    cell_cpus: NotRequired[int]
    cell_gpus: NotRequired[float]


class SweepManifest(TypedDict, total=False):
    """sweep.json (see the module docstring). Every key may be missing: the sweep writes it in stages and a
    reader of an older or hand-made manifest checks or defaults what it needs."""

    schema_version: int
    kind: str
    name: str
    description: str
    source: str
    file_text: str
    settings: SweepSettings
    repeats: int
    axes: dict[str, list[AxisValue]]
    map: MapAxes
    cells: list[CellEntry]
    runner: RunnerInfo
    started_at: str
    updated_at: str
    runs_total: int
    runs_finished: int
    complete: bool


@dataclass
class SweepData:
    """A sweep directory read back: its manifest and both tables."""

    path: Path
    manifest: SweepManifest
    runs: pd.DataFrame
    cells: pd.DataFrame

    @property
    def axes(self) -> dict[str, list[AxisValue]]:
        return self.manifest["axes"]


def is_sweep_dir(path: str | Path) -> bool:
    return (Path(path) / MANIFEST).is_file()


def run_dir_of(sweep_dir: str | Path, cell_id: str, repeat: int) -> Path:
    return Path(sweep_dir) / CELLS_FOLDER / cell_id / f"r{repeat}"


def now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def write_manifest(sweep_dir: str | Path, manifest: SweepManifest) -> Path:
    stamped: SweepManifest = {"schema_version": SCHEMA_VERSION, "kind": KIND, **manifest, "updated_at": now()}
    return write_json_atomic(Path(sweep_dir) / MANIFEST, stamped)


def read_manifest(sweep_dir: str | Path) -> SweepManifest:
    path = Path(sweep_dir) / MANIFEST
    if not path.is_file():
        raise SweepError(f"{sweep_dir}: no {MANIFEST} here; pass a directory written by `infer-prof sweep`")
    try:
        data = json.loads(read_bounded(path, SweepError, limit=MAX_DATA_BYTES))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise SweepError(f"{path}: not valid JSON ({err}); re-run the sweep into a new directory") from None
    if not isinstance(data, dict) or data.get("kind") != KIND:
        raise SweepError(f"{path}: not an infer-prof sweep manifest")
    if data.get("schema_version") != SCHEMA_VERSION:
        raise SweepError(
            f"{path}: schema_version {data.get('schema_version')!r} is not supported "
            f"(this infer-prof reads {SCHEMA_VERSION}); re-run the sweep with this version"
        )
    for key, kind, what in (
        ("axes", dict, "a table of axes"),
        ("cells", list, "a list of cells"),
        ("repeats", int, "a whole number"),
    ):
        if key not in data:
            raise SweepError(f"{path}: missing {key!r}; re-run the sweep into a new directory")
        if not isinstance(data[key], kind) or isinstance(data[key], bool):
            raise SweepError(
                f"{path}: {key!r} is {type(data[key]).__name__}, not {what}; re-run the sweep into a new directory"
            )
    for cell in data["cells"]:
        if not (
            isinstance(cell, dict)
            and isinstance(cell.get("id"), str)
            and isinstance(cell.get("values"), dict)
        ):
            raise SweepError(
                f"{path}: a cell is not {{id, values}} ({str(cell)[:80]}); re-run the sweep into a new directory"
            )
    # JSON read from disk: the checks above cover the keys every reader indexes; the rest are read with defaults.
    return cast(SweepManifest, data)


def write_table(sweep_dir: str | Path, name: str, table: pd.DataFrame) -> dict[str, Path]:
    """The table as <name>.parquet and <name>.csv beside it, each written atomically."""
    folder = Path(sweep_dir)
    return {
        "parquet": write_atomic(
            folder / f"{name}.parquet", lambda handle: table.to_parquet(handle, index=False), binary=True
        ),
        "csv": write_atomic(folder / f"{name}.csv", lambda handle: table.to_csv(handle, index=False)),
    }


# Columns renamed since sweeps were first written, old name -> new: read_table renames them in older sweeps.
RENAMED_COLUMNS = {"control_us_per_token": "yardstick_us_per_token"}


def read_table(sweep_dir: str | Path, name: str) -> pd.DataFrame:
    """<name>.parquet (or, without pyarrow's file, <name>.csv); an empty table when neither exists."""
    folder = Path(sweep_dir)
    parquet, csv = folder / f"{name}.parquet", folder / f"{name}.csv"
    try:
        if parquet.is_file():
            check_size(parquet, SweepError)
            return pd.read_parquet(io.BytesIO(parquet.read_bytes())).rename(columns=RENAMED_COLUMNS)
        if csv.is_file():
            check_size(csv, SweepError)
            return pd.read_csv(csv).rename(columns=RENAMED_COLUMNS)
    except (OSError, ValueError) as err:
        raise SweepError(
            f"{folder}: cannot read the {name} table ({err}); run `infer-prof sweep report {folder}` "
            "to rebuild it"
        ) from None
    return pd.DataFrame()


def read_sweep(sweep_dir: str | Path) -> SweepData:
    """A sweep directory's manifest and tables (as last written)."""
    path = Path(sweep_dir)
    manifest = read_manifest(path)
    return SweepData(path, manifest, read_table(path, RUNS_TABLE), read_table(path, CELLS_TABLE))
