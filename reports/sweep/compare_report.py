"""Writes two sweeps compared as compare.json, a self-contained compare.html and compare.pdf; prints it."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import IO

from matplotlib.backends.backend_pdf import PdfPages
from matplotlib.figure import Figure
from rich.console import Console
from rich.text import Text

from ..format import NOT_RECORDED, fmt_gain, fmt_pct, fmt_pp
from ..report_files import write_report_files
from ..run import charts
from ..run.pdf_text import A4_INCHES, TextPages
from ..run.summary import Table
from ..templating import render
from ..terminal_table import print_table
from .analysis import NATIVE_AXIS
from .charts import SHORT_VERDICTS
from .compare import NOISE_SIGMAS, SweepComparison, headline
from .compare_charts import draw_difference_maps
from .map_pages import facet_svgs, map_height, two_to_a_page


def write_sweep_comparison(comparison: SweepComparison, out_dir: str | Path) -> dict[str, Path]:
    """compare.json, compare.html and compare.pdf in out_dir; {name: path relative to it}."""
    return write_report_files(
        out_dir,
        "compare",
        comparison.to_dict(),
        render_html(comparison),
        lambda handle: _write_pdf(handle, comparison),
    )


def cells_table(comparison: SweepComparison) -> Table:
    """One row per Python cell: share before and after, its difference against noise, the verdicts, and the
    measured gain of its native partner (the gain map's native value) before and after."""
    rows = comparison.rows
    varying = [axis for axis in comparison.axes if axis != NATIVE_AXIS and rows[axis].nunique() > 1]
    sigmas = f"{NOISE_SIGMAS:g} SE"
    columns = [
        *varying,
        "share before",
        "after",
        "difference",
        f"in {sigmas}",
        "verdict",
        "gain before",
        "after",
        f"in {sigmas}",
    ]
    table = Table("Cells in both sweeps (gain: of the same cell with C twins on)", columns)
    python = rows[rows["twins"] == "none"]
    native = (
        rows[rows[NATIVE_AXIS] == comparison.native_value]
        if comparison.native_value is not None
        else rows[:0]
    )
    for _, row in python.iterrows():
        partner = native
        for axis in comparison.axes:
            if axis != NATIVE_AXIS:
                partner = partner[partner[axis] == row[axis]]
        gain = partner.iloc[0] if not partner.empty else None
        before, after = (
            SHORT_VERDICTS.get(row[f"verdict_{side}"], str(row[f"verdict_{side}"]))
            for side in ("before", "after")
        )
        table.rows.append(
            [
                *[str(row[axis]) for axis in varying],
                fmt_pct(row["share_before"]),
                fmt_pct(row["share_after"]),
                fmt_pp(100 * row["share_diff"]),
                _yes_no(row["share_within_noise"]),
                before if before == after else f"{before} -> {after}",
                fmt_gain(gain["gain_before"]) if gain is not None else NOT_RECORDED,
                fmt_gain(gain["gain_after"]) if gain is not None else NOT_RECORDED,
                _yes_no(gain["gain_within_noise"]) if gain is not None else NOT_RECORDED,
            ]
        )
    if not table.rows:
        table.note = "no cell is in both sweeps"
    return table


def _yes_no(value: object) -> str:
    return "unknown" if value is None else ("yes" if value else "no")


def render_sweep_comparison(comparison: SweepComparison, console: Console | None = None) -> None:
    console = console or Console()
    console.print(Text(headline(comparison), style="bold"))
    console.print(Text(f"  before: {comparison.before}\n  after:  {comparison.after}"))
    print_table(console, cells_table(comparison))
    for note in comparison.notes:
        console.print(Text(f"Note: {note}", style="yellow"))


def _map_height(comparison: SweepComparison) -> float:
    return map_height(len(comparison.y_values), 1.8)


def render_html(comparison: SweepComparison) -> str:
    maps = facet_svgs(
        draw_difference_maps,
        comparison,
        comparison.facets,
        height=_map_height(comparison),
        label="difference map",
    )
    return render(
        "sweep-compare.html.j2",
        headline=headline(comparison),
        before=str(comparison.before),
        after=str(comparison.after),
        maps=maps,
        cells=cells_table(comparison),
        notes=comparison.notes,
        sigmas=f"{NOISE_SIGMAS:g}",
    )


def _write_pdf(handle: IO[bytes], comparison: SweepComparison) -> None:
    metadata = {"Title": "infer-prof: two sweeps compared", "Creator": "infer-prof", "CreationDate": None}
    with charts.chart_style(), PdfPages(handle, metadata=metadata) as pdf:
        pages = TextPages(new_page=lambda: Figure(figsize=A4_INCHES), finish_page=pdf.savefig)
        pages.line("infer-prof: two sweeps compared", "title")
        pages.line(headline(comparison), "verdict")
        pages.line(f"before: {comparison.before}", "muted")
        pages.line(f"after: {comparison.after}", "muted")
        for note in comparison.notes:
            pages.line(f"Note: {note}", "muted", colour="#9a6700")
        pages.space(8)
        pages.table(cells_table(comparison))
        pages.close()
        height = _map_height(comparison)
        two_to_a_page(
            pdf,
            [
                (height, functools.partial(draw_difference_maps, comparison=comparison, facet=facet))
                for facet in comparison.facets
            ],
        )
