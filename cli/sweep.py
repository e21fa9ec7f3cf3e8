"""`infer-prof sweep FILE` (every cell of a sweep file, here or on Ray, resumable) and
`infer-prof sweep report DIR`
(the crossover map again): faces over profiler.sweep with a progress view, the summary and the reports."""

from __future__ import annotations

import datetime as _dt
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
import typer.core

from .app import app
from .options import output_path

if TYPE_CHECKING:  # the CLI's help and usage errors load none of these (tests/cli/test_imports.py)
    from rich.console import Console

    from ..profiler.sweep.run import SweepOutcome

INTERRUPTED_EXIT_CODE = 130


class _FileIsRun(typer.core.TyperGroup):
    """`infer-prof sweep FILE ...` means `infer-prof sweep run FILE ...`: a file is not a command."""

    def parse_args(self, ctx, args):
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h"):
            args = ["run", *args]
        return super().parse_args(ctx, args)


sweep_app = typer.Typer(
    cls=_FileIsRun,
    help=(
        "Where Python becomes the bottleneck: one run per combination of axis values (model, concurrency, "
        "--native, ...), merged into one table and a crossover map.\n\n"
        "infer-prof sweep FILE        run a sweep file or a built-in sweep (see `infer-prof sweep list`)\n\n"
        "infer-prof sweep report DIR  the summary and the crossover map of a sweep directory again"
    ),
    no_args_is_help=True,
)
app.add_typer(sweep_app, name="sweep")


@sweep_app.command("run")
def sweep_run(
    file: Annotated[
        str,
        typer.Argument(
            help="A sweep TOML file, or a built-in sweep's name (`infer-prof sweep list`).",
            show_default=False,
        ),
    ],
    out: Annotated[
        Optional[str],
        typer.Option(
            "--out",
            "-o",
            help="Sweep directory (default runs/sweep-<timestamp>-<name>); needed with --resume.",
        ),
    ] = None,
    resume: Annotated[
        bool,
        typer.Option("--resume", help="Finish the sweep in --out: finished runs are kept, the rest run."),
    ] = False,
    ray: Annotated[
        Optional[str],
        typer.Option(
            "--ray",
            help="Run cells as Ray tasks: auto (the cluster this machine is in), local (start one here) or a cluster ADDRESS. Needs pip install -e '.[ray]'.",
        ),
    ] = None,
    cell_cpus: Annotated[
        int,
        typer.Option(
            "--cell-cpus",
            help="With --ray: CPUs each cell reserves (and its torch threads, unless the sweep sets threads).",
        ),
    ] = 1,
    cell_gpus: Annotated[
        float, typer.Option("--cell-gpus", help="With --ray: GPUs each cell reserves.")
    ] = 0.0,
    report: Annotated[
        bool, typer.Option("--report/--no-report", help="Write sweep.html and sweep.pdf (the crossover map).")
    ] = True,
) -> None:
    """Run every cell of a sweep (repeats interleaved) into its own run directory; then the table and map."""
    raise typer.Exit(
        sweep_command(
            file,
            out=output_path(out, "--out"),
            resume=resume,
            ray=ray,
            cell_cpus=cell_cpus,
            cell_gpus=cell_gpus,
            report=report,
        )
    )


@sweep_app.command("report")
def sweep_report(
    sweep_dir: Annotated[
        Path, typer.Argument(help="A sweep directory written by `infer-prof sweep`.", show_default=False)
    ],
    x: Annotated[
        Optional[str],
        typer.Option(
            "--x", help="The map's horizontal axis (default: the sweep file's [map] x, else a load axis)."
        ),
    ] = None,
    y: Annotated[
        Optional[str],
        typer.Option(
            "--y", help="The map's vertical axis (default: the sweep file's [map] y, else another axis)."
        ),
    ] = None,
) -> None:
    """Rebuild the merged tables from the run directories; print the summary; rewrite sweep.html and .pdf."""
    from rich.console import Console

    from ..profiler.sweep.run import write_tables
    from ..reports.sweep.analysis import read_crossover
    from ..reports.sweep.report import write_sweep_report
    from ..reports.sweep.terminal import render_sweep_summary

    write_tables(sweep_dir)
    crossover = read_crossover(sweep_dir, x=x, y=y)
    render_sweep_summary(crossover, Console())
    for path in write_sweep_report(crossover, sweep_dir).values():
        typer.echo(str(Path(sweep_dir) / path))


@sweep_app.command("list")
def sweep_list() -> None:
    """The built-in sweeps, each with what it asks."""
    from ..profiler.sweep.spec import builtin_sweeps, load_sweep

    for name in builtin_sweeps():
        spec = load_sweep(name)
        cells = 1
        for values in spec.axes.values():
            cells *= len(values)
        typer.echo(f"{name:18} {cells} cells x {spec.repeats} repeats  {spec.description}")


def sweep_command(
    file: str,
    *,
    out: Path | None,
    resume: bool,
    ray: str | None,
    cell_cpus: int,
    cell_gpus: float,
    report: bool,
) -> int:
    from rich.console import Console

    from ..errors import OptionError
    from ..profiler.rundir.outdir import check_output_dir
    from ..profiler.rundir.sweepdir import is_sweep_dir
    from ..profiler.sweep.run import RayTarget, prepare_cells, run_sweep
    from ..profiler.sweep.spec import load_sweep
    from ..profiler.sweep.state import check_sweep_dir
    from .progress import stop_on_signals
    from .sweep_progress import sweep_progress

    console = Console(stderr=True)
    spec = load_sweep(file)
    if resume and out is None:
        raise OptionError("--resume needs --out DIR: the sweep directory to finish")
    if resume and out is not None and not is_sweep_dir(out):
        raise OptionError(
            f"--resume: {out} holds no sweep to resume; run without --resume to start one there"
        )
    if ray is None and (cell_cpus != 1 or cell_gpus != 0):
        raise OptionError("--cell-cpus and --cell-gpus size Ray tasks: give them with --ray")
    target = RayTarget(ray, cell_cpus, cell_gpus) if ray is not None else None
    if target is not None:
        from ..profiler.sweep.ray_cells import try_cluster

        try_cluster(target.address)  # a cluster address where nothing listens: refused in seconds, first
    cells = prepare_cells(spec)  # every cell checked before the directory is touched
    out_dir = out or Path("runs") / f"sweep-{_dt.datetime.now().strftime('%Y%m%d-%H%M%S')}-{spec.name}"
    check_output_dir(out_dir)
    check_sweep_dir(
        spec, cells, out_dir, resume=resume
    )  # a damaged or another sweep's directory: before any line
    console.print(f"sweep [bold]{spec.name}[/bold]: {spec.description}")
    with stop_on_signals(console) as stop, sweep_progress(console, ray=target is not None) as hooks:
        outcome = run_sweep(spec, out_dir, resume=resume, ray=target, hooks=hooks, stop_event=stop.event)
    _finish(outcome, file, report, console)
    if outcome.interrupted:
        return stop.exit_code or INTERRUPTED_EXIT_CODE
    return 0


def _finish(outcome: SweepOutcome, file: str, report: bool, console: Console) -> None:
    from rich.console import Console

    from ..reports.sweep.analysis import read_crossover
    from ..reports.sweep.report import write_sweep_report
    from ..reports.sweep.terminal import render_sweep_summary

    crossover = read_crossover(outcome.path)
    render_sweep_summary(crossover, Console())
    if report:
        with console.status("writing the crossover map"):
            files = write_sweep_report(crossover, outcome.path)
        console.print("reports: " + ", ".join(str(outcome.path / name) for name in files.values()))
    console.print(
        f"sweep directory: [bold]{outcome.path}[/bold] ({outcome.runs_finished} of {outcome.runs_total} "
        f"runs finished, {outcome.runs_this_time} this time)"
    )
    if not outcome.complete:
        console.print(f"[yellow]to finish it: infer-prof sweep {file} --out {outcome.path} --resume[/yellow]")
