"""Writes every report of a run directory in one pass (what `infer-prof run` and `infer-prof report` call)."""

from __future__ import annotations

from pathlib import Path

from ...profiler.rundir.results import RunData
from ..exports.speedscope import write_speedscope
from ..exports.trace import write_chrome_trace
from ..rundata import prepare
from .html import write_html_report
from .pdf import write_pdf_report


def generate_reports(
    run_dir: str | Path | RunData, *, html: bool = True, pdf: bool = True, traces: bool = True
) -> dict[str, Path]:
    """Write the chosen reports into the run directory; return {name: path relative to the run directory}.

    Names: "trace", "speedscope", "report_html", "report_pdf" (the keys result.files uses). The run
    is read once; traces are written first so the HTML report can link to them.
    """
    data = prepare(run_dir)
    written: dict[str, Path] = {}
    if traces:
        written["trace"] = write_chrome_trace(data.run)
        written["speedscope"] = write_speedscope(data.run)
    if html:
        written["report_html"] = write_html_report(data)
    if pdf:
        written["report_pdf"] = write_pdf_report(data)
    return {name: path.relative_to(data.path) for name, path in written.items()}
