"""Sweeps: one `infer-prof run` per combination of axis values, into a directory of run directories and
two merged tables (where Python becomes the bottleneck, across model sizes and loads).

Public surface (imported lazily, so `import infer_prof.profiler.sweep` pulls in neither torch nor Ray):

    load_sweep, builtin_sweeps, SweepSpec      the sweep file (sweep/spec.py)
    build_cells, run_order, Cell, CellKey      the grid (sweep/grid.py)
    run_sweep, write_tables, RayTarget         a whole sweep, locally or on Ray (sweep/run.py)
    SweepHooks                                 what a face watches (sweep/hooks.py)
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "load_sweep": "infer_prof.profiler.sweep.spec",
    "builtin_sweeps": "infer_prof.profiler.sweep.spec",
    "SweepSpec": "infer_prof.profiler.sweep.spec",
    "build_cells": "infer_prof.profiler.sweep.grid",
    "run_order": "infer_prof.profiler.sweep.grid",
    "Cell": "infer_prof.profiler.sweep.grid",
    "CellKey": "infer_prof.profiler.sweep.grid",
    "run_sweep": "infer_prof.profiler.sweep.run",
    "write_tables": "infer_prof.profiler.sweep.run",
    "prepare_cells": "infer_prof.profiler.sweep.run",
    "RayTarget": "infer_prof.profiler.sweep.run",
    "SweepOutcome": "infer_prof.profiler.sweep.run",
    "SweepHooks": "infer_prof.profiler.sweep.hooks",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'infer_prof.profiler.sweep' has no attribute {name!r}")
