"""`infer-prof compare`: before/after a rewrite, from two run directories or from interleaved repeats."""

from __future__ import annotations

import datetime as _dt
from pathlib import Path

from rich.console import Console

from profiler.session.options import EngineOptions, OptionError
from profiler.session.runner import ModelCache, options_with, run_once


def compare_command(
    dirs: list[Path], *, repeat: int | None, options: EngineOptions, before_native: str, after_native: str,
    scenario: str, requests: int | None, out: Path | None,
) -> int:  # fmt: skip
    from native_paths.toggles import parse_native
    from reports import compare_runs, render_comparison, write_comparison_report

    console = Console(stderr=True)
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    if repeat is None:
        if len(dirs) != 2:
            raise OptionError("compare needs BEFORE and AFTER run directories, or --repeat N to run both configurations")
        before_dirs, after_dirs = [dirs[0]], [dirs[1]]
        out_dir = out or Path("runs") / f"compare-{stamp}"
    else:
        if dirs:
            raise OptionError("give run directories or --repeat, not both")
        if repeat < 1:
            raise OptionError(f"--repeat={repeat} must be at least 1")
        out_dir = out or Path("runs") / f"compare-{stamp}"
        before_options = options_with(options, native=parse_native(before_native))
        after_options = options_with(options, native=parse_native(after_native))
        models = ModelCache()
        models.get(options, progress=lambda message: console.print(f"[dim]{message}[/dim]"))
        before_dirs, after_dirs = [], []
        # ABBA interleaving: slow drift of a shared machine hits both configurations alike.
        for index in range(repeat):
            order = [("before", before_options), ("after", after_options)]
            if index % 2 == 1:
                order.reverse()
            for side, side_options in order:
                run_dir = out_dir / f"{side}-{index + 1}"
                console.print(f"[dim]compare: {side} run {index + 1}/{repeat} (native {sorted(side_options.native) or 'none'})[/dim]")
                run_once(side_options, scenario, run_dir, requests=requests, models=models, progress_console=console)
                (before_dirs if side == "before" else after_dirs).append(run_dir)
    result = compare_runs(before_dirs, after_dirs)
    render_comparison(result, Console())
    files = write_comparison_report(result, out_dir)
    console.print("comparison: " + ", ".join(str(path) for path in files.values()))
    return 0
