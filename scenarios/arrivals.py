"""Open-loop arrival processes: gamma-distributed gaps with vLLM's --burstiness semantics (1 = Poisson)."""

from __future__ import annotations

import math

import numpy as np


def interarrival_gaps(count: int, rate: float, burstiness: float, rng: np.random.Generator) -> np.ndarray:
    """`count` gaps in seconds with mean 1/rate and coefficient of variation 1/sqrt(burstiness).

    As in vLLM's benchmark_serving: gamma shape = burstiness, scale = 1 / (rate * burstiness); shape 1
    is the exponential (Poisson process), shape < 1 clusters requests into bursts. rate = inf: all zero.
    """
    if math.isinf(rate):
        return np.zeros(count)
    return rng.gamma(shape=burstiness, scale=1.0 / (rate * burstiness), size=count)


def arrival_offsets(count: int, rate: float, burstiness: float, rng: np.random.Generator) -> np.ndarray:
    """Arrival times in seconds from the start; the first request arrives at 0 (like vLLM's first send)."""
    gaps = interarrival_gaps(max(count - 1, 0), rate, burstiness, rng)
    return np.concatenate(([0.0], np.cumsum(gaps)))[:count]


def arrivals_within(
    duration_s: float, rate: float, burstiness: float, rng: np.random.Generator
) -> np.ndarray:
    """Every arrival time in [0, duration_s) of the process (finite rate only)."""
    if math.isinf(rate):
        raise ValueError("arrivals_within: rate = inf has no arrivals to count within a duration")
    offsets = np.zeros(1)
    chunk = int(duration_s * rate * 1.2) + 16
    # Draw chunks until the process passes the deadline; gaps come from the same stream either way.
    while offsets[-1] < duration_s:
        offsets = np.concatenate(
            (offsets, offsets[-1] + np.cumsum(interarrival_gaps(chunk, rate, burstiness, rng)))
        )
    return offsets[offsets < duration_s]
