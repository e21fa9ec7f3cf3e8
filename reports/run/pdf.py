"""The PDF report of one run: the HTML report's content paginated on A4 for printing."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TypeVar

from matplotlib.backends.backend_pdf import PdfPages
from matplotlib.figure import Figure, SubFigure
from matplotlib.transforms import offset_copy

from ...profiler.rundir.atomic import write_atomic
from ...profiler.rundir.results import RunData, RunResult
from ..format import flatten
from ..rundata import ReportData, prepare, why_not_measured
from ..stacks import ThreadGroup
from . import charts, flamegraph, gantt, step_path, summary
from .frames import top_frames_table
from .pdf_text import A4_INCHES, CHART_AREA, STYLES, TextPages, table_lines
from .processes import processes_table
from .summary import Table

REPORT_NAME = "report.pdf"
_HEADLINE_COLOURS = {"alarm": "#c0392b", "warn": "#9a6700"}


def write_pdf_report(run_dir: str | Path | RunData | ReportData) -> Path:
    """Write report.pdf into the run directory and return its path."""
    data = prepare(run_dir)
    return write_atomic(data.path / REPORT_NAME, lambda handle: _write(handle, data), binary=True)


def _write(handle: object, data: ReportData) -> None:
    result = data.result
    title = f"{result.config.get('model', 'unknown model')} · {result.config.get('scenario', '')}"
    metadata = {"Title": f"infer-prof: {title}", "Creator": "infer-prof", "CreationDate": None}
    with charts.chart_style(), PdfPages(handle, metadata=metadata) as pdf:
        pages = TextPages(new_page=lambda: Figure(figsize=A4_INCHES), finish_page=pdf.savefig)
        chart_pages, missing = _chart_plan(data)
        _title_page(pages, data, title, missing)
        pages.close()
        _chart_pages(pdf, chart_pages)
        _table_pages(pages, data)
        pages.close()


def _title_page(pages: TextPages, data: ReportData, title: str, missing: list[str]) -> None:
    result = data.result
    pages.line("infer-prof report", "title")
    pages.line(title, "heading", colour="#5b6475")
    pages.line(
        f"recorded {result.created_at} · run directory {data.path.name} · schema v{result.schema_version}",
        "muted",
    )
    pages.space(14)
    pages.line(summary.headline(result), "verdict")
    for warning in summary.headline_warnings(result):
        pages.line(warning.text, colour=_HEADLINE_COLOURS.get(warning.level, "#1d2330"))
    pages.space(4)
    for reason in summary.reasons(result):
        pages.line(f"- {reason}", indent=2)
    for spot in summary.blind_spots(result):
        if not summary.machine_spot(result, spot):
            pages.line(f"Blind spot: {spot}", "muted", colour="#5b6475")
    for name, status, reason in summary.applicable_skipped_collectors(result):
        pages.line(f"Collector {name} {status}: {reason}", "muted", colour="#9a6700")
    not_here = summary.not_applicable(result)
    if not_here:
        pages.line(not_here, "muted", colour="#5b6475")
    for note in missing:
        pages.line(f"Not in this report: {note}", "muted", colour="#5b6475")
    pages.space(12)
    pages.table(
        Table(
            "Key figures",
            ["figure", "value", ""],
            rows=[
                [figure.label, figure.value, figure.detail or ""]
                for figure in summary.key_figures(result, data.slo)
            ],
        ),
        text_columns=(2,),
    )
    for optional in (
        summary.target_table(result),
        processes_table(result),
        summary.replicas_table(result),
        summary.gpu_table(result),
    ):
        if optional is not None:
            pages.table(optional)
    pages.table(summary.latency_table(result))
    pages.table(summary.throughput_table(result))


@dataclass
class PlannedChart:
    """One chart on a PDF page: its heading, how to draw it (its data bound in), its height in inches."""

    heading: str
    draw: Callable[[SubFigure], None]
    height: float
    missing: str | None = None  # why it cannot be drawn (then it is listed on the title page instead)
    with_next: bool = False  # keep on the page of the chart after it (a chart and the table under it)


FLAME_MAX_DEPTH = 40  # the levels draw_flamegraph draws by default
# The chart area's height on A4 (CHART_AREA) in inches, and the strip a heading takes above its chart.
PAGE_HEIGHT_IN = CHART_AREA[3] * A4_INCHES[1]
HEADING_IN = 0.34

Payload = TypeVar("Payload")


def _bound(
    draw: Callable[[SubFigure, Payload], None], payload: Payload | None
) -> Callable[[SubFigure], None]:
    """draw(area, payload). A chart without its data (None) is planned only to be noted as missing, never drawn."""

    def drawn(area: SubFigure) -> None:
        assert payload is not None, "a chart noted as missing is not drawn"
        draw(area, payload)

    return drawn


def _chart_plan(data: ReportData) -> tuple[list[list[PlannedChart]], list[str]]:
    """The chart pages and a note for every chart left out, and why."""
    planned = [
        *_time_split_charts(data.result),
        *_step_path_charts(data.result),
        _predictions_chart(data.result),
        *_over_the_run_charts(data),
        _flame_chart(data),
    ]
    drawn = [chart for chart in planned if chart.missing is None]
    # The table under the time-split chart goes with it; its absence needs no second note.
    missing = [chart.missing for chart in planned if chart.missing is not None and chart.heading]
    return pack_pages(drawn), missing


def _time_split_charts(result: RunResult) -> list[PlannedChart]:
    """The engine thread's time split, and its table kept under it."""
    time_split = summary.time_split_table(result)
    return [
        PlannedChart(
            "Where the engine thread's time goes",
            _bound(charts.draw_time_split, result.breakdown),
            3.6,
            None
            if result.breakdown
            else f"time split not measured ({why_not_measured(result, 'breakdown')})",
            with_next=True,
        ),
        PlannedChart(
            "",
            _bound(_draw_table_text, time_split),
            table_height(time_split),
            None if time_split.rows and result.breakdown else "time split table: no data",
        ),
    ]


def _step_path_charts(result: RunResult) -> list[PlannedChart]:
    """A probed server's step, only where there is one: an in-process run has no processes to draw."""
    probe = (result.target or {}).get("probe")
    lanes = step_path.step_lanes(probe) if probe else []
    if not lanes:
        return []
    return [
        PlannedChart(
            "A step across the server's processes (the in-process probe)",
            _bound(step_path.draw_step_path, probe),
            1.2 + 0.55 * len(lanes),
        )
    ]


def _predictions_chart(result: RunResult) -> PlannedChart:
    predictions = (result.verdict or {}).get("predictions") or {}
    return PlannedChart(
        "Native paths",
        _bound(partial(charts.draw_predictions, noise=summary.verify_noise(result)), predictions),
        1.3 + 0.45 * len(predictions),
        None if predictions else f"native path predictions ({why_not_measured(result, 'verdict')})",
    )


def _over_the_run_charts(data: ReportData) -> list[PlannedChart]:
    """Steps, latencies and requests over the run, the timeline's time axis lined up with the requests'."""
    requests = gantt.request_timeline(data.run, data.start_ns)
    has_latency = any(values.size for values in data.latencies.values())
    return [
        PlannedChart(
            "Over the run",
            _bound(partial(charts.draw_timeline, end_s=requests.end_s if requests else None), data.timeline),
            5.0,
            None if not data.timeline.empty else "timeline: the run recorded no steps",
        ),
        PlannedChart(
            "Latency distributions (finished, non-warm-up requests)",
            _bound(partial(charts.draw_latency_cdfs, slo=data.slo.targets), data.latencies),
            5.0,
            None if has_latency else "latency distributions: no finished requests",
        ),
        PlannedChart(
            "Requests over the run",
            _bound(gantt.draw_request_timeline, requests),
            7.0,
            None if requests else "request timeline: the run recorded no requests",
        ),
    ]


def _flame_chart(data: ReportData) -> PlannedChart:
    return PlannedChart(
        "Where the engine thread's samples are (py-spy)",
        _bound(flamegraph.draw_flamegraph, data.engine_thread),
        _flame_height(data.engine_thread),
        None if data.engine_thread else f"flame graph ({why_not_measured(data.result, 'samples')})",
    )


def _flame_height(group: ThreadGroup | None, row_in: float = 0.2) -> float:
    """Inches for the flame graph: a row per stack level (as deep as draw_flamegraph draws), title and legend."""
    if group is None or not group.stacks:
        return 0.0
    depth = min(FLAME_MAX_DEPTH, max(len(stack.frames) for stack in group.stacks) + 1)
    return min(7.5, 1.3 + row_in * depth)


def _space(chart: PlannedChart) -> float:
    return chart.height + (HEADING_IN if chart.heading else 0.0)


def pack_pages(planned: list[PlannedChart], capacity: float = PAGE_HEIGHT_IN) -> list[list[PlannedChart]]:
    """Charts in order onto pages of `capacity` inches, a new page whenever the next one (with any chart it is
    kept with) would not fit: a page never holds more than it has room for, so nothing is drawn over anything."""
    pages: list[list[PlannedChart]] = []
    used = capacity
    index = 0
    while index < len(planned):
        group = [planned[index]]
        while group[-1].with_next and index + len(group) < len(planned):
            group.append(planned[index + len(group)])
        needed = sum(_space(chart) for chart in group)
        if not pages or used + needed > capacity:
            pages.append([])
            used = 0.0
        pages[-1].extend(group)
        used += needed
        index += len(group)
    return pages


def table_height(table: Table) -> float:
    """Inches a table drawn by _draw_table_text takes: its title and lines, and a line of air."""
    return (len(table_lines(table)) + 2) * STYLES["mono"][1] / 72


def _chart_pages(pdf: PdfPages, pages: list[list[PlannedChart]]) -> None:
    for page_charts in pages:
        page = charts.page(*A4_INCHES, CHART_AREA)
        # Each heading in a strip of its own above its chart: a chart's legend can never be drawn over it.
        # A page with short charts keeps their proportions instead of stretching them to the full sheet.
        ratios: list[float] = []
        for chart in page_charts:
            ratios += [HEADING_IN, chart.height] if chart.heading else [chart.height]
        spare = max(0.0, PAGE_HEIGHT_IN - sum(ratios))
        areas = iter(
            page.subfigures(
                len(ratios) + (1 if spare else 0),
                1,
                squeeze=False,
                height_ratios=ratios + ([spare] if spare else []),
            )[:, 0]
        )
        for chart in page_charts:
            if chart.heading:
                next(areas).text(
                    0.0, 0.5, chart.heading, fontsize=12, fontweight="bold", ha="left", va="center"
                )
            chart.draw(next(areas))
        pdf.savefig(page)


def _draw_table_text(area: SubFigure, table: Table) -> None:
    """A summary table as monospaced lines inside a chart page."""
    size, height_pt, *_ = STYLES["mono"]
    for index, text in enumerate([table.title, *table_lines(table)]):
        # Offsets in points from the area's top-left corner: exact whatever size the layout gives it.
        at = offset_copy(area.transSubfigure, fig=area.figure, y=-(index + 1) * height_pt, units="points")
        area.text(
            0.0,
            1.0,
            text,
            transform=at,
            fontsize=size,
            family="DejaVu Sans Mono",
            weight="bold" if index == 0 else "normal",
            va="baseline",
        )


def _table_pages(pages: TextPages, data: ReportData) -> None:
    result = data.result
    pages.table(summary.predictions_table(result))
    if data.engine_thread is not None:
        pages.table(top_frames_table(data.engine_thread), text_columns=(1, 2, 3))
    pages.table(summary.engine_table(result))
    pages.table(summary.collectors_table(result), text_columns=(1, 2))
    for title, section in (
        ("Configuration", result.config),
        ("Environment", result.environment),
        ("Scenario", result.scenario),
    ):
        table = Table(title, ["key", "value"], rows=[list(row) for row in flatten(section)])
        table.note = None if table.rows else "not recorded"
        pages.table(table, text_columns=(1,))
