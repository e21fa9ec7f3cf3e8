"""The crossover map of a sweep directory (profiler.rundir.sweepdir): terminal summary, sweep.html and
sweep.pdf, and the map of the difference between two sweeps."""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "read_crossover": "reports.sweep.analysis",
    "build_crossover": "reports.sweep.analysis",
    "Crossover": "reports.sweep.analysis",
    "render_sweep_summary": "reports.sweep.terminal",
    "write_sweep_report": "reports.sweep.report",
    "compare_sweeps": "reports.sweep.compare",
    "render_sweep_comparison": "reports.sweep.compare_report",
    "write_sweep_comparison": "reports.sweep.compare_report",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'reports.sweep' has no attribute {name!r}")
