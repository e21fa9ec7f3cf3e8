"""Distrust what a run directory holds: the paths result.json names and its tables' cells (its sections' types: profiler.rundir.schema).

Everything that reads a run directory (reports, compare, budgets) goes through profiler.rundir.results,
which calls these checks, so a damaged or forged file becomes one ResultError naming the file, the
place and what was wrong, never a traceback deep inside a chart.
"""

from __future__ import annotations

import csv
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd

from ...errors import ResultError, check_size

# Table cells: columns that must hold numbers (empty allowed), and the durations among them (>= 0).
NUMERIC_REQUEST_COLUMNS = (
    "prompt_tokens",
    "output_tokens",
    "arrival_ns",
    "scheduled_ns",
    "first_token_ns",
    "finish_ns",
    "ttft_ms",
    "tpot_ms",
    "e2e_ms",
    "queue_ms",
    "num_preemptions",
)
# steps.csv's columns (besides its `<phase>_ms` span columns), every one a number.
STEP_COLUMNS = (
    "step",
    "start_ns",
    "end_ns",
    "duration_ms",
    "batch_size",
    "prefill_tokens",
    "decode_tokens",
    "blocks_used",
    "blocks_free",
    "kv_utilization",
    "fragmentation_slots",
    "preemptions",
    "waiting",
    "running",
)
# Columns every row of steps.csv has: a row without them was cut off (a truncated file). Every writer since the
# first has written all of STEP_COLUMNS in every row, so a file without one of them is damaged.
REQUIRED_STEP_COLUMNS = ("step", "start_ns", "end_ns")
# Past these a figure is not one a run can have (a clock reading beyond int64, a duration of centuries); a
# reader summing them would overflow to inf and fail deep inside a chart.
MAX_NS = 2**63 - 1
MAX_MS = 1e12
TOKEN_TIMES = re.compile(r"^\s*\d+(\s+\d+)*\s*$")


def table_path(run_dir: Path, name: str, relative: str) -> Path:
    """The file `files.<name>` names, which must lie inside the run directory (no absolute path, no ..)."""
    candidate = Path(relative)
    inside = (run_dir / candidate).resolve()
    if candidate.is_absolute() or not inside.is_relative_to(run_dir.resolve()):
        raise ResultError(
            f"{run_dir / 'result.json'}: files.{name} = {relative!r} points outside the run directory; "
            "a run's files live inside it: re-record the run"
        )
    return inside


def read_table(path: Path, columns: tuple[str, ...]) -> pd.DataFrame:
    """A CSV table of a run (empty, with `columns`, when it has no rows), or ResultError naming the file and
    what is wrong with it. The writer ends every table with a newline; a file that does not was cut off."""
    try:
        check_size(path, ResultError)
        raw = path.read_bytes()
    except OSError as exc:
        raise ResultError(f"{path}: cannot be read ({exc.strerror or exc}); re-record the run") from None
    if not raw.strip():
        return pd.DataFrame(columns=list(columns))
    if not raw.endswith(b"\n"):
        raise ResultError(f"{path}: the file ends in the middle of a row (it was cut off); re-record the run")
    try:
        table = pd.read_csv(path, keep_default_na=True)
    except (UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError, ValueError, OSError) as exc:
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ResultError(f"{path}: not a readable CSV table ({detail}); re-record the run") from None
    header = next(csv.reader([raw.split(b"\n", 1)[0].decode("utf-8", "replace").lstrip("\ufeff")]), [])
    twice = sorted({name for name in header if header.count(name) > 1})
    if twice:  # pandas would rename the second one "name.1" and readers would take the wrong column
        raise ResultError(f"{path}: the header names column {twice[0]!r} twice; re-record the run")
    return table


def check_requests(table: pd.DataFrame, path: Path) -> pd.DataFrame:
    """requests.csv: numbers where numbers belong, non-negative times, token_ns a list of integers."""
    table = _numeric(table, NUMERIC_REQUEST_COLUMNS, path)
    _non_negative(table, ("ttft_ms", "tpot_ms", "e2e_ms", "queue_ms", "prompt_tokens", "output_tokens"), path)
    _bounded(table, ("arrival_ns", "scheduled_ns", "first_token_ns", "finish_ns"), MAX_NS, path)
    _bounded(table, ("ttft_ms", "tpot_ms", "e2e_ms", "queue_ms"), MAX_MS, path)
    if "token_ns" in table:
        for row, cell in table["token_ns"].items():
            if isinstance(cell, str) and cell.strip() and not TOKEN_TIMES.match(cell):
                raise ResultError(
                    f"{path}: row {int(row) + 2}, column token_ns holds {cell[:40]!r}, expected "
                    "space-separated integer timestamps; re-record the run"
                )
            if (
                isinstance(cell, (int, float, np.integer, np.floating))
                and not isinstance(cell, bool)
                and (math.isnan(cell) or (cell >= 0 and float(cell).is_integer()))
            ):
                continue  # empty, or one timestamp, which pandas reads as a number (a one-token request)
            if not isinstance(cell, str):
                raise ResultError(
                    f"{path}: row {int(row) + 2}, column token_ns holds {cell!r}, expected timestamps"
                )
    return table


def check_steps(table: pd.DataFrame, path: Path) -> pd.DataFrame:
    """steps.csv: every row whole (a cut-off file is refused), numbers where numbers belong, durations >= 0."""
    missing = [column for column in STEP_COLUMNS if column not in table]
    if missing:
        raise ResultError(
            f"{path}: no column {missing[0]!r}, which every steps.csv has ({len(missing)} missing); "
            "re-record the run"
        )
    phases = [column for column in table.columns if column.endswith("_ms")]
    table = _numeric(table, (*STEP_COLUMNS, *phases), path)
    for column in STEP_COLUMNS:
        if table[column].isna().any():
            row = int(table.index[table[column].isna()][0]) + 2
            raise ResultError(f"{path}: row {row} has no {column}: the file looks cut off; re-record the run")
    _non_negative(table, phases, path)
    _bounded(table, ("start_ns", "end_ns"), MAX_NS, path)
    _bounded(table, [column for column in table.columns if column.endswith("_ms")], MAX_MS, path)
    return table


def _bounded(table: pd.DataFrame, columns: tuple[str, ...] | list[str], limit: float, path: Path) -> None:
    """Every cell of `columns` finite and at most `limit` in size (empty cells pass)."""
    for column in columns:
        if column not in table:
            continue
        values = table[column].astype("float64")
        bad = values.notna() & ~(values.abs() <= limit)
        if bad.any():
            row = int(table.index[bad][0])
            raise ResultError(
                f"{path}: row {row + 2}, column {column} is {table[column][row]}, beyond any figure a run "
                "records; re-record the run"
            )


def _numeric(table: pd.DataFrame, columns: tuple[str, ...] | list[str], path: Path) -> pd.DataFrame:
    for column in columns:
        if column not in table or pd.api.types.is_numeric_dtype(table[column]):
            continue
        converted = pd.to_numeric(table[column], errors="coerce")
        bad = converted.isna() & table[column].notna() & (table[column].astype(str).str.strip() != "")
        if bad.any():
            row = int(table.index[bad][0])
            raise ResultError(
                f"{path}: row {row + 2}, column {column} holds {str(table[column][row])[:40]!r}, "
                "expected a number; re-record the run"
            )
        table[column] = converted
    return table


def _non_negative(table: pd.DataFrame, columns: tuple[str, ...] | list[str], path: Path) -> None:
    for column in columns:
        if column in table and (table[column] < 0).any():
            row = int(table.index[table[column] < 0][0])
            raise ResultError(
                f"{path}: row {row + 2}, column {column} is {table[column][row]}, a negative "
                "duration or count; re-record the run"
            )


def whole_numbers(
    table: pd.DataFrame, columns: tuple[str, ...], path: Path, *, non_negative: tuple[str, ...] = ()
) -> pd.DataFrame:
    """`columns` as int64: every cell an integer (a gap means the file was cut off), `non_negative` ones >= 0."""
    table = _numeric(table, columns, path)
    for column in columns:
        if column not in table:
            continue
        values = table[column]
        gap = values.isna()
        if gap.any():
            row = int(table.index[gap][0]) + 2
            raise ResultError(f"{path}: row {row} has no {column}: the file looks cut off; re-record the run")
        fractional = values != values.round()
        if fractional.any():
            row = int(table.index[fractional][0])
            raise ResultError(
                f"{path}: row {row + 2}, column {column} holds {values[row]}, expected a whole number; "
                "re-record the run"
            )
        table[column] = values.astype("int64")
    _non_negative(table, [column for column in non_negative if column in table], path)
    return table
