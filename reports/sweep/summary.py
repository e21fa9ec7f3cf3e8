"""The words and tables of a sweep's summary, built once for the terminal, HTML and PDF reports."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from ..format import NOT_RECORDED, fmt_gain, fmt_number, fmt_pct
from ..run.summary import Table
from .analysis import HIGH_LINE, LOW_LINE, NATIVE_AXIS, Crossover
from .charts import SHORT_VERDICTS

METHOD = [
    (
        "interpreter share",
        "the verdict's interpreter_share of each run (spans: Python time over the engine "
        "thread's busy time, idle excluded), averaged over the cell's repeats; ± is the standard error over repeats",
    ),
    (
        "verdict",
        "the run report's rule applied to the cell's mean share: below 5% stay (in Python), from 30% "
        "rewrite (a native rewrite pays), between targeted (targeted native paths)",
    ),
    (
        "measured gain",
        "1 - busy time per generated token with the C twins / with the Python twins, each repeat "
        "against the Python run next to it in the run order, averaged; the unit of --verify and of the prediction",
    ),
    (
        "predicted gain",
        "the Python run's Amdahl prediction for the twins switched on: the sum over them of "
        "share x (1 - 1 / microbenchmark speedup)",
    ),
    (
        "contour lines",
        "where the interpreter share crosses 1% and 30%, interpolated in log share between the "
        "centres of neighbouring cells",
    ),
]


def headline(crossover: Crossover) -> str:
    """The sweep in one sentence: how far the share spreads and how many cells are past each line."""
    python = _python(crossover)
    shares = (
        [float(share) for share in python["interpreter_share"] if _present(share)] if not python.empty else []
    )
    if not shares:
        return "No finished run of this sweep has a time split yet: there is no map."
    past_high = sum(share >= HIGH_LINE for share in shares)
    below_low = sum(share < LOW_LINE for share in shares)
    return (
        f"Python's share of the engine's busy time runs from {min(shares):.1%} to {max(shares):.1%} over "
        f"{len(shares)} cells: {past_high} at or past {HIGH_LINE:.0%} (a native rewrite pays), {below_low} "
        f"below {LOW_LINE:.0%}."
    )


def first_look_sentence(crossover: Crossover) -> str | None:
    look = crossover.first_look
    if look is None:
        return None
    where = ", ".join(
        f"{axis}={value}" for axis, value in look.values.items() if len(crossover.axes.get(axis, [])) > 1
    )
    return f"Look first at {where or look.cell} (cells/{look.cell}): {look.why}."


def cells_table(crossover: Crossover) -> Table:
    """Every Python cell with its share and verdict, and its native partners' predicted and measured gains."""
    varying = [axis for axis, values in crossover.axes.items() if len(values) > 1 and axis != NATIVE_AXIS]
    native_values = [
        value
        for value in crossover.axes.get(NATIVE_AXIS, [])
        if not _python(crossover).empty and value not in set(_python(crossover).get(NATIVE_AXIS, []))
    ]
    columns = [*varying, "runs", "interpreter share", "verdict"]
    for value in native_values:
        columns += [f"{value}: predicted", f"{value}: measured"]
    table = Table("Cells (Python control paths, and the gain of each native setting)", columns)
    cells = crossover.cells
    if cells.empty:
        table.note = "no finished runs"
        return table
    for _, row in _python(crossover).iterrows():
        share = fmt_pct(row["interpreter_share"]) + _interval(row, "interpreter_share")
        line = [_text(row[axis]) for axis in varying] + [
            fmt_number(row["repeats"]),
            share,
            unresolved_text(row) or SHORT_VERDICTS.get(row["verdict"], str(row["verdict"] or NOT_RECORDED)),
        ]
        for value in native_values:
            partner = cells[(cells["baseline_cell"] == row["cell"]) & (cells[NATIVE_AXIS] == value)]
            if partner.empty:
                line += [NOT_RECORDED, NOT_RECORDED]
                continue
            measured = fmt_gain(partner["measured_gain"].iloc[0]) + _interval(
                partner.iloc[0], "measured_gain"
            )
            if unresolved_text(partner.iloc[0]):
                measured += " " + str(unresolved_text(partner.iloc[0]))
            line += [fmt_gain(partner["predicted_gain"].iloc[0]), measured]
        table.rows.append(line)
    return table


def _interval(row: Any, name: str) -> str:
    """ " [low, high]" in percent when the cell has a 95% interval for `name` (older sweeps: none)."""
    low, high = row.get(f"{name}_low"), row.get(f"{name}_high")
    return f" [{low * 100:.1f}, {high * 100:.1f}]" if _present(low) and _present(high) else ""


def unresolved_text(row: Any) -> str | None:
    """ "unresolved (N repeats would resolve it)" for a cell whose noise swamps its effect, None for a resolved
    one (or an older sweep without the column)."""
    resolved = row.get("resolved")
    if resolved is None or (isinstance(resolved, float) and math.isnan(resolved)) or bool(resolved):
        return None
    count = row.get("repeats_to_resolve")
    return "unresolved" + (f" (~{int(count)} repeats would resolve it)" if _present(count) else "")


def progress_line(crossover: Crossover) -> str:
    return (
        f"{crossover.runs_finished} of {crossover.runs_total} runs finished · {len(crossover.cells)} cells with "
        f"results · {crossover.repeats} repeat(s) per cell"
    )


def _python(crossover: Crossover) -> pd.DataFrame:
    cells = crossover.cells
    return cells[cells["twins"] == "none"] if not cells.empty else cells


def _present(value: Any) -> bool:
    try:
        return value is not None and not math.isnan(float(value))
    except (TypeError, ValueError):
        return False


def _text(value: Any) -> str:
    if isinstance(value, float) and math.isinf(value):
        return "inf"
    return str(value)
