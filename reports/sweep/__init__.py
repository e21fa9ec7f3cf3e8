"""The crossover map of a sweep directory (profiler.rundir.sweepdir): terminal summary, sweep.html and
sweep.pdf, and the map of the difference between two sweeps."""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "read_crossover": "infer_prof.reports.sweep.analysis",
    "build_crossover": "infer_prof.reports.sweep.analysis",
    "Crossover": "infer_prof.reports.sweep.analysis",
    "render_sweep_summary": "infer_prof.reports.sweep.terminal",
    "write_sweep_report": "infer_prof.reports.sweep.report",
    "compare_sweeps": "infer_prof.reports.sweep.compare",
    "render_sweep_comparison": "infer_prof.reports.sweep.compare_report",
    "write_sweep_comparison": "infer_prof.reports.sweep.compare_report",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'infer_prof.reports.sweep' has no attribute {name!r}")
