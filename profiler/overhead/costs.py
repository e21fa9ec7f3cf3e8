"""What profiling costs: an interleaved A/B of throughputs, and the collectors' own self-measured costs."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..rundir.schema import Overhead

if TYPE_CHECKING:
    from ..collectors.registry import CollectorResults


@dataclass(slots=True)
class ABResult:
    """Throughputs of interleaved runs: a = baseline (unprofiled), b = treatment (profiled)."""

    a: list[float] = field(default_factory=list)
    b: list[float] = field(default_factory=list)
    order: list[str] = field(default_factory=list)  # e.g. ["a", "b", "b", "a", ...] as run

    @property
    def pair_ratios(self) -> list[float]:
        return [b / a for a, b in zip(self.a, self.b) if a > 0]

    @property
    def ratio(self) -> float | None:
        """Median over pairs of b/a: below 1 means the treatment is slower (throughput)."""
        ratios = self.pair_ratios
        return statistics.median(ratios) if ratios else None


def throughput_ratio(profiled: list[float], baseline: list[float]) -> float:
    """Median profiled throughput / median baseline throughput (1.0 = free; 0.9 = 10% slower)."""
    if not profiled or not baseline:
        raise ValueError("throughput_ratio needs at least one profiled and one baseline throughput")
    return statistics.median(profiled) / statistics.median(baseline)


def slowdown(ratio: float) -> float:
    """Throughput ratio -> the x-times slowdown people quote (0.8 -> x1.25)."""
    return 1.0 / ratio


def interleave_ab(
    run_a: Callable[[], float], run_b: Callable[[], float], *, pairs: int = 5, warmup: int = 1
) -> ABResult:
    """Run A and B alternately, each returning a throughput; ABBA order so slow drift cancels out.

    `warmup` runs of each are made first and discarded (cold caches, lazy imports, JIT-free warm-up).
    """
    if pairs < 1:
        raise ValueError("interleave_ab needs pairs >= 1")
    for _ in range(warmup):
        run_a()
        run_b()
    result = ABResult()
    for index in range(pairs):
        first_a = index % 2 == 0
        for label in ("a", "b") if first_a else ("b", "a"):
            value = run_a() if label == "a" else run_b()
            (result.a if label == "a" else result.b).append(value)
            result.order.append(label)
    return result


def collector_costs(collector_results: CollectorResults, *, wall_ns: int) -> dict[str, float | None]:
    """Each collector's self-measured cost as a fraction of the run's wall time.

    spans/gc: recorded events x calibrated cost per event; kernels: the window's extra step time plus
    the engine pauses to start/stop it; sampling: py-spy's CPU time as a share of one core (in --native
    mode the process is also paused per sample, which only an A/B run shows); gpu: its sampling
    thread's CPU time.

    Why one core and not the machine's cores: torch's threads fill every core in a parallel region, and
    a region waits for its slowest thread, so the CPU py-spy takes from any one of them is the step's
    time. In-run A/Bs that toggled only py-spy on a 2-core machine read about its CPU share of one core
    while on, twice its share of the two cores (docs/measurements.md). On a machine whose engine leaves
    cores idle the estimate errs high.
    """
    costs = _costs(collector_results, wall_ns)
    return {name: costs[name] for name in collector_results if name in costs}  # in the collectors' order


def _costs(results: CollectorResults, wall_ns: int) -> dict[str, float | None]:
    """The costs of the collectors that ran (status ok), by name."""

    def share(ns: float) -> float | None:
        return ns / wall_ns if wall_ns else None

    costs: dict[str, float | None] = {}
    spans, gc = results.get("spans"), results.get("gc")
    if spans and spans.get("status") == "ok":
        span_overhead = spans.get("overhead")
        costs["spans"] = share(span_overhead.get("estimated_ns", 0) if span_overhead else 0)
    if gc and gc.get("status") == "ok":
        gc_overhead = gc.get("overhead")
        costs["gc"] = share(gc_overhead.get("estimated_ns", 0) if gc_overhead else 0)
    kernels = results.get("kernels")
    if kernels and kernels.get("status") == "ok":
        overhead = kernels.get("overhead") or {}
        window_ms, steps = overhead.get("window_step_ms"), kernels.get("profiled_steps", 0)
        ratio = overhead.get("slowdown")
        extra = window_ms * steps * 1e6 * (1 - 1 / ratio) if window_ms and ratio and ratio > 1 else 0.0
        costs["kernels"] = share(extra + overhead.get("engine_pause_ns", 0))
    sampling = results.get("sampling")
    if sampling and sampling.get("status") == "ok":
        sampling_overhead = sampling.get("overhead")
        costs["sampling"] = sampling_overhead.get("py_spy_cpu_fraction") if sampling_overhead else None
    gpu = results.get("gpu")
    if gpu and gpu.get("status") == "ok":
        gpu_overhead = gpu.get("overhead")
        costs["gpu"] = share((gpu_overhead.get("sampler_cpu_s", 0) if gpu_overhead else 0) * 1e9)
    return costs


def overhead_section(
    collector_results: CollectorResults,
    *,
    wall_ns: int,
    ab: ABResult | None = None,
) -> Overhead:
    """The result's `overhead` section: a measured A/B ratio when there is one, else an estimate from costs."""
    costs = collector_costs(collector_results, wall_ns=wall_ns)
    if ab is not None and ab.ratio is not None:
        return {
            "throughput_ratio": ab.ratio,
            "method": f"interleaved A/B: {len(ab.pair_ratios)} pairs of profiled vs unprofiled runs (ABBA order), "
            "median of per-pair throughput ratios",
            "collectors": costs,
        }
    total = sum(value for value in costs.values() if value is not None)
    return {
        "throughput_ratio": 1.0 / (1.0 + total),
        "method": "estimated: 1 / (1 + sum of the collectors' self-measured costs); no A/B run",
        "collectors": costs,
    }
