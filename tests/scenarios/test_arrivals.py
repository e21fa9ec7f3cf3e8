"""Arrival processes: Poisson and gamma (vLLM burstiness) gaps have the promised mean and spread."""

from __future__ import annotations

import math

import numpy as np
import pytest

from infer_prof.scenarios.arrivals import arrival_offsets, arrivals_within, interarrival_gaps


@pytest.mark.parametrize(("rate", "burstiness"), [(2.0, 1.0), (5.0, 0.25), (0.5, 4.0)])
def test_gaps_have_mean_one_over_rate_and_cv_one_over_sqrt_burstiness(rate: float, burstiness: float) -> None:
    gaps = interarrival_gaps(200_000, rate, burstiness, np.random.default_rng(7))
    assert gaps.mean() == pytest.approx(1 / rate, rel=0.02)
    assert gaps.std() / gaps.mean() == pytest.approx(1 / math.sqrt(burstiness), rel=0.03)


def test_poisson_counts_per_second_have_variance_equal_to_mean() -> None:
    offsets = arrival_offsets(100_000, 4.0, 1.0, np.random.default_rng(3))
    counts = np.bincount(offsets.astype(np.int64))[:-1]  # drop the partial last second
    assert counts.mean() == pytest.approx(4.0, rel=0.02)
    assert counts.var() == pytest.approx(counts.mean(), rel=0.05)


def test_offsets_start_at_zero_and_increase() -> None:
    offsets = arrival_offsets(50, 2.0, 1.0, np.random.default_rng(0))
    assert offsets[0] == 0 and len(offsets) == 50 and np.all(np.diff(offsets) >= 0)
    assert arrival_offsets(4, math.inf, 1.0, np.random.default_rng(0)).tolist() == [0, 0, 0, 0]
    assert len(arrival_offsets(0, 2.0, 1.0, np.random.default_rng(0))) == 0


def test_arrivals_within_a_duration_count_rate_times_duration() -> None:
    offsets = arrivals_within(2_000.0, 3.0, 1.0, np.random.default_rng(5))
    assert offsets.max() < 2_000.0 and offsets[0] == 0
    assert len(offsets) == pytest.approx(6_000, rel=0.05)
