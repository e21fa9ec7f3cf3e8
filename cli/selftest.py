"""`infer-prof selftest`: planted bottlenecks whose answer is known by construction, and whether the verdict names them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Optional

import typer

from .app import app

if TYPE_CHECKING:  # the CLI's help and usage errors load none of these (tests/cli/test_imports.py)
    from rich.console import Console

    from ..profiler.checks.selftest import CaseResult


@app.command()
def selftest(
    quick: Annotated[
        bool,
        typer.Option(
            "--quick/--full", help="Short versions of each planted case (the test suite uses --quick)."
        ),
    ] = False,
    only: Annotated[Optional[str], typer.Option("--only", help="Comma list of case names to run.")] = None,
    out: Annotated[
        Optional[str],
        typer.Option(
            "--out",
            "-o",
            help="Keep each case's run directory in this new or empty folder (DIR/<case>; `infer-prof "
            "report DIR/<case>` shows why a case was named as it was). Default: a temporary folder, deleted.",
        ),
    ] = None,
) -> None:
    """Run planted bottlenecks whose answer is known by construction; exit 1 if any verdict is wrong."""
    from pathlib import Path

    from rich.console import Console

    from ..profiler.checks.selftest import run_selftest, select_cases
    from ..profiler.rundir.outdir import check_run_dir
    from .progress import Reporter

    cases = select_cases(only)  # a bad --only or --out is the user's error before any case runs
    out_dir = Path(out) if out is not None else None
    if out_dir is not None:
        check_run_dir(out_dir)
    err = Console(stderr=True)
    with Reporter(err) as reporter:
        task = reporter.task("selftest", total=len(cases), unit="cases")
        started: list[str] = []

        def on_case(case) -> None:
            task.update(len(started), note=f"{case.name}: {case.planted}")
            started.append(case.name)

        task.start(len(cases))
        results = run_selftest(quick=quick, only=only, out_dir=out_dir, on_case=on_case)
        task.update(len(results), note="")
        task.finish()
    raise typer.Exit(render_selftest(results, quick=quick, out=Console(), err=err))


def render_selftest(results: list[CaseResult], *, quick: bool, out: Console, err: Console) -> int:
    """Expected vs measured verdict per case; 0 if every category and component is right, else 1."""
    from rich.table import Table

    table = Table(
        "case",
        "expected (component)",
        "measured (component)",
        "share",
        "seconds",
        "",
        title=f"infer-prof selftest ({'quick' if quick else 'full'})",
    )
    for result in results:
        share = f"{result.share:.1%}" if result.share is not None else "-"
        mark = (
            "[green]ok[/green]"
            if result.ok
            else f"[yellow]void: {result.void}[/yellow]"
            if result.void
            else "[red]WRONG[/red]"
        )
        measured = result.category or f"error: {result.error}"
        table.add_row(
            result.case.name,
            f"{result.case.expected} ({result.case.component})",
            f"{measured} ({result.component or '-'})",
            share,
            f"{result.seconds:.1f}",
            mark,
        )
    out.print(table)
    for result in results:
        out.print(f"  {result.case.name}: {result.case.planted}", style="dim", highlight=False)
    wrong = [result.case.name for result in results if not result.ok and not result.void]
    void = [result.case.name for result in results if result.void]
    if void:
        # Not a defect of the profiler, and not a pass either: the run measured the machine's contention.
        err.print(
            f"[yellow]selftest: {len(void)} case(s) void, the machine was busy: {', '.join(void)}; "
            "re-run them on a quieter machine[/yellow]"
        )
    if wrong:
        err.print(
            f"[red]selftest: {len(wrong)} of {len(results)} case(s) named wrongly: {', '.join(wrong)}[/red]"
        )
        return 1
    if void:
        return 1
    err.print(f"selftest: all {len(results)} case(s) named correctly")
    return 0
