"""Distrust what a run directory holds: the shape of result.json's sections, the paths it names, and its tables' cells.

Everything that reads a run directory (reports, compare, budgets) goes through profiler.rundir.results,
which calls these checks, so a damaged or forged file becomes one ResultError naming the file, the
place and what was wrong, never a traceback deep inside a chart.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import pandas as pd

from errors import ResultError, check_size

NUMBER, TEXT, FLAG, TABLE, LIST = "a number", "text", "true or false", "a table", "a list"
# The sections and fields readers use, with what each must be (None is always allowed below the top
# level: a field that was not measured). "*" stands for every key of a table.
SHAPE: dict[str, Any] = {
    "config": {"model": TEXT, "scenario": TEXT, "profile": TEXT, "native": [TEXT], "native_requested": [TEXT],
               "engine": TABLE, "requests": NUMBER, "seed": NUMBER},
    "environment": TABLE,
    "scenario": TABLE,
    "metrics": {"*": (NUMBER, TABLE)},
    "engine": {"*": (NUMBER, TABLE, TEXT, FLAG)},
    "counters": {"*": NUMBER},
    "collectors": {"*": {"status": TEXT, "reason": TEXT}},
    "files": {"*": TEXT},
    "breakdown": {"wall_s": NUMBER, "methods": {"*": TABLE}, "disagreement": {"*": NUMBER},
                  "component_disagreement": {"*": NUMBER}, "notes": [TEXT], "client_threads": TABLE},
    "verdict": {"category": TEXT, "component": TEXT, "share": NUMBER, "interpreter_share": NUMBER, "rule": TEXT,
                "reasons": [TEXT], "blind_spots": [TEXT], "predictions": {"*": TABLE}, "source": TEXT},
    "overhead": TABLE,
    "gpu_time": {"idle_host_share": NUMBER, "idle_no_work_share": NUMBER, "busy_share": NUMBER,
                 "launches_per_step": NUMBER, "idle_host_by_component": {"*": NUMBER}},
    "replay": {"steps_recorded": NUMBER, "steps_in_run": NUMBER, "repeats": NUMBER,
               "components": {"*": {"speedup": NUMBER, "low": NUMBER, "high": NUMBER, "steps": NUMBER,
                                    "twins_agree": FLAG}},
               "skipped": {"*": TEXT}},
    "partial": FLAG,
    "partial_reason": TEXT,
    "created_at": TEXT,
}  # fmt: skip
REQUIRED_TABLES = ("config", "environment", "scenario", "metrics")
# Table cells: columns that must hold numbers (empty allowed), and the durations among them (>= 0).
NUMERIC_REQUEST_COLUMNS = ("prompt_tokens", "output_tokens", "arrival_ns", "scheduled_ns", "first_token_ns",
                           "finish_ns", "ttft_ms", "tpot_ms", "e2e_ms", "queue_ms", "num_preemptions")  # fmt: skip
NUMERIC_STEP_COLUMNS = ("step", "start_ns", "end_ns", "duration_ms", "batch_size", "prefill_tokens", "decode_tokens",
                        "blocks_used", "blocks_free", "kv_utilization", "fragmentation_slots", "preemptions",
                        "waiting", "running")  # fmt: skip
# Columns every row of steps.csv has: a row without them was cut off (a truncated file).
REQUIRED_STEP_COLUMNS = ("step", "start_ns", "end_ns")
TOKEN_TIMES = re.compile(r"^\s*\d+(\s+\d+)*\s*$")


def check_result(data: Any, source: str) -> None:
    """result.json's sections have the shapes in SHAPE (ResultError naming the first that does not)."""
    if not isinstance(data, dict):
        raise ResultError(f"{source}: expected a JSON object, found {_kind(data)}; re-record the run")
    for name in REQUIRED_TABLES:
        if not isinstance(data.get(name), dict):
            raise ResultError(f"{source}: section {name!r} is {_kind(data.get(name))}, expected a table; re-record the run")
    for name, shape in SHAPE.items():
        if name in data and data[name] is not None:
            _check(data[name], shape, name, source)


def _check(value: Any, shape: Any, where: str, source: str) -> None:
    if value is None:
        return
    if isinstance(shape, tuple):
        if not any(_matches(value, option) for option in shape):
            _wrong(where, value, " or ".join(option if isinstance(option, str) else TABLE for option in shape), source)
        return
    if isinstance(shape, list):
        if not isinstance(value, list):
            _wrong(where, value, LIST, source)
        for index, item in enumerate(value):
            _check(item, shape[0], f"{where}[{index}]", source)
        return
    if isinstance(shape, dict):
        if not isinstance(value, dict):
            _wrong(where, value, TABLE, source)
        for key, item in value.items():
            if key in shape:
                _check(item, shape[key], f"{where}.{key}", source)
            elif "*" in shape:
                _check(item, shape["*"], f"{where}.{key}", source)
        return
    if not _matches(value, shape):
        _wrong(where, value, shape, source)


def _matches(value: Any, shape: Any) -> bool:
    if value is None:
        return True
    if shape == NUMBER:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if shape == TEXT:
        return isinstance(value, str)
    if shape == FLAG:
        return isinstance(value, bool)
    if shape == TABLE or isinstance(shape, dict):
        return isinstance(value, dict)
    return False


def _wrong(where: str, value: Any, expected: str, source: str) -> None:
    raise ResultError(f"{source}: {where} is {_kind(value)}, expected {expected}; the file is damaged: re-record the run")


def _kind(value: Any) -> str:
    if value is None:
        return "missing"
    names = {dict: "a table", list: "a list", str: "text", bool: "true/false", int: "a number", float: "a number"}
    return names.get(type(value), type(value).__name__)


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
        return pd.read_csv(path, keep_default_na=True)
    except (UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError, ValueError, OSError) as exc:
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ResultError(f"{path}: not a readable CSV table ({detail}); re-record the run") from None


def check_requests(table: pd.DataFrame, path: Path) -> pd.DataFrame:
    """requests.csv: numbers where numbers belong, non-negative times, token_ns a list of integers."""
    table = _numeric(table, NUMERIC_REQUEST_COLUMNS, path)
    _non_negative(table, ("ttft_ms", "tpot_ms", "e2e_ms", "queue_ms", "prompt_tokens", "output_tokens"), path)
    if "token_ns" in table:
        for row, cell in table["token_ns"].items():
            if isinstance(cell, str) and cell.strip() and not TOKEN_TIMES.match(cell):
                raise ResultError(f"{path}: row {int(row) + 2}, column token_ns holds {cell[:40]!r}, expected "
                                  "space-separated integer timestamps; re-record the run")  # fmt: skip
            if not isinstance(cell, str) and not (isinstance(cell, float) and math.isnan(cell)):
                raise ResultError(f"{path}: row {int(row) + 2}, column token_ns holds {cell!r}, expected timestamps")
    return table


def check_steps(table: pd.DataFrame, path: Path) -> pd.DataFrame:
    """steps.csv: every row whole (a cut-off file is refused), numbers where numbers belong, durations >= 0."""
    phases = [column for column in table.columns if column.endswith("_ms")]
    table = _numeric(table, (*NUMERIC_STEP_COLUMNS, *phases), path)
    for column in REQUIRED_STEP_COLUMNS:
        if column in table and table[column].isna().any():
            row = int(table.index[table[column].isna()][0]) + 2
            raise ResultError(f"{path}: row {row} has no {column}: the file looks cut off; re-record the run")
    _non_negative(table, phases, path)
    return table


def _numeric(table: pd.DataFrame, columns: tuple[str, ...] | list[str], path: Path) -> pd.DataFrame:
    for column in columns:
        if column not in table or pd.api.types.is_numeric_dtype(table[column]):
            continue
        converted = pd.to_numeric(table[column], errors="coerce")
        bad = converted.isna() & table[column].notna() & (table[column].astype(str).str.strip() != "")
        if bad.any():
            row = int(table.index[bad][0])
            raise ResultError(f"{path}: row {row + 2}, column {column} holds {str(table[column][row])[:40]!r}, "
                              "expected a number; re-record the run")  # fmt: skip
        table[column] = converted
    return table


def _non_negative(table: pd.DataFrame, columns: tuple[str, ...] | list[str], path: Path) -> None:
    for column in columns:
        if column in table and (table[column] < 0).any():
            row = int(table.index[table[column] < 0][0])
            raise ResultError(f"{path}: row {row + 2}, column {column} is {table[column][row]}, a negative "
                              "duration or count; re-record the run")  # fmt: skip


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
            raise ResultError(f"{path}: row {row + 2}, column {column} holds {values[row]}, expected a whole number; "
                              "re-record the run")  # fmt: skip
        table[column] = values.astype("int64")
    _non_negative(table, [column for column in non_negative if column in table], path)
    return table
