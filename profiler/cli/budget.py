"""`infer-prof budget check|baseline`: run (or read) runs, check them against a budget file, and report for CI."""

from __future__ import annotations

import datetime as _dt
import itertools
from pathlib import Path
from typing import Any

from rich.console import Console

from profiler.session.options import EngineOptions
from profiler.session.runner import ModelCache, run_once


def make_run_fn(out_root: Path, console: Console):  # type: ignore[no-untyped-def]
    """A run_fn(overrides) -> run dir for profiler.budget.check; models are loaded once per process."""
    from native_paths.toggles import parse_native

    models = ModelCache()
    counter = itertools.count(1)
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")

    def run_fn(overrides: dict[str, Any]) -> Path:
        native = overrides.get("native")
        options = EngineOptions(model=overrides.get("model", "smollm2-135m"), seed=int(overrides.get("seed") or 0),
                                native=parse_native(",".join(native) if native else "none"))  # fmt: skip
        profile = overrides.get("profile", "default")
        out_dir = out_root / f"{stamp}-{next(counter):02d}-{profile}-native-{'+'.join(sorted(options.native)) or 'none'}"
        console.print(f"[dim]budget: running {overrides.get('scenario')} ({profile}, native {sorted(options.native) or 'none'}) -> {out_dir}[/dim]")
        return run_once(options, overrides["scenario"], out_dir, requests=overrides.get("requests"),
                        duration_s=overrides.get("duration_s"), seed=overrides.get("seed"), profile=profile,
                        models=models)  # fmt: skip

    return run_fn


def budget_check_command(
    budget_file: Path, *, runs: list[Path], baselines: list[Path], junit: Path | None, bmf: Path | None, out: Path
) -> int:
    from profiler.budget.check import check_budget, check_budget_with_runner
    from profiler.budget.output import render_budget_report, write_bmf, write_junit
    from profiler.budget.spec import load_budget

    console = Console(stderr=True)
    budget = load_budget(budget_file)
    if runs:
        report = check_budget(budget, runs, baselines or None)
    else:
        report = check_budget_with_runner(budget, make_run_fn(out, console), baseline_runs=baselines or None)
    render_budget_report(report, Console())
    if junit:
        write_junit(report, junit)
    if bmf:
        write_bmf(report, bmf)
    return report.exit_code


def budget_baseline_command(budget_file: Path, *, out: Path) -> int:
    from profiler.budget.check import record_runs
    from profiler.budget.spec import load_budget

    console = Console(stderr=True)
    budget = load_budget(budget_file)
    paths = record_runs(budget, make_run_fn(out, console), overrides=budget.baseline or None)
    for path in paths:
        print(path)
    console.print(f"baseline recorded: pass [bold]--baseline {out}[/bold] to `infer-prof budget check`")
    return 0


