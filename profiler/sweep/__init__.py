"""Sweeps: one `infer-prof run` per combination of axis values, into a directory of run directories and
two merged tables (where Python becomes the bottleneck, across model sizes and loads).

Public surface (imported lazily, so `import profiler.sweep` pulls in neither torch nor Ray):

    load_sweep, builtin_sweeps, SweepSpec      the sweep file (sweep/spec.py)
    build_cells, run_order, Cell, CellKey      the grid (sweep/grid.py)
    run_sweep, write_tables, RayTarget         a whole sweep, locally or on Ray (sweep/run.py)
    SweepHooks                                 what a face watches (sweep/hooks.py)
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "load_sweep": "profiler.sweep.spec",
    "builtin_sweeps": "profiler.sweep.spec",
    "SweepSpec": "profiler.sweep.spec",
    "build_cells": "profiler.sweep.grid",
    "run_order": "profiler.sweep.grid",
    "Cell": "profiler.sweep.grid",
    "CellKey": "profiler.sweep.grid",
    "run_sweep": "profiler.sweep.run",
    "write_tables": "profiler.sweep.run",
    "prepare_cells": "profiler.sweep.run",
    "RayTarget": "profiler.sweep.run",
    "SweepOutcome": "profiler.sweep.run",
    "SweepHooks": "profiler.sweep.hooks",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'profiler.sweep' has no attribute {name!r}")
