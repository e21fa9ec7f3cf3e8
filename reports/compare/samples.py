"""What compare resamples from one run: windowed throughputs, per-request latencies, step-window phase shares."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...profiler.rundir.results import RunData
from ...profiler.rundir.samples import measured_requests, parse_token_ns, token_gaps_ms
from ..rundata import phase_columns

# Equal time windows per run for throughput: long enough to hold several completions, many enough
# to resample; contiguous windows keep the load's slow swings inside one sample (a block bootstrap).
THROUGHPUT_WINDOWS = 20
STEP_BLOCKS = 40
LATENCY_BLOCKS = 20
# Per-token ITL samples are capped (thinned in time order): the interval barely changes, the time does.
MAX_ITL_SAMPLES = 5000


def _span_ns(run: RunData, measured: pd.DataFrame) -> tuple[int, int] | None:
    if "finish_ns" not in measured or "arrival_ns" not in run.requests:
        return None
    finish = pd.to_numeric(measured["finish_ns"], errors="coerce").dropna()
    arrival = pd.to_numeric(run.requests["arrival_ns"], errors="coerce").dropna()
    if finish.empty or arrival.empty:
        return None
    start, end = int(arrival.min()), int(finish.max())
    duration_s = (run.result.metrics or {}).get("duration_s")
    if isinstance(duration_s, (int, float)) and duration_s > 0:
        # The run's own measured window (after the warm-up requests, to the last finish): the windows' mean is then
        # the run's headline requests/s, not a rate diluted by the warm-up.
        start = max(start, end - round(duration_s * 1e9))
    return (start, end) if end > start else None


def windowed_rates(run: RunData, kind: str) -> np.ndarray:
    """Per-window rate (per second) of completions ("requests") or output tokens ("tokens")."""
    measured = measured_requests(run.requests)
    span = _span_ns(run, measured)
    if span is None:
        return np.empty(0)
    if kind == "requests":
        times = pd.to_numeric(measured["finish_ns"], errors="coerce").dropna().to_numpy(dtype=np.int64)
    else:
        times = np.concatenate(
            [np.asarray(parse_token_ns(cell), dtype=np.int64) for cell in measured["token_ns"]]
            or [np.empty(0, dtype=np.int64)]
        )
    edges = np.linspace(span[0], span[1], THROUGHPUT_WINDOWS + 1)
    counts, _ = np.histogram(times, bins=edges)
    return counts / (np.diff(edges) / 1e9)


def latency_series(run: RunData, name: str) -> np.ndarray:
    """TTFT/TPOT/E2E per request by arrival, or ITL per token by when it arrived, in ms, in time order.

    Requests that overlap in time share batches and step times, so neighbours in this order are not
    independent evidence: compare resamples them in blocks. ITL series longer than MAX_ITL_SAMPLES are
    thinned by a stride, which keeps their time order.
    """
    measured = measured_requests(run.requests, by_arrival=True)
    if measured.empty:
        return np.empty(0)
    if name == "itl_ms":
        values = token_gaps_ms(measured, in_time_order=True)
        return values[:: -(-len(values) // MAX_ITL_SAMPLES)] if len(values) > MAX_ITL_SAMPLES else values
    if name not in measured:
        return np.empty(0)
    return pd.to_numeric(measured[name], errors="coerce").dropna().to_numpy(dtype=float)


def phase_blocks(run: RunData) -> dict[str, np.ndarray]:
    """For each phase, rows of (phase ms, step ms) summed over contiguous blocks of steps."""
    steps = run.steps
    if steps.empty or "duration_ms" not in steps:
        return {}
    blocks = np.array_split(np.arange(len(steps)), min(STEP_BLOCKS, len(steps)))
    duration = steps["duration_ms"].to_numpy(dtype=float)
    totals = np.array([duration[block].sum() for block in blocks])
    shares = {}
    for column in phase_columns(steps):
        values = steps[column].fillna(0).to_numpy(dtype=float)
        shares[column.removesuffix("_ms")] = np.column_stack(
            [[values[block].sum() for block in blocks], totals]
        )
    return shares


def ratio_of_sums(resampled: np.ndarray) -> np.ndarray:
    """(B, n, 2) rows of (part, whole) -> sum(part) / sum(whole) per resample."""
    return resampled[..., 0].sum(axis=1) / resampled[..., 1].sum(axis=1)
