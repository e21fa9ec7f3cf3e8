"""Compares runs before and after a change: per metric, the ratio after/before, its interval and a verdict.

One run per side: each run's own samples are resampled (seeded bootstrap): throughput from equal
time windows of completions and output tokens, latency percentiles from per-request (ITL:
per-token) samples, phase shares from contiguous blocks of steps. Several runs per side (repeats):
each run contributes one value per metric; the interval resamples runs and a Mann-Whitney U test
gives the p-value. A change is called only when the interval excludes 1 (and, with repeats,
p < 1 - confidence) and the ratio moves by at least `min_effect`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal, TypedDict, cast

import numpy as np

from ...errors import CompareError
from ...profiler.rundir.health import void_reason
from ...profiler.rundir.native import refuse_fallback
from ...profiler.rundir.results import CATEGORIES, COMPONENTS, RunData, read_run
from ...profiler.rundir.yardstick import drift_void
from ...profiler.stats import (
    Interval,
    bootstrap_ratio,
    mann_whitney_u,
    mean_statistic,
    quantile_statistic,
)
from ..rundata import phase_columns
from . import samples
from .drift import YardstickDrift, drift_note, yardstick_section

FASTER, SLOWER, NO_CHANGE = "faster", "slower", "no significant change"
HIGHER, LOWER, NOT_COMPARABLE = "higher", "lower", "not comparable"
VOID = "void"  # the yardstick moved: the machine changed, so no metric's change can be read


@dataclass(frozen=True)
class MetricSpec:
    name: str
    label: str
    unit: str
    better: str | None  # "higher", "lower", or None for shares (a share moving is not good or bad)


THROUGHPUT_METRICS = (
    MetricSpec("request_throughput", "request throughput", "req/s", "higher"),
    MetricSpec("output_token_throughput", "output token throughput", "tok/s", "higher"),
    MetricSpec("goodput", "goodput", "req/s", "higher"),
)
LATENCY_METRICS = tuple(
    MetricSpec(f"{name}.{stat}", f"{label} {stat}", "ms", "lower")
    for name, label in (("ttft_ms", "TTFT"), ("tpot_ms", "TPOT"), ("itl_ms", "ITL"), ("e2e_ms", "E2E"))
    for stat in ("p50", "p99")
)
# A GPU run's device timeline (result.json's gpu_time): one value per run, so compared over repeats only.
GPU_METRICS = (
    MetricSpec("gpu_time.idle_host_share", "GPU idle waiting for the host", "%", "lower"),
    MetricSpec("gpu_time.launches_per_step", "GPU launches per step", "/step", "lower"),
)


@dataclass
class MetricComparison:
    """One metric before and after: values, ratio after/before with its interval, and the verdict."""

    name: str
    label: str
    unit: str
    better: str | None
    before: float | None
    after: float | None
    ratio: float | None
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    verdict: str
    method: str
    why: str | None = (
        None  # why there is no ratio (not comparable), in words a reader sees instead of a number
    )


class MetricComparisonDict(TypedDict):
    """A MetricComparison as compare.json writes it."""

    name: str
    label: str
    unit: str
    better: str | None
    before: float | None
    after: float | None
    ratio: float | None
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    verdict: str
    method: str
    why: str | None


class ComparisonDict(TypedDict):
    """compare.json: a ComparisonResult's fields, in their order."""

    before: list[str]
    after: list[str]
    mode: str
    confidence: float
    min_effect: float
    seed: int
    metrics: list[MetricComparisonDict]
    time_split_shift: dict[str, dict[str, float]]
    time_split_method: str | None
    notes: list[str]
    yardstick: YardstickDrift
    void: str | None
    unlike: str | None


@dataclass
class ComparisonResult:
    before: list[str]
    after: list[str]
    mode: str  # "samples" (one run per side) or "repeats" (several runs per side)
    confidence: float
    min_effect: float
    seed: int
    metrics: list[MetricComparison]
    # Percentage points after - before of the spans' time split, {"components": {...}, "categories": {...}}.
    time_split_shift: dict[str, dict[str, float]] = field(default_factory=dict)
    time_split_method: str | None = (
        None  # "spans", else "samples" (runs against another engine have no spans)
    )
    notes: list[str] = field(default_factory=list)
    # Each run's yardstick in run order (reports.compare.drift.yardstick_section); {} when unknown.
    yardstick: YardstickDrift = field(default_factory=lambda: YardstickDrift())
    void: str | None = None  # why the comparison is void (profiler.rundir.yardstick.drift_void), or None
    unlike: str | None = None  # what differs between runs compared anyway (--allow-unlike), or None

    def metric(self, name: str) -> MetricComparison:
        for metric in self.metrics:
            if metric.name == name:
                return metric
        raise KeyError(f"no metric {name!r}; have {', '.join(m.name for m in self.metrics)}")

    def to_dict(self) -> ComparisonDict:
        # asdict copies the fields into plain dicts and lists but is typed dict[str, Any]: ComparisonDict names
        # the same fields (tests/reports/compare checks that they stay alike).
        return cast(ComparisonDict, asdict(self))


MIN_REPEATS = 4  # runs a side before per-run statistics are used


def compare_runs(
    before_dirs: list[Path],
    after_dirs: list[Path],
    *,
    confidence: float = 0.95,
    n_boot: int = 2000,
    seed: int = 0,
    min_effect: float = 0.02,
    drift_guard: bool = True,
    allow_unlike: bool = False,
) -> ComparisonResult:
    """Compare the runs in `before_dirs` with those in `after_dirs` (see the module docstring).

    drift_guard: declare the comparison void when the yardstick (profiler.rundir.yardstick) moved;
    pass False when the change itself touches the model (then its time per token is no yardstick).
    allow_unlike: compare runs of different scenarios, models, request counts or targets (CompareError
    otherwise); the result then says so first. A run whose health is void (a busy machine, a saturated
    engine) voids the comparison."""
    before, after, unlike = _read_comparable(before_dirs, after_dirs, allow_unlike=allow_unlike)
    # Mann-Whitney over per-run values needs 4+ runs a side to reach p < 0.05; with fewer, the runs'
    # own samples are pooled and bootstrapped in blocks, which can give a verdict (with the caveat noted).
    repeats = len(before) >= MIN_REPEATS and len(after) >= MIN_REPEATS
    settings = _Settings(confidence, n_boot, seed, min_effect)
    metrics = (
        _compare_repeats(before, after, settings) if repeats else _compare_samples(before, after, settings)
    )
    notes = _method_notes(len(before), len(after), repeats=repeats)
    yardstick = yardstick_section(before, after)
    if drift_note(yardstick):
        notes.append(str(drift_note(yardstick)))
    void = _void_reason([*before_dirs, *after_dirs], [*before, *after], yardstick if drift_guard else None)
    if void:
        # A drift guard: a significant-looking change on a machine that changed under the runs is not a result.
        notes.insert(0, void)
        for metric in metrics:
            if metric.verdict != NOT_COMPARABLE:
                metric.verdict = VOID
    shift, shift_method = _time_split_shift(before, after)
    if unlike:
        notes.insert(
            0, f"Unlike runs compared on purpose (--allow-unlike): {unlike}; differences include theirs."
        )
    return ComparisonResult(
        before=[str(path) for path in before_dirs],
        after=[str(path) for path in after_dirs],
        mode="repeats" if repeats else "samples",
        confidence=confidence,
        min_effect=min_effect,
        seed=seed,
        metrics=metrics,
        time_split_shift=shift,
        time_split_method=shift_method,
        notes=notes,
        yardstick=yardstick,
        void=void,
        unlike=unlike,
    )


def _read_comparable(
    before_dirs: list[Path], after_dirs: list[Path], *, allow_unlike: bool
) -> tuple[list[RunData], list[RunData], str | None]:
    """Both sides' runs, and how they are unlike (None when alike); CompareError for an empty side, a run whose
    C twin fell back to Python, or unlike runs not allowed."""
    if not before_dirs or not after_dirs:
        raise CompareError("compare needs at least one run directory before and one after")
    before = [read_run(path) for path in before_dirs]
    after = [read_run(path) for path in after_dirs]
    for path, run in zip([*before_dirs, *after_dirs], [*before, *after]):
        refusal = refuse_fallback(run.result.config or {}, str(path), "a comparison")
        if refusal:
            raise CompareError(refusal)
    unlike = unlike_runs([*before, *after])
    if unlike and not allow_unlike:
        raise CompareError(
            f"these runs are unlike ({unlike}): compare runs of one scenario, model, request count "
            "and target, or pass --allow-unlike to compare them anyway"
        )
    return before, after, unlike


def _method_notes(before: int, after: int, *, repeats: bool) -> list[str]:
    """The notes that say how the runs were compared, and what a few runs cannot show."""
    if repeats:
        return [f"{before} vs {after} runs: per-run values, bootstrap over runs, Mann-Whitney U."]
    return [
        f"{before} vs {after} run(s): each side's samples pooled, bootstrap over blocks of them, "
        f"seeded (per-run Mann-Whitney U needs {MIN_REPEATS}+ runs a side).",
        "A single run per side shows within-run noise only; run-to-run variation is invisible. "
        "Repeat runs (several directories a side) before trusting a small change.",
        "p99 from a few hundred samples rests on a handful of requests: read its interval as optimistic.",
    ]


def _void_reason(dirs: list[Path], runs: list[RunData], yardstick: YardstickDrift | None) -> str | None:
    """Why the comparison is void: the first run whose health is void, else the yardstick's drift between the
    sides (yardstick None: the drift guard is off); None when it stands."""
    distorted = next(
        (
            f"void: {path}: {reason}"
            for path, run in zip(dirs, runs)
            if (reason := void_reason(run.result.health))
        ),
        None,
    )
    drifted = (
        drift_void(
            [entry["value"] for entry in yardstick["runs"] if entry["side"] == "before"],
            [entry["value"] for entry in yardstick["runs"] if entry["side"] == "after"],
        )
        if yardstick
        else None
    )
    return distorted or drifted


# What makes two runs a like-for-like comparison: the load and what served it. --native is what compare is for.
LIKE_KEYS = (("scenario", "scenario"), ("model", "model"), ("requests", "requests"))


def unlike_runs(runs: list[RunData]) -> str | None:
    """What differs between the runs among scenario, model, request count and target ("scenario chat vs
    concurrency-30; ..."), or None when they are alike."""
    differences = []
    for key, label in LIKE_KEYS:
        values = list(dict.fromkeys(str((run.result.config or {}).get(key)) for run in runs))
        if len(values) > 1:
            differences.append(f"{label} {' vs '.join(values)}")
    targets = list(dict.fromkeys(str((run.result.target or {}).get("url") or "in-process") for run in runs))
    if len(targets) > 1:
        differences.append(f"target {' vs '.join(targets)}")
    return "; ".join(differences) or None


@dataclass(frozen=True)
class _Settings:
    confidence: float
    n_boot: int
    seed: int
    min_effect: float


def verdict(
    ratio: float | None,
    interval: Interval | None,
    better: str | None,
    min_effect: float,
    p_value: float | None = None,
    alpha: float = 0.05,
) -> str:
    """faster / slower / no significant change (or higher / lower for metrics without a direction)."""
    if ratio is None or interval is None or not np.isfinite(ratio) or not np.isfinite(interval.low):
        return NOT_COMPARABLE
    significant = interval.excludes(1.0) and abs(ratio - 1.0) >= min_effect
    if p_value is not None:
        significant = significant and p_value < alpha
    if not significant:
        return NO_CHANGE
    if better is None:
        return HIGHER if ratio > 1 else LOWER
    return FASTER if (ratio > 1) == (better == "higher") else SLOWER


def metric_group(metric: MetricComparison) -> str:
    """throughput, latency or share: the groups reports separate metrics into."""
    if metric.name.startswith("share."):
        return "share"
    return "latency" if metric.unit == "ms" else "throughput"


def _pooled(runs: list[RunData], extract: Callable[[RunData], np.ndarray]) -> np.ndarray:
    parts = [extract(run) for run in runs]
    parts = [part for part in parts if len(part)]
    return np.concatenate(parts) if parts else np.empty(0)


def _good_fraction(runs: list[RunData]) -> float | None:
    fractions = []
    for run in runs:
        goodput, throughput = run.result.metrics.get("goodput"), run.result.metrics.get("request_throughput")
        if goodput is None or not throughput:
            return None
        fractions.append(goodput / throughput)
    return float(np.mean(fractions))


@dataclass
class _SampleJob:
    """A metric whose samples are rows resampled one by one (windows, step blocks)."""

    spec: MetricSpec
    before: np.ndarray
    after: np.ndarray
    statistic: Callable[[np.ndarray], np.ndarray]
    method: str


@dataclass
class _SeriesJob:
    """A latency percentile whose samples are in time order, resampled in blocks of neighbours."""

    spec: MetricSpec
    before: np.ndarray
    after: np.ndarray
    percentile: float
    block: int
    method: str


def _throughput_jobs(before: list[RunData], after: list[RunData]) -> list[_SampleJob]:
    windows = f"mean of {samples.THROUGHPUT_WINDOWS} equal time windows per run, bootstrap over windows"
    requests = [
        _pooled(side, lambda run: samples.windowed_rates(run, "requests")) for side in (before, after)
    ]
    tokens = [_pooled(side, lambda run: samples.windowed_rates(run, "tokens")) for side in (before, after)]
    jobs = [
        _SampleJob(
            THROUGHPUT_METRICS[0], requests[0], requests[1], mean_statistic, f"completions/s: {windows}"
        ),
        _SampleJob(
            THROUGHPUT_METRICS[1], tokens[0], tokens[1], mean_statistic, f"output tokens/s: {windows}"
        ),
    ]
    good_before, good_after = _good_fraction(before), _good_fraction(after)
    if good_before is not None and good_after is not None:
        # Without the SLO in the result, goodput is windowed completions times the run's good fraction.
        jobs.append(
            _SampleJob(
                THROUGHPUT_METRICS[2],
                requests[0] * good_before,
                requests[1] * good_after,
                mean_statistic,
                "windowed completions/s x the run's recorded good fraction",
            )
        )
    return jobs


def _share_jobs(before: list[RunData], after: list[RunData]) -> list[_SampleJob]:
    old, new = _merge_blocks(before), _merge_blocks(after)
    method = f"phase ms / step ms over {samples.STEP_BLOCKS} contiguous step blocks, bootstrap"
    return [
        _SampleJob(
            MetricSpec(f"share.{phase}", f"share: {phase}", "%", None),
            old[phase],
            new[phase],
            samples.ratio_of_sums,
            method,
        )
        for phase in old
        if phase in new
    ]


def _latency_jobs(before: list[RunData], after: list[RunData]) -> list[_SeriesJob]:
    jobs = []
    for spec in LATENCY_METRICS:
        name, stat = spec.name.split(".")
        sides = [
            _pooled(side, functools.partial(samples.latency_series, name=name)) for side in (before, after)
        ]
        # About LATENCY_BLOCKS blocks a run, as many neighbours in a block as that makes.
        block = max(
            1, round(max(len(sides[0]) / len(before), len(sides[1]) / len(after)) / samples.LATENCY_BLOCKS)
        )
        per = "per-token, in time order" if name == "itl_ms" else "per-request, by arrival"
        method = f"{stat} of {per} samples; bootstrap over blocks of {block} neighbours (~{samples.LATENCY_BLOCKS} a run)"
        jobs.append(_SeriesJob(spec, sides[0], sides[1], float(stat[1:]), block, method))
    return jobs


def _compare_samples(
    before: list[RunData], after: list[RunData], settings: _Settings
) -> list[MetricComparison]:
    jobs: list[_SampleJob | _SeriesJob] = [
        *_throughput_jobs(before, after),
        *_share_jobs(before, after),
        *_latency_jobs(before, after),
    ]
    comparisons = []
    for index, job in enumerate(jobs):
        if len(job.before) == 0 or len(job.after) == 0:
            comparisons.append(_not_comparable(job.spec, job.method))
            continue
        if isinstance(job, _SeriesJob):
            statistic, block, scale = quantile_statistic(job.percentile / 100), job.block, 1.0
        else:
            statistic, block, scale = job.statistic, 1, 100.0 if job.spec.unit == "%" else 1.0
        interval = bootstrap_ratio(
            job.after,
            job.before,
            statistic,
            resamples=settings.n_boot,
            confidence=settings.confidence,
            seed=settings.seed + index,
            block=block,
        )
        values = [
            float(statistic(np.asarray(side, dtype=float)[None])[0]) * scale
            for side in (job.before, job.after)
        ]
        comparisons.append(_comparison(job.spec, values, interval, None, settings, job.method))
    if _on_gpu(before + after):  # one figure per run: no samples to resample within a run
        comparisons += [
            _not_comparable(spec, "one value per run", f"compare {MIN_REPEATS}+ runs a side")
            for spec in GPU_METRICS
        ]
    order = {spec.name: rank for rank, spec in enumerate([*THROUGHPUT_METRICS, *LATENCY_METRICS])}
    return sorted(comparisons, key=lambda metric: order.get(metric.name, len(order)))


def _on_gpu(runs: list[RunData]) -> bool:
    return any(run.result.gpu_time for run in runs)


def _comparison(
    spec: MetricSpec,
    values: list[float],
    interval: Interval,
    p_value: float | None,
    settings: _Settings,
    method: str,
) -> MetricComparison:
    if not all(np.isfinite(value) for value in values) or not values[0] or not np.isfinite(interval.point):
        # A ratio of nothing (0 before, e.g. no request met the SLOs): say so instead of printing nan.
        why: str | None = (
            "0 before: no ratio" if np.isfinite(values[0]) and not values[0] else "no finite value on a side"
        )
        return MetricComparison(
            spec.name,
            spec.label,
            spec.unit,
            spec.better,
            _finite(values[0]),
            _finite(values[1]),
            None,
            None,
            None,
            None,
            NOT_COMPARABLE,
            f"{method} ({why})",
            why,
        )
    alpha = 1 - settings.confidence
    call = verdict(interval.point, interval, spec.better, settings.min_effect, p_value, alpha)
    low, high = _finite(interval.low), _finite(interval.high)
    why = None if low is not None and high is not None else "the resampled ratio was not finite: no interval"
    return MetricComparison(
        spec.name,
        spec.label,
        spec.unit,
        spec.better,
        values[0],
        values[1],
        interval.point,
        low if why is None else None,
        high if why is None else None,
        p_value,
        call,
        method,
        why,
    )


def _finite(value: float) -> float | None:
    return float(value) if np.isfinite(value) else None


def _merge_blocks(runs: list[RunData]) -> dict[str, np.ndarray]:
    merged: dict[str, list[np.ndarray]] = {}
    for run in runs:
        for phase, rows in samples.phase_blocks(run).items():
            merged.setdefault(phase, []).append(rows)
    return {phase: np.concatenate(parts) for phase, parts in merged.items()}


def _run_value(run: RunData, spec: MetricSpec) -> float | None:
    if spec.name.startswith("gpu_time."):
        gpu_time: Mapping[str, object] = run.result.gpu_time or {}  # read by the metric's name
        value = gpu_time.get(spec.name.removeprefix("gpu_time."))
        return float(value) * (100 if spec.unit == "%" else 1) if isinstance(value, (int, float)) else None
    if spec.name.startswith("share."):
        column = f"{spec.name.removeprefix('share.')}_ms"
        if column not in run.steps or "duration_ms" not in run.steps or run.steps.empty:
            return None
        return float(run.steps[column].sum() / run.steps["duration_ms"].sum()) * 100
    try:
        value = run.result.get(f"metrics.{spec.name}")
    except KeyError:
        return None
    return None if value is None else float(value)


def _compare_repeats(
    before: list[RunData], after: list[RunData], settings: _Settings
) -> list[MetricComparison]:
    phases = [
        c.removesuffix("_ms")
        for c in phase_columns(before[0].steps)
        if c in set(phase_columns(after[0].steps))
    ]
    specs = [
        *THROUGHPUT_METRICS,
        *LATENCY_METRICS,
        *(MetricSpec(f"share.{phase}", f"share: {phase}", "%", None) for phase in phases),
        *(GPU_METRICS if _on_gpu(before + after) else ()),
    ]
    method = "mean of per-run values; bootstrap over runs; Mann-Whitney U p-value"
    comparisons = []
    for index, spec in enumerate(specs):
        per_run = [[_run_value(run, spec) for run in side] for side in (before, after)]
        if any(value is None for side in per_run for value in side):
            comparisons.append(_not_comparable(spec, method))
            continue
        before_values, after_values = (np.asarray(side, dtype=float) for side in per_run)
        interval = bootstrap_ratio(
            after_values,
            before_values,
            mean_statistic,
            resamples=settings.n_boot,
            confidence=settings.confidence,
            seed=settings.seed + index,
        )
        p_value = mann_whitney_u(after_values, before_values).p_value
        values = [float(before_values.mean()), float(after_values.mean())]
        comparisons.append(_comparison(spec, values, interval, p_value, settings, method))
    return comparisons


def _not_comparable(spec: MetricSpec, method: str, why: str = "missing on one side") -> MetricComparison:
    return MetricComparison(
        spec.name,
        spec.label,
        spec.unit,
        spec.better,
        None,
        None,
        None,
        None,
        None,
        None,
        NOT_COMPARABLE,
        f"{method} ({why})",
        why,
    )


def _time_split_shift(
    before: list[RunData], after: list[RunData]
) -> tuple[dict[str, dict[str, float]], str | None]:
    """Mean share after minus before, in percentage points, per component and category, and the method it came
    from: spans where every run has them, else py-spy's samples (a `run --target` of another engine)."""

    def mean_split(
        runs: list[RunData], method: str, group: Literal["components", "categories"], names: tuple[str, ...]
    ) -> dict[str, float] | None:
        splits = [((run.result.breakdown or {}).get("methods") or {}).get(method) or {} for run in runs]
        if not all(splits):
            return None
        return {
            name: float(np.mean([(split.get(group) or {}).get(name) or 0.0 for split in splits]))
            for name in names
        }

    groups: tuple[tuple[Literal["components", "categories"], tuple[str, ...]], ...] = (
        ("components", COMPONENTS),
        ("categories", CATEGORIES),
    )
    for method in ("spans", "samples"):
        shift: dict[str, dict[str, float]] = {}
        for group, names in groups:
            old, new = mean_split(before, method, group, names), mean_split(after, method, group, names)
            if old is not None and new is not None:
                shift[group] = {name: (new[name] - old[name]) * 100 for name in names}
        if shift:
            return shift, method
    return {}, None
