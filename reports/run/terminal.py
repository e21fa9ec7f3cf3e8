"""The terminal summary of one run (Rich): verdict first, then the tables a reader checks it against."""

from __future__ import annotations

from pathlib import Path

from rich import box
from rich.console import Console
from rich.table import Table as RichTable
from rich.text import Text

from profiler.rundir.results import RunData, RunResult, read_result
from reports.run import summary
from reports.run.processes import processes_table
from reports.run.summary import Table

# Styles carry meaning only as emphasis: with NO_COLOR or piped output Rich drops them and every
# word and number stays, so nothing is said by colour alone.
_RULE_STYLES = {"stay in python": "green", "targeted native paths": "yellow", "native rewrite pays": "red"}
_STATUS_STYLES = {"ok": "green", "skipped": "yellow", "failed": "red"}


def render_summary(
    result_or_rundata: RunResult | RunData | str | Path, console: Console | None = None
) -> None:
    """Print the run summary: verdict sentence, reasons, time split, serving metrics, engine, gains, collectors."""
    result = _result(result_or_rundata)
    console = console or Console()
    rule = str((result.verdict or {}).get("rule", "")).lower()
    console.print(Text(summary.headline(result), style=f"bold {_RULE_STYLES.get(rule, '')}".strip()))
    for reason in summary.reasons(result):
        console.print(Text(f"  - {reason}"))
    for spot in summary.blind_spots(result):
        console.print(Text(f"  blind spot: {spot}", style="dim"))
    if result.partial:
        console.print(Text(f"Partial run: {result.partial_reason or 'no reason recorded'}", style="bold red"))
    console.print()
    for optional in (summary.target_table(result), processes_table(result), summary.gpu_table(result)):
        if optional is not None:
            _print_table(console, optional)
    for table in (
        summary.time_split_table(result),
        summary.latency_table(result),
        summary.throughput_table(result),
        summary.engine_table(result),
        summary.predictions_table(result),
    ):
        _print_table(console, table)
    skipped = summary.skipped_collectors(result)
    if skipped:
        console.print(Text("Collectors that did not run", style="bold"))
        for name, status, reason in skipped:
            line = Text("  ")
            line.append(f"{name} {status}", style=_STATUS_STYLES.get(status, ""))
            line.append(f": {reason}")
            console.print(line)
    else:
        console.print(Text("All collectors ran.", style="green"))


def _result(source: RunResult | RunData | str | Path) -> RunResult:
    if isinstance(source, RunResult):
        return source
    if isinstance(source, RunData):
        return source.result
    return read_result(source)


def _print_table(console: Console, table: Table) -> None:
    # The title is its own line: as a table title it would wrap to the width of a narrow table.
    console.print(Text(table.title, style="bold"))
    if table.rows:
        rich_table = RichTable(box=box.SIMPLE_HEAD, show_edge=False)
        for index, column in enumerate(table.columns):
            # Fold rather than truncate: a narrow terminal wraps a number, it never hides one.
            rich_table.add_column(column, justify="left" if index == 0 or table.text else "right", overflow="fold")
        for index, row in enumerate(table.rows):
            if index in table.sections and index > 0:
                rich_table.add_section()
            rich_table.add_row(*row)
        console.print(rich_table)
    if table.note:
        console.print(Text(f"  {table.note}", style="dim"))
    console.print()
