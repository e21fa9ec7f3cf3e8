"""False alarms and detections of a 5% baseline budget (budgets/noise.toml) on this machine, same config vs a 20% slower sampler.

Run: python benchmarks/bench_budget_noise.py [--tries 10] [--slow-tries 3] [--budget budgets/noise.toml]
What it measures: per try, one baseline run and one candidate run of the budget's configuration,
in ABBA order across tries (B C, C B, B C, ...) after one discarded warm-up run, checked with
check_budget(budget, [candidate], [baseline]); a same-config try that fails is a false alarm. Then
--slow-tries tries whose candidate runs with injections={"slow_sampler": 1.2} (the Python sampler's
step takes 1.2x as long); one that fails is a detection. Prints each assertion's ratio, the
evidence (bootstrap interval, p-value or threshold only) and verdict, then the totals.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from infer_prof.profiler.budget.check import BudgetReport, check_budget
from infer_prof.profiler.budget.spec import BudgetFile, load_budget
from infer_prof.profiler.checks.injections import Injections
from infer_prof.profiler.session.options import EngineOptions
from infer_prof.profiler.session.runner import ModelCache, run_once

ROOT = Path(__file__).resolve().parents[1]
SLOW_SAMPLER: Injections = {"slow_sampler": 1.2}


class Runner:
    """Runs the budget's configuration into numbered run dirs, loading the model once."""

    def __init__(self, budget: BudgetFile, out_root: Path) -> None:
        self.budget = budget
        self.out_root = out_root
        self.models = ModelCache()
        self.options = EngineOptions(
            model=budget.model or "synthetic:tiny", seed=budget.seed or 0, device="cpu"
        )
        self.count = 0
        self.seconds: list[float] = []

    def run(self, label: str, injections: Injections | None = None) -> Path:
        self.count += 1
        started = time.perf_counter()
        path = run_once(
            self.options,
            self.budget.scenario or "concurrency-30",
            self.out_root / f"{self.count:03d}-{label}",
            requests=self.budget.requests,
            seed=self.budget.seed,
            models=self.models,
            injections=injections,
        )
        self.seconds.append(time.perf_counter() - started)
        return path


def run_try(runner: Runner, index: int, injections: Injections | None) -> BudgetReport:
    """One baseline and one candidate run, baseline first on even tries (ABBA), checked against the budget."""
    if index % 2 == 0:
        baseline = runner.run("baseline")
        candidate = runner.run("candidate", injections)
    else:
        candidate = runner.run("candidate", injections)
        baseline = runner.run("baseline")
    return check_budget(runner.budget, [candidate], [baseline])


def describe(report: BudgetReport) -> str:
    parts = []
    for result in report.results:
        if result.interval is not None:
            evidence = f"CI [{result.interval[0]:.3f}, {result.interval[1]:.3f}]"
        elif result.p_value is not None:
            evidence = f"p={result.p_value:.3g}"
        else:
            evidence = result.test or "within threshold"
        ratio = f"{result.ratio:.3f}" if result.ratio is not None else "n/a"
        parts.append(f"{result.name}: {ratio} ({evidence}) {result.status}")
    return "; ".join(parts)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tries", type=int, default=10, help="same-config baseline/candidate pairs")
    parser.add_argument(
        "--slow-tries", type=int, default=3, help="pairs whose candidate has slow_sampler=1.2"
    )
    parser.add_argument("--budget", type=Path, default=ROOT / "budgets" / "noise.toml")
    args = parser.parse_args()

    budget = load_budget(args.budget)
    print(
        f"budget {budget.name}: {budget.scenario} on {budget.model}, {budget.requests} requests, alpha {budget.alpha:g}"
    )
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-budget-noise-") as tmp:
        runner = Runner(budget, Path(tmp))
        # The first run of a process is ~10% slower (torch and interpreter warm-up): it must not be a baseline.
        runner.run("warmup")
        runner.seconds.clear()
        false_alarms = 0
        for index in range(args.tries):
            report = run_try(runner, index, None)
            false_alarms += report.exit_code != 0
            print(
                f"same   {index + 1:2d}: {describe(report)} -> {'FALSE ALARM' if report.exit_code else 'ok'}",
                flush=True,
            )
        detected = 0
        for index in range(args.slow_tries):
            report = run_try(runner, index, SLOW_SAMPLER)
            detected += report.exit_code != 0
            print(
                f"slow   {index + 1:2d}: {describe(report)} -> {'detected' if report.exit_code else 'MISSED'}",
                flush=True,
            )
        per_run = sum(runner.seconds) / len(runner.seconds)
    print(f"false alarms: {false_alarms}/{args.tries}; detected slowdowns: {detected}/{args.slow_tries}")
    print(f"{per_run:.2f} s per run, {time.perf_counter() - started:.0f} s in all")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
