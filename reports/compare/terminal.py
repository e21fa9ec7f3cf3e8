"""The terminal view of a comparison (Rich): the verdict sentence, the metric table, the time-split shift."""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.table import Table as RichTable
from rich.text import Text

from ..format import NOT_RECORDED
from ..terminal_table import print_table
from . import summary as compare_summary
from .analysis import (
    FASTER,
    SLOWER,
    ComparisonResult,
    MetricComparison,
    metric_group,
)

_VERDICT_STYLES = {FASTER: "bold green", SLOWER: "bold red"}


def render_comparison(result: ComparisonResult, console: Console | None = None) -> None:
    """Print the comparison; the verdict words carry the meaning, colour only repeats them."""
    console = console or Console()
    console.print(Text(compare_summary.headline(result), style="bold"))
    console.print(Text(f"  before: {', '.join(result.before)}"))
    console.print(Text(f"  after:  {', '.join(result.after)}"))
    console.print()
    rich_table = RichTable(
        title="Metrics (ratio = after / before)",
        title_justify="left",
        title_style="bold",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        show_edge=False,
        collapse_padding=True,
    )
    rich_table.add_column("metric", no_wrap=True)
    rich_table.add_column("before", justify="right", overflow="fold")
    rich_table.add_column("after", justify="right", overflow="fold")
    narrow = console.width < (88 if result.mode == "repeats" else 80)
    ratio_header = f"ratio{chr(10) if narrow else ' '}({result.confidence:.0%} CI)"
    rich_table.add_column(ratio_header, justify="right", overflow="fold")
    if result.mode == "repeats":
        rich_table.add_column("p", justify="right")
    rich_table.add_column("verdict", no_wrap=True, min_width=len("no significant change"))
    group = None
    for metric in result.metrics:
        kind = metric_group(metric)
        if group is not None and kind != group:
            rich_table.add_section()
        group = kind
        # A narrow terminal gets the interval on a second line rather than a number folded in half.
        ratio = _ratio(metric).replace(" (", "\n(") if narrow else _ratio(metric)
        row = [_short_label(metric), _compact(metric.before), _compact(metric.after), ratio]
        if result.mode == "repeats":
            row.append(NOT_RECORDED if metric.p_value is None else f"{metric.p_value:.3f}")
        rich_table.add_row(*row, Text(metric.verdict, style=_VERDICT_STYLES.get(metric.verdict, "")))
    console.print(rich_table)
    shift = compare_summary.shift_table(result)
    if shift.rows:
        print_table(console, shift)
    elif shift.note:
        console.print(Text(f"Time split shift: {shift.note}", style="dim"))
    for note in result.notes:
        console.print(Text(f"note: {note}", style="dim"))


def _compact(value: float | None) -> str:
    # Three significant figures fit an 80-column terminal; the HTML and JSON keep full precision.
    if value is None:
        return NOT_RECORDED
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}"


def _ratio(metric: MetricComparison) -> str:
    if metric.ratio is None:
        return f"n/a ({metric.why})" if metric.why else "n/a"
    if metric.ci_low is None or metric.ci_high is None:
        return f"{metric.ratio:.2f}x"
    return f"{metric.ratio:.2f}x ({metric.ci_low:.2f}-{metric.ci_high:.2f})"


_SHORT_LABELS = {
    "request_throughput": "requests/s",
    "output_token_throughput": "output tok/s",
    "goodput": "goodput req/s",
}


def _short_label(metric: MetricComparison) -> str:
    """Labels short enough that the table fits 80 columns without folding a number."""
    if metric.name in _SHORT_LABELS:
        return _SHORT_LABELS[metric.name]
    if metric.name.startswith("share."):
        return f"{metric.name.removeprefix('share.')} share %"
    return f"{metric.label} {metric.unit}"
