"""Writes a sweep's crossover map as a self-contained sweep.html and a printable sweep.pdf."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path

from matplotlib.backends.backend_pdf import PdfPages
from matplotlib.figure import Figure

from ...profiler.rundir.atomic import write_atomic, write_text_atomic
from ..run import charts
from ..run.pdf_text import A4_INCHES, TextPages
from ..templating import render
from . import summary
from .analysis import HIGH_LINE, Crossover
from .charts import draw_maps, draw_predicted_vs_measured
from .map_pages import facet_svgs, map_height, two_to_a_page

HTML_NAME, PDF_NAME = "sweep.html", "sweep.pdf"
FILES = (
    ("cells.parquet", "one row per cell (cells.csv beside it): repeats averaged, native gains paired"),
    ("runs.parquet", "one row per finished run (runs.csv beside it)"),
    ("sweep.json", "the manifest: the sweep file, its cells, the runner"),
    ("cells/", "one ordinary run directory per cell and repeat"),
)


def write_sweep_report(crossover: Crossover, out_dir: str | Path) -> dict[str, Path]:
    """Write sweep.html and sweep.pdf into out_dir; return {name: path relative to it}."""
    out = Path(out_dir)
    written = {
        "sweep_html": write_text_atomic(out / HTML_NAME, render_sweep_html(crossover)),
        "sweep_pdf": write_atomic(out / PDF_NAME, lambda handle: _write_pdf(handle, crossover), binary=True),
    }
    return {name: path.relative_to(out) for name, path in written.items()}


def _map_height(crossover: Crossover) -> float:
    return map_height(len(crossover.y_values), 1.6)


def render_sweep_html(crossover: Crossover) -> str:
    maps = facet_svgs(
        draw_maps, crossover, crossover.facets, height=_map_height(crossover), label="crossover map"
    )
    scatter = (
        charts.draw_with(
            draw_predicted_vs_measured,
            crossover,
            width=10,
            height=4.2,
            label="predicted versus measured native gain per cell",
        )
        if crossover.points
        else None
    )
    return render(
        "sweep.html.j2",
        name=crossover.name,
        description=crossover.description,
        progress=summary.progress_line(crossover),
        verdict_class=_verdict_class(crossover),
        headline=summary.headline(crossover),
        first_look=summary.first_look_sentence(crossover),
        crossings=crossover.crossings,
        trends=crossover.trends,
        notes=crossover.notes,
        x=crossover.x or "-",
        y=crossover.y or "-",
        maps=maps,
        scatter=scatter,
        cells=summary.cells_table(crossover),
        methods=summary.METHOD,
        files=FILES,
    )


def _verdict_class(crossover: Crossover) -> str:
    if crossover.cells.empty:
        return "none"
    shares = crossover.cells["interpreter_share"].dropna()
    if len(shares) == 0:
        return "none"
    return "rewrite" if (shares >= HIGH_LINE).any() else "targeted"


def _write_pdf(handle: object, crossover: Crossover) -> None:
    with (
        charts.chart_style(),
        PdfPages(
            handle,
            metadata={
                "Title": f"infer-prof sweep {crossover.name}",
                "Creator": "infer-prof",
                "CreationDate": None,
            },
        ) as pdf,
    ):
        pages = TextPages(new_page=lambda: Figure(figsize=A4_INCHES), finish_page=pdf.savefig)
        pages.line(f"infer-prof sweep: {crossover.name}", "title")
        pages.line(crossover.description, "muted", colour="#5b6475")
        pages.line(summary.progress_line(crossover), "muted", colour="#5b6475")
        pages.space(10)
        pages.line(summary.headline(crossover), "verdict")
        look = summary.first_look_sentence(crossover)
        if look:
            pages.line(look, "body")
        for sentence in [*crossover.crossings, *crossover.trends]:
            pages.line(f"- {sentence}", indent=2)
        for note in crossover.notes:
            pages.line(f"Note: {note}", "muted", colour="#9a6700")
        pages.space(8)
        pages.table(summary.cells_table(crossover))
        for label, method in summary.METHOD:
            pages.line(f"{label}: {method}", "muted", colour="#5b6475")
        pages.close()
        _chart_pages(pdf, crossover)


def _chart_pages(pdf: PdfPages, crossover: Crossover) -> None:
    """Two maps to a page, the predicted-vs-measured chart after them."""
    height = _map_height(crossover)
    plans: list[tuple[float, Callable[[charts.Target], None]]] = [
        (height, functools.partial(draw_maps, crossover=crossover, facet=facet)) for facet in crossover.facets
    ]
    if crossover.points:
        plans.append((4.2, functools.partial(draw_predicted_vs_measured, crossover=crossover)))
    two_to_a_page(pdf, plans)
