"""`infer-prof budget check|baseline`: run (or read) runs, check them against a budget file, and report for CI."""

from __future__ import annotations

import datetime as _dt
import itertools
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from ..profiler.session.options import OPTION, EngineOptions
from .app import budget_app
from .options import output_path

if TYPE_CHECKING:  # the CLI's help and usage errors load none of these (tests/cli/test_imports.py)
    from rich.console import Console, JustifyMethod

    from ..profiler.budget.check import BudgetReport, RunFn
    from ..profiler.budget.spec import RunOverrides

_STYLES = {"PASS": "green", "FAIL": "bold red", "WARN": "yellow", "SKIP": "dim"}


@budget_app.command("check")
def budget_check(
    budget_file: Annotated[Path, typer.Argument(help="A budget TOML file (see docs/budgets.md).")],
    run: Annotated[
        Optional[list[Path]],
        typer.Option("--run", help="Check these run directories instead of running the budget's scenario."),
    ] = None,
    baseline: Annotated[
        Optional[list[Path]],
        typer.Option(
            "--baseline", help="Baseline run directories (or a folder of them) for ratio assertions."
        ),
    ] = None,
    junit: Annotated[
        Optional[str], typer.Option("--junit", help="Also write a JUnit XML file for CI dashboards.")
    ] = None,
    bmf: Annotated[
        Optional[str], typer.Option("--bmf", help="Also write Bencher Metric Format JSON.")
    ] = None,
    out: Annotated[
        str, typer.Option("--out", "-o", help="Where runs made by this check go.")
    ] = "runs/budget",
    drift_guard: Annotated[
        bool,
        typer.Option(
            "--drift-guard/--no-drift-guard",
            help="Against a baseline: fail as void (not as a regression) when the model span's time per token moved. Turn it off when the change touches the model.",
        ),
    ] = True,
) -> None:
    """Check runs against a budget: exit 0 pass (warnings allowed), 1 an error assertion failed, 2 bad input."""
    raise typer.Exit(
        budget_check_command(
            budget_file,
            runs=run or [],
            baselines=baseline or [],
            out=output_path(out, "--out") or Path("runs/budget"),
            junit=output_path(junit, "--junit"),
            bmf=output_path(bmf, "--bmf"),
            drift_guard=drift_guard,
        )
    )


@budget_app.command("baseline")
def budget_baseline(
    budget_file: Annotated[
        Path, typer.Argument(help="The budget TOML whose scenario (and [baseline] settings) to record.")
    ],
    out: Annotated[
        str,
        typer.Option(
            "--out", "-o", help="Folder for the baseline runs (pass it to `budget check --baseline`)."
        ),
    ] = "runs/baseline",
) -> None:
    """Record baseline runs for later `budget check --baseline DIR`."""
    raise typer.Exit(
        budget_baseline_command(budget_file, out=output_path(out, "--out") or Path("runs/baseline"))
    )


def make_run_fn(out_root: Path, console: Console) -> RunFn:
    """A run_fn(overrides) -> run dir for profiler.budget.check; models are loaded once per process."""
    from ..native_paths.loader import require_twins
    from ..native_paths.toggles import parse_native
    from ..profiler.session.runner import ModelCache, run_once
    from .progress import session_progress

    models = ModelCache()
    counter = itertools.count(1)
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")

    def run_fn(overrides: RunOverrides) -> Path:
        native = overrides.get("native")
        # On the CPU, as budgets were recorded (EngineOptions' own default device is auto, as on the CLI).
        options = EngineOptions(
            model=overrides.get("model", OPTION["model"].default),
            seed=int(overrides.get("seed") or 0),
            device="cpu",
            native=parse_native(",".join(native) if native else "none"),
            threads=overrides.get("threads"),
        )
        require_twins(options.native, "budget")  # before the run: a fallback run would be refused after it
        profile = overrides.get("profile", "default")
        out_dir = (
            out_root
            / f"{stamp}-{next(counter):02d}-{profile}-native-{'+'.join(sorted(options.native)) or 'none'}"
        )
        console.print(
            f"[dim]budget: running {overrides.get('scenario')} ({profile}, native {sorted(options.native) or 'none'}) -> {out_dir}[/dim]"
        )
        with session_progress(console, "budget run") as hooks:
            return run_once(
                options,
                overrides["scenario"],
                out_dir,
                requests=overrides.get("requests"),
                duration_s=overrides.get("duration_s"),
                seed=overrides.get("seed"),
                profile=profile,
                models=models,
                hooks=hooks,
            )

    return run_fn


def budget_check_command(
    budget_file: Path,
    *,
    runs: list[Path],
    baselines: list[Path],
    junit: Path | None,
    bmf: Path | None,
    out: Path,
    drift_guard: bool = True,
) -> int:
    from rich.console import Console

    from ..profiler.budget.check import check_budget, check_budget_with_runner
    from ..profiler.budget.output import write_bmf, write_junit
    from ..profiler.budget.spec import load_budget
    from ..profiler.rundir.outdir import check_output_dir, check_output_file

    console = Console(stderr=True)
    for option, path in (("--junit", junit), ("--bmf", bmf)):
        if path is not None:
            check_output_file(path, option)
    if not runs:  # the budget's own runs go under --out: checked before the first one starts
        check_output_dir(out, "--out")
    budget = load_budget(budget_file)
    if runs:
        report = check_budget(budget, runs, baselines or None, drift_guard=drift_guard)
    else:
        report = check_budget_with_runner(
            budget, make_run_fn(out, console), baseline_runs=baselines or None, drift_guard=drift_guard
        )
    render_budget_report(report, Console())
    if junit:
        write_junit(report, junit)
    if bmf:
        write_bmf(report, bmf)
    return report.exit_code


def budget_baseline_command(budget_file: Path, *, out: Path) -> int:
    from rich.console import Console

    from ..profiler.budget.check import record_runs
    from ..profiler.budget.spec import load_budget
    from ..profiler.rundir.outdir import check_output_dir

    console = Console(stderr=True)
    check_output_dir(out, "--out")  # an unwritable or file --out is refused before any run starts
    budget = load_budget(budget_file)
    paths = record_runs(budget, make_run_fn(out, console), overrides=budget.baseline or None)
    for path in paths:
        print(path)
    console.print(f"baseline recorded: pass [bold]--baseline {out}[/bold] to `infer-prof budget check`")
    return 0


def render_budget_report(report: BudgetReport, console: Console) -> None:
    """Print one row per assertion and a one-line verdict that states the exit code."""
    from rich.markup import escape
    from rich.table import Table

    from ..profiler.budget.check import format_value

    title = f"budget {escape(report.budget.name)}: {len(report.runs)} run(s)"
    if report.baseline_runs:
        title += f" vs {len(report.baseline_runs)} baseline run(s)"
    table = Table(title=title, title_justify="left", show_lines=False)
    columns: tuple[tuple[str, JustifyMethod], ...] = (
        ("status", "left"),
        ("assertion", "left"),
        ("measured", "right"),
        ("bound", "left"),
        ("vs baseline", "right"),
        ("why", "left"),
    )
    for column, justify in columns:
        table.add_column(column, justify=justify, overflow="fold")
    for result in report.results:
        status = result.status
        measured = "-" if result.measured is None else format_value(result.measured)
        if len(result.values) > 1 and result.measured is not None:
            measured += f" ({result.assertion.aggregate} of {len(result.values)})"
        versus = "-" if result.ratio is None else f"{format_value(result.ratio)}x"
        table.add_row(
            # Names and reasons are user text: escape them so "[...]" is not read as Rich markup.
            f"[{_STYLES[status]}]{status}[/]",
            escape(f"{result.name} [{result.level}]"),
            measured,
            escape(result.bound),
            versus,
            escape(result.reason),
        )
    console.print(table)
    errors, warnings = len(report.failed_errors), len(report.failed_warnings)
    passed = sum(1 for r in report.results if r.status == "PASS")
    skipped = sum(1 for r in report.results if r.status == "SKIP")
    summary = f"{passed} passed, {errors} failed, {warnings} warning(s), {skipped} skipped"
    if errors:
        names = escape(", ".join(r.name for r in report.failed_errors))
        console.print(f"[bold red]budget failed[/]: {summary} ({names}) -> exit 1")
    elif warnings:
        console.print(f"[yellow]budget passed with warnings[/]: {summary} -> exit 0")
    else:
        console.print(f"[green]budget passed[/]: {summary} -> exit 0")
