"""Evaluate a budget against recorded runs, with noise-aware (asv-style) comparison to baseline runs."""

from __future__ import annotations

import difflib
import math
import re
import statistics
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..rundir.health import void_reason
from ..rundir.native import refuse_fallback
from ..rundir.results import ResultError, RunData, RunResult, read_result, read_run
from ..rundir.samples import measured_requests, token_gaps_ms
from ..rundir.twins import twins_on
from ..rundir.yardstick import drift_void, yardstick
from ..stats import (
    Statistic,
    bootstrap_ratio,
    mann_whitney_u,
    mean_statistic,
    quantile_statistic,
    rate_statistic,
    smallest_p_value,
)
from .spec import ALIASES, Assertion, BudgetError, BudgetFile, RunOverrides

RunLike = RunResult | str | Path
RunFn = Callable[[RunOverrides], Path]
COUNTING_PROFILE = "counters"  # config.profile of a run recorded in counting mode (never timed)
MIN_BOOTSTRAP_SAMPLES = 8  # fewer per-request/per-step rows than this say nothing about noise
BOOTSTRAP_RESAMPLES = 1000


@dataclass(slots=True)
class AssertionResult:
    """The verdict on one assertion: what was measured, against which bound, and why it passed or not."""

    assertion: Assertion
    passed: bool
    reason: str
    measured: float | None = None
    values: list[float] = field(default_factory=list)  # one per run, before aggregation
    baseline: float | None = None
    ratio: float | None = None  # measured / baseline
    p_value: float | None = None
    interval: tuple[float, float] | None = None  # bootstrap interval of the ratio
    test: str = ""  # "exact", "mann-whitney", "bootstrap", "threshold only" (baseline checks)
    skipped: bool = False  # nothing could be evaluated (only ratio bounds, and no baseline)

    @property
    def name(self) -> str:
        return self.assertion.name

    @property
    def metric(self) -> str:
        return self.assertion.metric

    @property
    def level(self) -> str:
        return self.assertion.level

    @property
    def bound(self) -> str:
        return self.assertion.bound_text()

    @property
    def status(self) -> str:
        """PASS, FAIL (error level), WARN (warn level failed) or SKIP (nothing could be evaluated)."""
        if not self.passed:
            return "FAIL" if self.level == "error" else "WARN"
        return "SKIP" if self.skipped else "PASS"


@dataclass(slots=True)
class BudgetReport:
    """Every assertion's result; exit_code is 1 when an error-level assertion failed, else 0."""

    budget: BudgetFile
    results: list[AssertionResult]
    runs: list[str]
    baseline_runs: list[str]
    elapsed_s: float = 0.0
    benchmark: str = ""  # what was run, e.g. infer-prof/chat/synthetic:tiny (Bencher's benchmark name)

    @property
    def failed_errors(self) -> list[AssertionResult]:
        return [r for r in self.results if not r.passed and r.level == "error"]

    @property
    def failed_warnings(self) -> list[AssertionResult]:
        return [r for r in self.results if not r.passed and r.level == "warn"]

    @property
    def exit_code(self) -> int:
        return 1 if self.failed_errors else 0

    @property
    def passed(self) -> bool:
        return self.exit_code == 0


class _Run:
    """A run as the checker sees it: its result, and its tables loaded only when noise needs them."""

    def __init__(self, run: RunLike) -> None:
        if isinstance(run, RunResult):
            self.result, self.path = run, None
        else:
            self.path = Path(run)
            try:
                self.result = read_result(self.path)
            except ResultError as exc:
                raise BudgetError(str(exc)) from None
        refusal = refuse_fallback(self.result.config or {}, self.label, "a budget check")
        if refusal:
            raise BudgetError(refusal)
        self._data: RunData | None = None

    @property
    def label(self) -> str:
        return str(self.path) if self.path else "<in-memory run>"

    @property
    def is_counting(self) -> bool:
        return (self.result.config or {}).get("profile") == COUNTING_PROFILE

    def data(self) -> RunData | None:
        if self.path is None:
            return None
        if self._data is None:
            self._data = read_run(self.path)
        return self._data


def expand_run_dirs(paths: Sequence[RunLike]) -> list[RunLike]:
    """A run directory stays; a folder of run directories (e.g. from `budget baseline`) becomes its runs."""
    expanded: list[RunLike] = []
    for item in paths:
        path = item if isinstance(item, RunResult) else Path(item)
        if isinstance(path, Path) and path.is_dir() and not (path / "result.json").exists():
            children = sorted(child for child in path.iterdir() if (child / "result.json").exists())
            if not children:
                raise BudgetError(
                    f"{path}: neither a run directory nor a folder of run directories (no result.json)"
                )
            expanded.extend(children)
        else:
            expanded.append(path)
    return expanded


def check_budget(
    budget: BudgetFile,
    runs: Sequence[RunLike],
    baseline_runs: Sequence[RunLike] | None = None,
    *,
    drift_guard: bool = True,
) -> BudgetReport:
    """Evaluate every assertion of `budget` over `runs` (repeats), comparing to `baseline_runs` if given.

    Raises BudgetError when there is no run, or a metric is missing from a run (naming close names).
    """
    started = time.perf_counter()
    if not runs:
        raise BudgetError("no runs to check; pass --run RUN_DIR or let the budget run its scenario")
    candidates = [_Run(run) for run in expand_run_dirs(runs)]
    baselines = [_Run(run) for run in expand_run_dirs(baseline_runs)] if baseline_runs else []
    void = _drift(candidates, baselines) if baselines and drift_guard else None
    results = [
        _evaluate(assertion, candidates, baselines, budget.alpha, void) for assertion in budget.assertions
    ]
    return BudgetReport(
        budget=budget,
        results=results,
        runs=[run.label for run in candidates],
        baseline_runs=[run.label for run in baselines],
        elapsed_s=time.perf_counter() - started,
        benchmark=benchmark_name(candidates[0].result),
    )


def benchmark_name(result: RunResult) -> str:
    """`infer-prof/<scenario>/<model>[/native-<parts>]`: what was run, so trackers compare like with like."""
    config = result.config or {}
    name = f"infer-prof/{config.get('scenario', 'unknown')}/{config.get('model', 'unknown')}"
    native = config.get("native") or []
    return name + (f"/native-{'+'.join(native)}" if native else "")


def load_results(runs: Sequence[RunLike]) -> list[RunResult]:
    """The results of run directories (or folders of them); BudgetError for an unreadable one."""
    return [_Run(run).result for run in expand_run_dirs(list(runs))]


def record_runs(budget: BudgetFile, run_fn: RunFn, *, overrides: RunOverrides | None = None) -> list[Path]:
    """Run what the budget needs once per side: `repeats` timed runs, plus one counting run for counters."""
    config: RunOverrides = {**budget.run_overrides(), **(overrides or {})}
    if "scenario" not in config:
        raise BudgetError('the budget names no scenario to run; add scenario = "..." or pass --run RUN_DIR')
    paths = [run_fn(config.copy()) for _ in range(budget.repeats if budget.needs_timed_runs else 0)]
    if budget.needs_counters:
        paths.append(run_fn({**config, "profile": COUNTING_PROFILE}))
    return paths


def check_budget_with_runner(
    budget: BudgetFile,
    run_fn: RunFn,
    *,
    baseline_runs: Sequence[RunLike] | None = None,
    drift_guard: bool = True,
) -> BudgetReport:
    """Run the budget's scenario through `run_fn(overrides) -> run dir` and check the result.

    With a [baseline] table and no recorded baseline runs, the baseline config is run too, interleaved
    with the candidate in ABBA order (B C C B B C ...) so that slow drift of the machine hits both alike.
    """
    config = budget.run_overrides()
    if "scenario" not in config:
        raise BudgetError('the budget names no scenario to run; add scenario = "..." or pass --run RUN_DIR')
    run_baseline = (
        bool(budget.baseline) and not baseline_runs and any(a.needs_baseline for a in budget.assertions)
    )
    baseline_config: RunOverrides = {**config, **budget.baseline}
    runs: list[RunLike] = []
    baselines: list[RunLike] = list(baseline_runs or [])
    for repeat in range(budget.repeats if budget.needs_timed_runs else 0):
        if not run_baseline:
            runs.append(run_fn(config.copy()))
        elif repeat % 2 == 0:
            baselines.append(run_fn(baseline_config.copy()))
            runs.append(run_fn(config.copy()))
        else:
            runs.append(run_fn(config.copy()))
            baselines.append(run_fn(baseline_config.copy()))
    if budget.needs_counters:
        runs.append(run_fn({**config, "profile": COUNTING_PROFILE}))
        if run_baseline:
            baselines.append(run_fn({**baseline_config, "profile": COUNTING_PROFILE}))
    return check_budget(budget, runs, baselines or None, drift_guard=drift_guard)


# ---------------------------------------------------------------------------------------------
# One assertion
# ---------------------------------------------------------------------------------------------


def _twin_on(assertion: Assertion, runs: list[_Run]) -> str | None:
    """Why a prediction's figure is null: the run had that component's C twin on, so nothing was predicted."""
    for path in assertion.paths:
        parts = path.split(".")
        if parts[:2] != ["verdict", "predictions"] or len(parts) < 3:
            continue
        for run in _runs_for(assertion, runs):
            if parts[2] in twins_on(run.result.config or {}):
                return (
                    f"{run.label} ran the C {parts[2]}: nothing is predicted for a twin that was on; "
                    f"check this budget on a run with the Python {parts[2]}"
                )
    return None


def _distorted(assertion: Assertion, runs: list[_Run], baselines: list[_Run]) -> str | None:
    """Why a timed assertion cannot be read from these runs: one was distorted (a busy machine, a saturated
    engine: profiler.analysis.health); counters come from counting runs, which no contention changes."""
    if assertion.is_counter:
        return None
    chosen = _runs_for(assertion, runs) + (
        _runs_for(assertion, baselines) if assertion.needs_baseline else []
    )
    for run in chosen:
        reason = void_reason(run.result.health)
        if reason:
            return f"void: {run.label}: {reason}; re-run on a quieter machine (or at a rate the engine can serve)"
    return None


def _evaluate(
    assertion: Assertion, runs: list[_Run], baselines: list[_Run], alpha: float, void: str | None = None
) -> AssertionResult:
    distorted = _distorted(assertion, runs, baselines)
    if distorted:
        # Not a pass and not a regression: the run measured its machine's contention, not the engine.
        return AssertionResult(assertion, passed=False, reason=distorted, test="void")
    values = _values(assertion, runs)
    if any(value is None for value in values):
        return AssertionResult(
            assertion,
            passed=False,
            reason=_twin_on(assertion, runs) or "metric is null in a run (nothing was measured)",
        )
    measured = _aggregate([v for v in values if v is not None], assertion.aggregate)
    outcome = AssertionResult(assertion, passed=True, reason="", measured=measured, values=values)  # type: ignore[arg-type]
    reasons: list[str] = []
    if assertion.min is not None and not measured >= assertion.min:
        outcome.passed = False
        reasons.append(f"{format_value(measured)} is below min {assertion.min:g}")
    if assertion.max is not None and not measured <= assertion.max:
        outcome.passed = False
        reasons.append(f"{format_value(measured)} is above max {assertion.max:g}")
    if outcome.passed and (assertion.min is not None or assertion.max is not None):
        reasons.append(f"{format_value(measured)} within {_bound(assertion.min, assertion.max)}")
    if assertion.needs_baseline:
        if not baselines:
            # Skipped as a whole only when no absolute bound was checked either.
            outcome.skipped = assertion.min is None and assertion.max is None
            reasons.append("ratio bound not checked: no baseline run given (--baseline)")
        else:
            reasons.append(_compare_to_baseline(assertion, outcome, runs, baselines, alpha, void))
    outcome.reason = "; ".join(reasons)
    return outcome


def _compare_to_baseline(
    assertion: Assertion,
    outcome: AssertionResult,
    runs: list[_Run],
    baselines: list[_Run],
    alpha: float,
    void: str | None = None,
) -> str:
    base_values = _values(assertion, baselines)
    if any(value is None for value in base_values):
        outcome.passed = False
        return "metric is null in a baseline run"
    outcome.baseline = baseline = _aggregate(base_values, assertion.aggregate)  # type: ignore[arg-type]
    measured = outcome.measured
    assert measured is not None
    outcome.ratio = ratio = _ratio(measured, baseline)
    if assertion.min_ratio is not None and ratio < assertion.min_ratio:
        direction, beyond = "less", f"{format_value(ratio)}x baseline is below {assertion.min_ratio:g}x"
    elif assertion.max_ratio is not None and ratio > assertion.max_ratio:
        direction, beyond = "greater", f"{format_value(ratio)}x baseline is above {assertion.max_ratio:g}x"
    else:
        return f"{format_value(ratio)}x baseline ({format_value(baseline)}) within {_bound(assertion.min_ratio, assertion.max_ratio, 'x')}"
    if assertion.is_counter:
        # Counters are deterministic: any change beyond the bound is real.
        outcome.test = "exact"
        outcome.passed = False
        return f"{beyond} (counter, exact)"
    if void:
        # The machine moved under the runs, or the change slowed the model itself (then pass
        # --no-drift-guard): no regression can be read from them, and none may pass unread either.
        outcome.passed = False
        outcome.test = "void"
        return f"{beyond}, but the comparison is {void} (or pass --no-drift-guard if the change touches the model)"
    significant, evidence = _significant(assertion, direction, outcome, runs, baselines, alpha)
    if significant:
        outcome.passed = False
        return f"{beyond}, significant ({evidence})"
    return f"{beyond} but within noise ({evidence}); not counted as a regression"


def _drift(runs: list[_Run], baselines: list[_Run]) -> str | None:
    """drift_void over the timed runs' yardsticks (counting runs and in-memory results have none)."""

    def figures(side: list[_Run]) -> list[float]:
        found = [yardstick(data) for run in side if not run.is_counting and (data := run.data()) is not None]
        return [figure.value for figure in found if figure is not None]

    return drift_void(figures(baselines), figures(runs))


def _significant(
    assertion: Assertion,
    direction: str,
    outcome: AssertionResult,
    runs: list[_Run],
    baselines: list[_Run],
    alpha: float,
) -> tuple[bool, str]:
    """Is the candidate really `direction` (less/greater) than the baseline, beyond noise?"""
    base_values = _values(assertion, baselines)
    n1, n2 = len(outcome.values), len(base_values)
    if smallest_p_value(n1, n2, alternative=direction) < alpha:  # type: ignore[arg-type]
        outcome.test = "mann-whitney"
        outcome.p_value = p = mann_whitney_u(outcome.values, base_values, alternative=direction).p_value  # type: ignore[arg-type]
        return p < alpha, f"Mann-Whitney over {n1} vs {n2} runs, one-sided p={p:.3g}, alpha={alpha:g}"
    candidate = None if assertion.is_ratio else _samples(assertion.paths[0], runs)
    reference = None if assertion.is_ratio else _samples(assertion.paths[0], baselines)
    if candidate is not None and reference is not None:
        outcome.test = "bootstrap"
        seed = zlib.crc32(assertion.name.encode())  # the same check gives the same answer twice
        # Both sides are resampled in blocks of one length: the larger (the more cautious) of the two.
        interval = bootstrap_ratio(
            candidate.rows,
            reference.rows,
            candidate.statistic,
            confidence=1 - 2 * alpha,
            resamples=BOOTSTRAP_RESAMPLES,
            seed=seed,
            block=max(candidate.block, reference.block),
        )
        outcome.interval = (interval.low, interval.high)
        significant = interval.high < 1.0 if direction == "less" else interval.low > 1.0
        return significant, (
            f"block-bootstrap {100 * (1 - 2 * alpha):g}% interval of the ratio over {len(candidate.rows)} vs "
            f"{len(reference.rows)} {candidate.unit}: [{interval.low:.3f}, {interval.high:.3f}]"
        )
    # asv's rule: when the data cannot show noise, trust the threshold.
    outcome.test = "threshold only"
    return True, f"{n1} vs {n2} runs and no per-request/per-step samples to measure noise; add repeats"


# ---------------------------------------------------------------------------------------------
# Values and samples
# ---------------------------------------------------------------------------------------------


def _values(assertion: Assertion, runs: list[_Run]) -> list[float | None]:
    chosen = _runs_for(assertion, runs)
    values: list[float | None] = []
    for run in chosen:
        parts = [_lookup(run, path, assertion) for path in assertion.paths]
        if any(part is None for part in parts):
            values.append(None)
        elif assertion.is_ratio:
            values.append(_ratio(parts[0], parts[1]))  # type: ignore[arg-type]
        else:
            values.append(parts[0])
    return values


def _runs_for(assertion: Assertion, runs: list[_Run]) -> list[_Run]:
    """Counters come from counting runs when there are any; timings never do (counting slows a run)."""
    counting = [run for run in runs if run.is_counting]
    if assertion.is_counter:
        return counting or runs
    timed = [run for run in runs if not run.is_counting]
    return timed or runs


def _lookup(run: _Run, path: str, assertion: Assertion) -> float | None:
    try:
        value = run.result.get(path)
    except KeyError:
        raise BudgetError(_missing_message(run, path, assertion)) from None
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BudgetError(
            f"budget {assertion.name!r}: {path} in {run.label} is {type(value).__name__}, not a number; "
            f"point the metric at a number inside it{_suggest(path, _leaf_paths(run.result.to_dict()))}"
        )
    return float(value)


def _missing_message(run: _Run, path: str, assertion: Assertion) -> str:
    shown = assertion.metric if assertion.metric == path else f"{assertion.metric} (= {path})"
    hint = _suggest(path, _leaf_paths(run.result.to_dict()) + list(ALIASES))
    collectors = run.result.collectors or {}
    not_ok = [
        name for name, info in collectors.items() if isinstance(info, dict) and info.get("status") != "ok"
    ]
    extra = f"; collectors not ok in that run: {', '.join(not_ok)}" if not_ok else ""
    if path.startswith("counters.") and not run.result.counters:
        extra += "; this run has no counters (record one in counting mode)"
    return f"budget {assertion.name!r}: metric {shown} is not in {run.label}{hint}{extra}"


def _suggest(path: str, candidates: list[str]) -> str:
    close = difflib.get_close_matches(path, candidates, n=3, cutoff=0.6)
    return f"; did you mean {', '.join(close)}?" if close else ""


def _leaf_paths(node: Any, prefix: str = "") -> list[str]:
    if isinstance(node, dict):
        paths: list[str] = []
        for key, value in node.items():
            paths.extend(_leaf_paths(value, f"{prefix}{key}."))
        return paths
    return [prefix[:-1]] if isinstance(node, (int, float)) and not isinstance(node, bool) else []


_LATENCY_PATH = re.compile(r"metrics\.(ttft_ms|tpot_ms|e2e_ms|queue_ms|itl_ms)\.(mean|p50|p90|p99)")
MAX_BOOTSTRAP_ROWS = 4096  # longer samples are thinned by a stride in time order (keeps it fast)


@dataclass(slots=True)
class _Samples:
    rows: np.ndarray  # in time order; 2-D when a statistic needs paired columns
    statistic: Statistic
    unit: str
    block: int  # neighbours that are not independent evidence (see _samples)


def _samples(path: str, runs: list[_Run]) -> _Samples | None:
    """Per-request, per-token or per-step rows behind a metric, pooled over runs, in time order.

    Rows close in time are not independent: requests in flight together share every step, and the
    tokens of one step share its duration. The bootstrap therefore resamples blocks: for requests
    as many as are in flight on average (the mean concurrency), for token gaps and steps the rows of
    sqrt(steps) consecutive steps. Throughputs use the steps table (generated tokens / step time),
    because a rate has no per-request sample; that tracks engine speed, what a regression is about.
    """
    datas = [run.data() for run in _runs_for_samples(runs)]
    if not datas or any(data is None for data in datas):
        return None
    latency = _LATENCY_PATH.fullmatch(path)
    parts: list[np.ndarray] = []
    blocks: list[float] = []
    if latency:
        column, stat = latency.groups()
        statistic = mean_statistic if stat == "mean" else quantile_statistic(int(stat[1:]) / 100)
        unit = "token gaps" if column == "itl_ms" else "requests"
        for data in datas:
            requests = measured_requests(data.requests, by_arrival=True)  # type: ignore[union-attr]
            if column == "itl_ms":
                values = token_gaps_ms(requests, in_time_order=True)
                blocks.append(len(values) / math.sqrt(max(1, len(data.steps))))  # type: ignore[union-attr]
            else:
                values = requests[column].to_numpy(float) if column in requests.columns else np.empty(0)
                values = values[np.isfinite(values)]
                blocks.append(_mean_concurrency(requests))
            parts.append(values)
    elif path in ("metrics.output_token_throughput", "metrics.total_token_throughput"):
        statistic, unit = rate_statistic, "steps"
        for data in datas:
            steps = data.steps  # type: ignore[union-attr]
            if steps.empty or any(
                name not in steps.columns for name in ("decode_tokens", "prefill_tokens", "duration_ms")
            ):
                return None
            tokens = steps["decode_tokens"].to_numpy(float)
            if path == "metrics.total_token_throughput":
                tokens = tokens + steps["prefill_tokens"].to_numpy(float)
            rows = np.column_stack([tokens, steps["duration_ms"].to_numpy(float)])
            parts.append(rows[np.isfinite(rows).all(axis=1)])
            blocks.append(math.sqrt(len(rows)))
    else:
        return None
    rows = np.concatenate(parts) if parts else np.empty(0)
    if len(rows) < MIN_BOOTSTRAP_SAMPLES:
        return None
    block = max(math.sqrt(len(rows)), float(np.mean(blocks)) if blocks else 1.0)
    stride = -(-len(rows) // MAX_BOOTSTRAP_ROWS)
    rows, block = rows[::stride], block / stride
    # At least three blocks, or the interval says nothing.
    return _Samples(rows, statistic, unit, int(max(1, min(round(block), len(rows) // 3))))


def _runs_for_samples(runs: list[_Run]) -> list[_Run]:
    timed = [run for run in runs if not run.is_counting]
    return timed or runs


def _mean_concurrency(requests: Any) -> float:
    """Requests in flight on average: sum of their lifetimes over the span they cover."""
    if requests.empty or not {"arrival_ns", "finish_ns"} <= set(requests.columns):
        return 1.0
    arrival = requests["arrival_ns"].to_numpy(float)
    finish = requests["finish_ns"].to_numpy(float)
    span = np.nanmax(finish) - np.nanmin(arrival)
    if not np.isfinite(span) or span <= 0:
        return 1.0
    return float(np.nansum(finish - arrival) / span)


def _aggregate(values: list[float], how: str) -> float:
    if how == "median":
        return float(statistics.median(values))
    if how == "mean":
        return float(statistics.fmean(values))
    return float(min(values) if how == "min" else max(values))


def _ratio(numerator: float, denominator: float) -> float:
    if denominator == 0:
        return 1.0 if numerator == 0 else math.copysign(math.inf, numerator)
    return numerator / denominator


def _bound(low: float | None, high: float | None, unit: str = "") -> str:
    """`>= low and <= high` for the bounds that are set, e.g. `>= 0.9x`."""
    parts = [f"{sign} {value:g}{unit}" for sign, value in ((">=", low), ("<=", high)) if value is not None]
    return " and ".join(parts)


def format_value(value: float) -> str:
    """Four significant digits, scientific notation for very large or small values."""
    if not math.isfinite(value):
        return str(value)
    if value != 0 and (abs(value) >= 1e6 or abs(value) < 1e-3):
        return f"{value:.3e}"
    return f"{value:.4g}"
