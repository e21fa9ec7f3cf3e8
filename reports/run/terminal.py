"""The terminal summary of one run (Rich): the verdict and one screen of what backs it, or every table (verbose)."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.text import Text

from ...profiler.rundir.results import RunData, RunResult, read_run
from ..rundata import why_not_measured
from ..slo import check_slos, slo_targets
from ..terminal_table import print_table
from . import summary
from .processes import processes_table

# Styles carry meaning only as emphasis: with NO_COLOR or piped output Rich drops them and every
# word and number stays, so nothing is said by colour alone.
_RULE_STYLES = {"stay in python": "green", "targeted native paths": "yellow", "native rewrite pays": "red"}
_STATUS_STYLES = {"ok": "green", "skipped": "yellow", "failed": "red"}
_HEADLINE_STYLES = {"alarm": "bold red", "warn": "yellow", "note": ""}


def render_summary(
    result_or_rundata: RunResult | RunData | str | Path,
    console: Console | None = None,
    *,
    verbose: bool = False,
    report: bool | None = None,
) -> None:
    """Print the run summary: by default one screen (verdict, headline warnings, the split, breached SLOs, the
    predictions worth a line, the blind spots that change the reading, where the report is); `verbose`: every table.

    report: whether report.html is (about to be) written; None: whether it is there now."""
    run = _run(result_or_rundata)
    result = run.result if isinstance(run, RunData) else run
    console = console or Console()
    rule = str((result.verdict or {}).get("rule", "")).lower()
    console.print(Text(summary.headline(result), style=f"bold {_RULE_STYLES.get(rule, '')}".strip()))
    for line in summary.headline_warnings(result):
        console.print(Text(line.text, style=_HEADLINE_STYLES.get(line.level, "")))
    if verbose:
        _render_full(result, console)
    else:
        _render_short(result, run, console, report)


def _render_short(result: RunResult, run: RunResult | RunData, console: Console, report: bool | None) -> None:
    server = summary.target_line(result)
    if server:
        console.print(Text(server))
    console.print()
    split = summary.compact_split(result)
    if split is not None:
        print_table(console, split)
    else:
        console.print(
            Text(f"Time split: not measured ({why_not_measured(result, 'breakdown')}).", style="dim")
        )
    for line in (
        summary.gpu_line(result),
        summary.load_line(result),
        summary.queued_line(result),
        *summary.probe_lines(result),
    ):
        if line:
            console.print(Text(line))
    _render_replicas(result, console)
    check = check_slos(run.requests, slo_targets(result)) if isinstance(run, RunData) else None
    for line in summary.slo_lines(result, check):
        console.print(Text(line, style="bold red" if line.startswith("SLO breached") else ""))
    for line in summary.prediction_lines(result):
        console.print(Text(line))
    for note in summary.unresolved_notes(result):  # the full view has it under the predictions table
        console.print(Text(f"Not checkable: {note}.", style="yellow"))
    for spot in summary.reading_blind_spots(result):
        console.print(Text(f"Blind spot: {spot}", style="yellow"))
    for name, status, reason in summary.applicable_skipped_collectors(result):
        if not any(reason in spot for spot in summary.blind_spots(result)):  # said once, as its blind spot
            console.print(Text(f"Collector {name} {status}: {reason}", style="yellow"))
    for line in (summary.profile_limits(result), summary.not_applicable(result)):
        if line:
            console.print(Text(line, style="dim"))
    if isinstance(run, RunData):
        html = run.path / "report.html"
        written = html.exists() if report is None else report
        where = (
            f"Report: {html}" if written else f"No report files: `infer-prof report {run.path}` writes them"
        )
        console.print(Text(f"{where}; every table: --verbose", style="dim"))


def _render_full(result: RunResult, console: Console) -> None:
    for reason in summary.reasons(result):
        console.print(Text(f"  - {reason}"))
    for spot in summary.blind_spots(result):
        if not summary.machine_spot(result, spot):
            console.print(Text(f"  blind spot: {spot}", style="dim"))
    console.print()
    for optional in (summary.target_table(result), processes_table(result), summary.gpu_table(result)):
        if optional is not None:
            print_table(console, optional)
    _render_replicas(result, console)
    for table in (
        summary.time_split_table(result),
        summary.latency_table(result),
        summary.throughput_table(result),
        summary.engine_table(result),
        summary.predictions_table(result),
    ):
        print_table(console, table)
    skipped = summary.applicable_skipped_collectors(result)
    if skipped:
        console.print(Text("Collectors that did not run", style="bold"))
        for name, status, reason in skipped:
            line = Text("  ")
            line.append(f"{name} {status}", style=_STATUS_STYLES.get(status, ""))
            line.append(f": {reason}")
            console.print(line)
    elif not summary.skipped_collectors(result):
        console.print(Text("All collectors ran.", style="green"))
    not_here = summary.not_applicable(result)
    if not_here:
        console.print(Text(not_here, style="dim"))


def _render_replicas(result: RunResult, console: Console) -> None:
    """A router's replicas: their table and whether they did equal work (nothing without replicas)."""
    table = summary.replicas_table(result)
    if table is not None:
        print_table(console, table)
    for line in summary.replica_lines(result):
        console.print(Text(line))


def _run(source: RunResult | RunData | str | Path) -> RunResult | RunData:
    """The run with its tables when they can be read (the SLO breach counts need requests), else the result."""
    if isinstance(source, (RunResult, RunData)):
        return source
    return read_run(source)
