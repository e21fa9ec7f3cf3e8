"""`infer-prof compare`: before/after a rewrite, from two run directories or from interleaved repeats."""

from __future__ import annotations

import datetime as _dt
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from ..errors import OptionError
from ..profiler.session.options import EngineOptions
from .app import app
from .options import dim_printer, engine_options, output_path

if TYPE_CHECKING:  # the CLI's help and usage errors load none of these (tests/cli/test_imports.py)
    from rich.console import Console


@app.command()
@engine_options(without=("native",))
def compare(
    before: Annotated[
        Optional[list[Path]],
        typer.Argument(
            help="BEFORE and AFTER run directories, or two sweep directories (omit with --repeat).",
            show_default=False,
        ),
    ] = None,
    repeat: Annotated[
        Optional[int],
        typer.Option(
            "--repeat",
            help="Run both configurations N times each, interleaved (A B B A ...), instead of reading run directories.",
        ),
    ] = None,
    before_native: Annotated[
        str, typer.Option("--before-native", help="With --repeat: the BEFORE configuration's --native.")
    ] = "none",
    after_native: Annotated[
        str, typer.Option("--after-native", help="With --repeat: the AFTER configuration's --native.")
    ] = "all",
    scenario: Annotated[
        str, typer.Option("--scenario", "-s", help="With --repeat: the scenario both configurations run.")
    ] = "chat",
    requests: Annotated[
        Optional[int],
        typer.Option("--requests", "-r", help="With --repeat: override the scenario's request count."),
    ] = None,
    out: Annotated[
        Optional[str],
        typer.Option("--out", "-o", help="Where compare.html, compare.pdf and compare.json go."),
    ] = None,
    drift_guard: Annotated[
        bool,
        typer.Option(
            "--drift-guard/--no-drift-guard",
            help="Call the comparison void when the model span's time per token moved (the machine changed). Turn it off when the change itself touches the model.",
        ),
    ] = True,
    allow_unlike: Annotated[
        bool,
        typer.Option(
            "--allow-unlike",
            help="Compare runs of different scenarios, models, request counts or targets anyway (refused otherwise); the comparison says so first.",
        ),
    ] = False,
    *,
    options: EngineOptions,
) -> None:
    """Before/after comparison: per metric the ratio, its confidence interval and a verdict; of two sweeps, the
    map of the difference cell by cell."""
    raise typer.Exit(
        compare_command(
            before or [],
            repeat=repeat,
            options=options,
            before_native=before_native,
            after_native=after_native,
            scenario=scenario,
            requests=requests,
            out=output_path(out, "--out"),
            drift_guard=drift_guard,
            allow_unlike=allow_unlike,
        )
    )


def compare_command(
    dirs: list[Path],
    *,
    repeat: int | None,
    options: EngineOptions,
    before_native: str,
    after_native: str,
    scenario: str,
    requests: int | None,
    out: Path | None,
    drift_guard: bool = True,
    allow_unlike: bool = False,
) -> int:
    from rich.console import Console

    from ..profiler.rundir.outdir import check_output_dir
    from ..profiler.rundir.sweepdir import is_sweep_dir
    from ..reports.compare.analysis import compare_runs
    from ..reports.compare.report import write_comparison_report
    from ..reports.compare.terminal import render_comparison

    console = Console(stderr=True)
    out_dir = (
        out if out is not None else Path("runs") / f"compare-{_dt.datetime.now().strftime('%Y%m%d-%H%M%S')}"
    )
    check_output_dir(out_dir)
    if (out_dir / "result.json").exists():
        raise OptionError(f"--out {out_dir} holds a run: write the comparison somewhere else")
    if repeat is None and len(dirs) == 2 and any(is_sweep_dir(path) for path in dirs):
        return _compare_sweeps(dirs, out_dir, console)
    if repeat is None:
        if len(dirs) != 2:
            raise OptionError(
                "compare needs BEFORE and AFTER run directories, or --repeat N to run both configurations"
            )
        before_dirs, after_dirs = [dirs[0]], [dirs[1]]
    else:
        if dirs:
            raise OptionError("give run directories or --repeat, not both")
        if not 1 <= repeat <= MAX_REPEATS:
            raise OptionError(f"--repeat={repeat} is impossible: use 1 to {MAX_REPEATS}")
        _check_repeat_inputs(scenario, requests, before_native, after_native)
        before_dirs, after_dirs = _run_interleaved(
            options, before_native, after_native, scenario, requests, repeat, out_dir, console
        )
    result = compare_runs(before_dirs, after_dirs, drift_guard=drift_guard, allow_unlike=allow_unlike)
    render_comparison(result, Console())
    files = write_comparison_report(result, out_dir)
    console.print("comparison: " + ", ".join(str(path) for path in files.values()))
    return 0


MAX_REPEATS = 100


def _check_repeat_inputs(scenario: str, requests: int | None, before_native: str, after_native: str) -> None:
    """What --repeat will run, checked before the first of its runs starts."""
    from ..native_paths.loader import require_twins
    from ..native_paths.toggles import parse_native
    from ..scenarios.spec import MAX_REQUESTS, load_scenario

    for option, value in (("--before-native", before_native), ("--after-native", after_native)):
        try:
            require_twins(parse_native(value), f"compare {option} {value}")
        except OptionError as error:
            raise OptionError(str(error).replace("--native", option, 1)) from None
    if requests is not None and not 1 <= requests <= MAX_REQUESTS:
        raise OptionError(f"--requests={requests} is impossible: use 1 to {MAX_REQUESTS:,}")
    load_scenario(scenario).with_overrides(num_requests=requests)


def _compare_sweeps(dirs: list[Path], out_dir: Path, console: Console) -> int:
    """Two sweep directories: cells matched by axis values, after - before against the repeats' noise."""
    from rich.console import Console

    from ..profiler.rundir.sweepdir import is_sweep_dir
    from ..reports.sweep.compare import compare_sweeps
    from ..reports.sweep.compare_report import render_sweep_comparison, write_sweep_comparison

    plain = [str(path) for path in dirs if not is_sweep_dir(path)]
    if plain:
        raise OptionError(f"{plain[0]} is not a sweep directory: compare two sweeps, or two run directories")
    comparison = compare_sweeps(dirs[0], dirs[1])
    render_sweep_comparison(comparison, Console())
    files = write_sweep_comparison(comparison, out_dir)
    console.print("comparison: " + ", ".join(str(out_dir / path) for path in files.values()))
    return 0


def _run_interleaved(
    options: EngineOptions,
    before_native: str,
    after_native: str,
    scenario: str,
    requests: int | None,
    repeat: int,
    out_dir: Path,
    console: Console,
) -> tuple[list[Path], list[Path]]:
    """Both configurations `repeat` times in ABBA order, so slow drift of a shared machine hits both alike."""
    from ..native_paths.toggles import parse_native
    from ..profiler.session.runner import ModelCache, options_with, run_once
    from .progress import session_progress

    sides = {
        "before": options_with(options, native=parse_native(before_native)),
        "after": options_with(options, native=parse_native(after_native)),
    }
    models = ModelCache()
    models.get(options, progress=dim_printer(console))
    dirs: dict[str, list[Path]] = {"before": [], "after": []}
    for index in range(repeat):
        order = ["before", "after"] if index % 2 == 0 else ["after", "before"]
        for side in order:
            run_dir = out_dir / f"{side}-{index + 1}"
            console.print(
                f"[dim]compare: {side} run {index + 1}/{repeat} (native {sorted(sides[side].native) or 'none'})[/dim]"
            )
            with session_progress(console, f"{side} run {index + 1}/{repeat}") as hooks:
                run_once(sides[side], scenario, run_dir, requests=requests, models=models, hooks=hooks)
            dirs[side].append(run_dir)
    return dirs["before"], dirs["after"]
