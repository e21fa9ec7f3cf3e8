"""Real runs against budgets/noise.toml: same-config pairs pass the 5% baseline budget, a 20% slower sampler fails it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from infer_prof.profiler.budget.check import BudgetReport, check_budget
from infer_prof.profiler.budget.spec import load_budget
from infer_prof.profiler.session.options import EngineOptions
from infer_prof.profiler.session.runner import ModelCache, run_once

ROOT = Path(__file__).resolve().parents[3]
BUDGET = load_budget(ROOT / "budgets" / "noise.toml")


def test_noise_budget_loads_with_5_percent_baseline_bounds() -> None:
    bounds = {a.name: (a.min_ratio, a.max_ratio, a.level) for a in BUDGET.assertions}
    assert bounds == {
        "throughput vs baseline": (0.95, None, "error"),
        "sampler share vs baseline": (None, 1.05, "error"),
    }
    assert (BUDGET.scenario, BUDGET.model) == ("concurrency-30", "synthetic:tiny")


@pytest.mark.slow
def test_same_config_repeats_pass_and_a_slower_sampler_fails(tmp_path: Path) -> None:
    """3 runs a side, interleaved (B C C B B C): single pairs false-alarmed about once in 30 tries (a
    same-config sampler-share ratio past 1.05); the median over 3 runs a side keeps CI from flaking."""
    models = ModelCache()
    # The budget's threads (one): at two, the thread governor lowers and raises the count with the machine's load
    # during a run, and the Python sampler's cost (so its share) moved between same-config runs with it; a 1.2x
    # slower sampler then read at or under the 5% threshold in one quiet run of the suite.
    assert BUDGET.threads == 1
    options = EngineOptions(
        model=BUDGET.model or "synthetic:tiny", seed=BUDGET.seed or 0, threads=BUDGET.threads
    )
    counter = iter(range(1000))

    def run(injections: dict[str, Any] | None = None) -> Path:
        assert BUDGET.scenario is not None
        return run_once(
            options,
            BUDGET.scenario,
            tmp_path / f"run-{next(counter)}",
            requests=BUDGET.requests,
            seed=BUDGET.seed,
            models=models,
            injections=injections,
        )

    def sides(injections: dict[str, Any] | None = None) -> BudgetReport:
        baselines, candidates = [], []
        for index in range(BUDGET.repeats):
            if index % 2 == 0:
                baselines.append(run())
                candidates.append(run(injections))
            else:
                candidates.append(run(injections))
                baselines.append(run())
        return check_budget(BUDGET, candidates, baselines)

    run()  # the first run of a process is ~10% slower (warm-up): never a baseline
    report = sides()
    for _ in range(2):
        # A void comparison (the yardstick says the machine itself moved under the runs) is
        # no reading, and the checker fails it on purpose; read again, as its message says. A false
        # alarm on a machine that held still fails at once.
        if not any(r.test == "void" for r in report.failed_errors):
            break
        report = sides()
    assert report.exit_code == 0, [(r.name, r.ratio, r.reason) for r in report.results]
    report = sides({"slow_sampler": 1.2})
    assert report.exit_code == 1
    failed = {r.name: r for r in report.failed_errors}
    assert "sampler share vs baseline" in failed, [(r.name, r.ratio, r.reason) for r in report.results]
    assert failed["sampler share vs baseline"].ratio > 1.05
