"""Writes a comparison as compare.json, a self-contained compare.html and a printable compare.pdf."""

from __future__ import annotations

from pathlib import Path

from matplotlib.backends.backend_pdf import PdfPages
from matplotlib.figure import Figure

from ..report_files import write_report_files
from ..run import charts
from ..run.pdf_text import A4_INCHES, CHART_AREA, TextPages
from ..templating import render
from . import summary as compare_summary
from .analysis import FASTER, SLOWER, ComparisonResult
from .charts import draw_improvements, draw_shift, draw_yardstick


def write_comparison_report(result: ComparisonResult, out_dir: str | Path) -> dict[str, Path]:
    """Write compare.json, compare.html and compare.pdf into out_dir; return {name: path relative to it}."""
    return write_report_files(
        out_dir,
        "compare",
        result.to_dict(),
        render_comparison_html(result),
        lambda handle: _write_pdf(handle, result),
    )


YARDSTICK_HEIGHT = 3.2


def _improvement_height(result: ComparisonResult) -> float:
    return 1.4 + 0.3 * sum(1 for m in result.metrics if m.better is not None)  # two panel titles


def _shift_height(result: ComparisonResult) -> float:
    rows = len(result.time_split_shift.get("components") or {}) or sum(
        m.name.startswith("share.") for m in result.metrics
    )
    return 1.0 + 0.3 * max(rows, 1)


def render_comparison_html(result: ComparisonResult) -> str:
    verdicts = {m.verdict for m in result.metrics if m.better is not None}
    verdict_class = "rewrite" if SLOWER in verdicts else ("stay" if FASTER in verdicts else "none")
    methods = list(dict.fromkeys((m.label, m.method) for m in result.metrics))
    return render(
        "compare.html.j2",
        headline=compare_summary.headline(result),
        verdict_class=verdict_class,
        before=result.before,
        after=result.after,
        repeats=result.mode == "repeats",
        mode_text="per-run values (repeats)"
        if result.mode == "repeats"
        else "bootstrap over each run's samples",
        seed=result.seed,
        confidence=f"{result.confidence:.0%}",
        alpha=f"{1 - result.confidence:.2f}",
        min_effect=f"{result.min_effect:.0%}",
        metrics=compare_summary.metrics_table(result),
        shift=compare_summary.shift_table(result),
        methods=methods,
        notes=result.notes,
        yardstick=result.yardstick,
        charts={
            "improvements": charts.draw_with(
                draw_improvements,
                result,
                width=10,
                height=_improvement_height(result),
                label="ratios after over before with confidence intervals",
            ),
            "shift": charts.draw_with(
                draw_shift,
                result,
                width=10,
                height=_shift_height(result),
                label="time split shift in percentage points",
            ),
            "yardstick": charts.draw_with(
                draw_yardstick, result.yardstick, width=10, height=YARDSTICK_HEIGHT, label="yardstick per run"
            )
            if result.yardstick
            else None,
        },
    )


def _write_pdf(handle: object, result: ComparisonResult) -> None:
    with (
        charts.chart_style(),
        PdfPages(handle, metadata={"Title": "infer-prof comparison", "CreationDate": None}) as pdf,
    ):
        pages = TextPages(new_page=lambda: Figure(figsize=A4_INCHES), finish_page=pdf.savefig)
        pages.line("infer-prof: before vs after", "title")
        pages.space(6)
        pages.line(compare_summary.headline(result), "verdict")
        pages.line(f"before: {', '.join(result.before)}", "muted")
        pages.line(f"after: {', '.join(result.after)}", "muted")
        pages.space(10)
        pages.table(compare_summary.metrics_table(result), text_columns=(5, 6))
        pages.table(compare_summary.shift_table(result))
        for note in result.notes:
            pages.line(f"Note: {note}", "muted", colour="#5b6475")
        pages.close()
        page = charts.page(*A4_INCHES, CHART_AREA)
        heights = [_improvement_height(result), _shift_height(result)]
        areas = page.subfigures(3, 1, height_ratios=[*heights, max(0.5, 10.2 - sum(heights))], squeeze=False)[
            :, 0
        ]
        draw_improvements(areas[0], result)
        draw_shift(areas[1], result)
        pdf.savefig(page)
        if result.yardstick:
            page = charts.page(*A4_INCHES, CHART_AREA)
            area, _ = page.subfigures(
                2, 1, height_ratios=[YARDSTICK_HEIGHT, 10.2 - YARDSTICK_HEIGHT], squeeze=False
            )[:, 0]
            area.suptitle("Drift: did the machine move?", fontsize=12, fontweight="bold", x=0.0, ha="left")
            draw_yardstick(area, result.yardstick)
            pdf.savefig(page)
