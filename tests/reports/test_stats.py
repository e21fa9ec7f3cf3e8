"""Bootstrap intervals and the Mann-Whitney U test, checked against hand-computed values and properties."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reports.stats import block_bootstrap_ratio, bootstrap_ratio, mann_whitney_u, rank


def test_rank_averages_ties():
    assert rank(np.array([10, 20, 20, 5])).tolist() == [2.0, 3.5, 3.5, 1.0]


def test_exact_p_for_complete_separation():
    # 3 vs 3, every x above every y: U = 9, and 2 of the C(6,3) = 20 orderings are this extreme.
    u, p = mann_whitney_u(np.array([4.0, 5.0, 6.0]), np.array([1.0, 2.0, 3.0]))
    assert u == 9 and p == pytest.approx(0.1)
    u, p = mann_whitney_u(np.array([5.0, 6.0, 7.0, 8.0]), np.array([1.0, 2.0, 3.0, 4.0]))
    assert p == pytest.approx(2 / 70)


def test_normal_approximation_for_large_samples():
    rng = np.random.default_rng(0)
    same = mann_whitney_u(rng.normal(0, 1, 300), rng.normal(0, 1, 300))[1]
    shifted = mann_whitney_u(rng.normal(0.5, 1, 300), rng.normal(0, 1, 300))[1]
    assert same > 0.05 and shifted < 1e-6


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(0, 20), min_size=1, max_size=15),
    st.lists(st.integers(0, 20), min_size=1, max_size=15),
)
def test_u_statistics_sum_to_pairs_and_p_is_a_probability(x, y):
    u_xy, p_xy = mann_whitney_u(np.array(x), np.array(y))
    u_yx, p_yx = mann_whitney_u(np.array(y), np.array(x))
    assert u_xy + u_yx == pytest.approx(len(x) * len(y))
    assert 0.0 <= p_xy <= 1.0 and p_xy == pytest.approx(p_yx)


def test_bootstrap_is_seeded_and_brackets_the_point():
    rng = np.random.default_rng(1)
    before, after = rng.lognormal(0, 0.3, 400), rng.lognormal(0, 0.3, 400) * 1.5
    median = lambda resampled: np.median(resampled, axis=1)
    first = bootstrap_ratio(before, after, median, n_boot=500, seed=7)
    again = bootstrap_ratio(before, after, median, n_boot=500, seed=7)
    assert first == again
    assert first.low <= first.point <= first.high and first.low > 1.3 and first.high < 1.7


def test_block_bootstrap_is_wider_than_iid_for_correlated_samples():
    rng = np.random.default_rng(2)
    # 20 blocks that each share a level: the samples inside a block are not independent evidence.
    blocks = [rng.normal(level, 0.1, 50) for level in rng.normal(10, 1, 20)]
    others = [rng.normal(level, 0.1, 50) for level in rng.normal(10, 1, 20)]
    p50 = lambda values: float(np.percentile(values, 50))
    blocked = block_bootstrap_ratio(blocks, others, p50, n_boot=300, seed=3)
    iid = bootstrap_ratio(np.concatenate(blocks), np.concatenate(others),
                          lambda r: np.percentile(r, 50, axis=1), n_boot=300, seed=3)  # fmt: skip
    assert (blocked.high - blocked.low) > 2 * (iid.high - iid.low)
