"""Turns a finished run (profiler.rundir.results) into terminal tables, charts, HTML, PDF and trace files.

Public API (imported lazily, so `import reports` does not pull in matplotlib):

    generate_reports(run_dir, *, html=True, pdf=True, traces=True) -> {name: relative path}
    render_summary(result_or_rundata, console)            terminal summary of one run
    write_html_report(run_dir) / write_pdf_report(run_dir) / write_chrome_trace(run_dir) / write_speedscope(run_dir)
    compare_runs(before_dirs, after_dirs) -> ComparisonResult
    write_comparison_report(result, out_dir) / render_comparison(result, console)
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "generate_reports": "infer_prof.reports.run.generate",
    "render_summary": "infer_prof.reports.run.terminal",
    "write_html_report": "infer_prof.reports.run.html",
    "write_pdf_report": "infer_prof.reports.run.pdf",
    "write_chrome_trace": "infer_prof.reports.exports.trace",
    "write_speedscope": "infer_prof.reports.exports.speedscope",
    "compare_runs": "infer_prof.reports.compare.analysis",
    "ComparisonResult": "infer_prof.reports.compare.analysis",
    "MetricComparison": "infer_prof.reports.compare.analysis",
    "write_comparison_report": "infer_prof.reports.compare.report",
    "render_comparison": "infer_prof.reports.compare.terminal",
    "ReportError": "infer_prof.errors",
    "CompareError": "infer_prof.errors",
}
__all__ = [
    "CompareError",
    "ComparisonResult",
    "MetricComparison",
    "ReportError",
    "compare_runs",
    "generate_reports",
    "render_comparison",
    "render_summary",
    "write_chrome_trace",
    "write_comparison_report",
    "write_html_report",
    "write_pdf_report",
    "write_speedscope",
]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'reports' has no attribute {name!r}")
