"""Serving metrics with vLLM's definitions (TTFT, TPOT, ITL, E2E, queue time, throughput, goodput) from plain per-request timings.

Definitions (all per request, warmup requests excluded, latencies reported in milliseconds):

    TTFT   first_token - arrival
    TPOT   (E2E - TTFT) / (output_tokens - 1), for output_tokens > 1
    ITL    every gap between consecutive output tokens (pooled over requests)
    E2E    finish - arrival
    queue  scheduled - arrival (time before the engine first scheduled the request)
    goodput  completed requests meeting every SLO, per second of the measured window (a one-token
             request has TPOT 0 for the SLO check, as in vLLM's benchmark_serving)

Each latency is summarised as {mean, p50, p90, p99} (numpy percentiles, linear interpolation), all
None when there is no value.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypedDict

import numpy as np

from ..rundir.schema import BatchSizes, Latency, MeanMax, Metrics

SLO_KEYS = ("ttft_ms", "tpot_ms", "e2e_ms")
LATENCY_KEYS = ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms", "queue_ms")
STEP_KEYS = ("batch_size", "kv_utilization", "fragmentation_slots", "preemptions", "start_ns", "end_ns")


@dataclass(frozen=True, slots=True)
class RequestTiming:
    """One request's timestamps (perf_counter_ns) and token counts, as the engine recorded them."""

    request_id: int | str
    arrival_ns: int
    scheduled_ns: int | None  # first time the engine scheduled it; None if it never was
    first_token_ns: int | None
    token_ns: list[int] = field(default_factory=list)  # every output token's time, the first one included
    finish_ns: int | None = None
    prompt_tokens: int = 0
    output_tokens: int = 0
    ok: bool = True
    warmup: bool = False

    def __post_init__(self) -> None:
        if self.ok and (self.finish_ns is None or self.first_token_ns is None):
            raise ValueError(f"request {self.request_id}: ok=True needs first_token_ns and finish_ns")
        if self.first_token_ns is not None and self.first_token_ns < self.arrival_ns:
            raise ValueError(f"request {self.request_id}: first token before arrival")
        if self.finish_ns is not None and self.finish_ns < self.arrival_ns:
            raise ValueError(f"request {self.request_id}: finish before arrival")

    @property
    def ttft_ns(self) -> int:
        return self.first_token_ns - self.arrival_ns  # type: ignore[operator]

    @property
    def e2e_ns(self) -> int:
        return self.finish_ns - self.arrival_ns  # type: ignore[operator]

    @property
    def tpot_ns(self) -> float | None:
        if self.output_tokens <= 1:
            return None
        return (self.e2e_ns - self.ttft_ns) / (self.output_tokens - 1)


class StepTimeline(TypedDict):
    """The engine steps' summary (engine_timeline_summary), as result.json's `engine` section carries it."""

    steps: int
    preemptions: int
    busy_s: float
    span_s: float
    busy_fraction: float | None
    batch_size: BatchSizes
    kv_utilization: MeanMax
    fragmentation_slots: MeanMax


def latency_summary(values_ms: Sequence[float]) -> Latency:
    """{mean, p50, p90, p99} of the values, all None when there are none."""
    if len(values_ms) == 0:
        return {"mean": None, "p50": None, "p90": None, "p99": None}
    values = np.asarray(values_ms, dtype=np.float64)
    p50, p90, p99 = np.percentile(values, [50, 90, 99])
    return {"mean": float(values.mean()), "p50": float(p50), "p90": float(p90), "p99": float(p99)}


def compute_metrics(
    timings: Sequence[RequestTiming], *, duration_s: float | None, slos: dict[str, float]
) -> Metrics:
    """Serving metrics of the measured (non-warmup) requests over a window of `duration_s` seconds.

    duration_s=None measures the window from the first measured arrival to the last measured finish.
    Returns completed, failed, request/output/total token throughput (per second), goodput (requests
    per second meeting every SLO in `slos`), {mean, p50, p90, p99} ms for ttft/tpot/itl/e2e/queue,
    and duration_s (the window used).
    """
    if unknown := set(slos) - set(SLO_KEYS):
        raise ValueError(f"unknown SLO {sorted(unknown)}; allowed: {', '.join(SLO_KEYS)}")
    measured = [timing for timing in timings if not timing.warmup]
    done = [timing for timing in measured if timing.ok]
    if duration_s is None:
        finishes = [timing.finish_ns for timing in measured if timing.finish_ns is not None]
        start = min((timing.arrival_ns for timing in measured), default=0)
        duration_s = (max(finishes) - start) / 1e9 if finishes else 0.0

    ttft_ms = [timing.ttft_ns / 1e6 for timing in done]
    e2e_ms = [timing.e2e_ns / 1e6 for timing in done]
    tpot_ms = [timing.tpot_ns / 1e6 for timing in done if timing.tpot_ns is not None]
    itl_ms = [gap / 1e6 for timing in done for gap in np.diff(timing.token_ns).tolist()]
    queue_ms = [
        (timing.scheduled_ns - timing.arrival_ns) / 1e6 for timing in done if timing.scheduled_ns is not None
    ]

    def meets_slos(timing: RequestTiming) -> bool:
        observed = {
            "ttft_ms": timing.ttft_ns / 1e6,
            "tpot_ms": (timing.tpot_ns or 0.0) / 1e6,
            "e2e_ms": timing.e2e_ns / 1e6,
        }
        return all(observed[name] <= limit for name, limit in slos.items())

    def per_second(count: float) -> float:
        return count / duration_s if duration_s > 0 else 0.0

    output_tokens = sum(timing.output_tokens for timing in done)
    prompt_tokens = sum(timing.prompt_tokens for timing in done)
    return {
        "completed": len(done),
        "failed": len(measured) - len(done),
        "request_throughput": per_second(len(done)),
        "output_token_throughput": per_second(output_tokens),
        "total_token_throughput": per_second(prompt_tokens + output_tokens),
        "goodput": per_second(sum(meets_slos(timing) for timing in done)),
        "ttft_ms": latency_summary(ttft_ms),
        "tpot_ms": latency_summary(tpot_ms),
        "itl_ms": latency_summary(itl_ms),
        "e2e_ms": latency_summary(e2e_ms),
        "queue_ms": latency_summary(queue_ms),
        "duration_s": float(duration_s),
    }


def engine_timeline_summary(steps: Sequence[Mapping[str, float | None]]) -> StepTimeline:
    """Batch size, KV utilization and fragmentation (mean/max), preemptions and busy time over the engine steps.

    Each step is a dict with STEP_KEYS (a None among them reads as NaN). batch_size.time_weighted_mean
    weights each step by its duration (the batch the engine was actually running, on average, while busy).
    """

    def mean_max(values: np.ndarray) -> MeanMax:
        if values.size == 0:
            return {"mean": None, "max": None}
        return {"mean": float(values.mean()), "max": float(values.max())}

    def column(name: str) -> np.ndarray:
        return np.array([step[name] for step in steps], dtype=np.float64)

    if steps and (missing := [key for key in STEP_KEYS if key not in steps[0]]):
        raise ValueError(f"engine step dicts lack {missing}; each needs {', '.join(STEP_KEYS)}")
    batch = column("batch_size")
    durations = column("end_ns") - column("start_ns")
    busy_ns = float(durations.sum())
    span_ns = float(column("end_ns").max() - column("start_ns").min()) if steps else 0.0
    time_weighted = float((batch * durations).sum() / busy_ns) if busy_ns > 0 else mean_max(batch)["mean"]
    return {
        "steps": len(steps),
        "preemptions": int(column("preemptions").sum()),
        "busy_s": busy_ns / 1e9,
        "span_s": span_ns / 1e9,
        "busy_fraction": busy_ns / span_ns if span_ns > 0 else None,
        "batch_size": {**mean_max(batch), "time_weighted_mean": time_weighted},
        "kv_utilization": mean_max(column("kv_utilization")),
        "fragmentation_slots": mean_max(column("fragmentation_slots")),
    }
