"""The one statistics module: Mann-Whitney U against hand counts and permutations, bootstrap intervals against
known truths, and the moving-block bootstrap against scipy's at block length 1."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infer_prof.profiler.stats import (
    _moving_block_distribution,
    _scipy_distribution,
    block_length,
    bootstrap,
    bootstrap_ratio,
    difference_of,
    mann_whitney_u,
    mean_statistic,
    quantile_statistic,
    rate_statistic,
    smallest_p_value,
)


def _u_by_pairs(x: list[float], y: list[float]) -> float:
    """U by its definition: pairs with x above y, ties counting one half."""
    return sum(1.0 if a > b else 0.5 if a == b else 0.0 for a in x for b in y)


def _permutation_p_less(x: np.ndarray, y: np.ndarray) -> float:
    """The exact one-sided p-value: the share of all splits of the pooled values with U at most the observed."""
    pooled, observed = np.concatenate([x, y]), _u_by_pairs(list(x), list(y))
    splits = list(itertools.combinations(range(len(pooled)), len(x)))
    return float(
        np.mean(
            [
                _u_by_pairs(list(pooled[list(chosen)]), list(np.delete(pooled, list(chosen)))) <= observed
                for chosen in splits
            ]
        )
    )


def test_u_of_a_textbook_example() -> None:
    # Two groups of 5 and 4: U_x = 17 and U_y = 3 by counting pairs (U_x + U_y = n1 * n2).
    x, y = [19, 22, 16, 29, 24], [20, 11, 17, 12]
    assert mann_whitney_u(x, y).u == 17 == _u_by_pairs(x, y)
    assert mann_whitney_u(y, x).u == 3


def test_exact_p_for_complete_separation_counts_orderings() -> None:
    # 3 vs 3, every x below every y: 1 of the C(6,3) = 20 orderings is this extreme, 2 two-sided.
    assert mann_whitney_u([1, 2, 3], [4, 5, 6], alternative="less").p_value == pytest.approx(1 / 20)
    assert mann_whitney_u([1, 2, 3], [4, 5, 6]).p_value == pytest.approx(2 / 20)
    assert mann_whitney_u([5, 6, 7, 8], [1, 2, 3, 4]).p_value == pytest.approx(2 / 70)
    assert mann_whitney_u([1, 2, 3], [4, 5, 6], alternative="greater").p_value > 0.95


def test_small_samples_without_ties_match_the_permutation_p_value() -> None:
    rng = np.random.default_rng(3)
    x, y = rng.normal(0.0, 1.0, 6), rng.normal(1.0, 1.0, 6)
    assert mann_whitney_u(x, y, alternative="less").p_value == pytest.approx(
        _permutation_p_less(x, y), abs=1e-9
    )


def test_ties_use_the_tie_corrected_normal_approximation() -> None:
    x, y = [1, 2, 2, 3], [2, 3, 3, 4]
    # Ties: value 2 three times, value 3 three times -> sum(t^3 - t) = 24 + 24.
    n1 = n2 = 4
    n = n1 + n2
    variance = n1 * n2 / 12 * ((n + 1) - 48 / (n * (n - 1)))
    u = _u_by_pairs(x, y)
    z = (abs(u - n1 * n2 / 2) - 0.5) / math.sqrt(variance)
    result = mann_whitney_u(x, y)
    assert result.u == u == 3.0
    assert result.p_value == pytest.approx(math.erfc(z / math.sqrt(2)), rel=1e-9)
    assert mann_whitney_u([5, 5, 5], [5, 5]).p_value == 1.0  # all tied: no evidence at all


def test_large_samples_tell_a_shift_from_no_shift() -> None:
    rng = np.random.default_rng(0)
    assert mann_whitney_u(rng.normal(0, 1, 300), rng.normal(0, 1, 300)).p_value > 0.05
    assert mann_whitney_u(rng.normal(0.5, 1, 300), rng.normal(0, 1, 300)).p_value < 1e-6


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(0, 20), min_size=1, max_size=15),
    st.lists(st.integers(0, 20), min_size=1, max_size=15),
)
def test_u_statistics_sum_to_pairs_and_p_is_a_probability(x: list[int], y: list[int]) -> None:
    forward, backward = mann_whitney_u(x, y), mann_whitney_u(y, x)
    assert forward.u + backward.u == pytest.approx(len(x) * len(y))
    assert 0.0 <= forward.p_value <= 1.0 and forward.p_value == pytest.approx(backward.p_value)


def test_smallest_p_value_tells_when_a_test_can_reach_alpha() -> None:
    assert smallest_p_value(3, 3, alternative="less") > 0.01  # 3 vs 3 repeats cannot show p < 0.01
    assert smallest_p_value(5, 5, alternative="less") < 0.01
    assert smallest_p_value(5, 5, alternative="greater") == pytest.approx(
        smallest_p_value(5, 5, alternative="less")
    )
    assert smallest_p_value(1, 1) > 0.3  # one run per side never shows anything


def test_bootstrap_interval_covers_the_true_ratio_and_is_seeded() -> None:
    rng = np.random.default_rng(7)
    baseline = rng.lognormal(0.0, 0.3, 300)
    slower = rng.lognormal(0.0, 0.3, 300) * 1.25  # true ratio of means (and medians): 1.25
    interval = bootstrap_ratio(slower, baseline, seed=11)
    assert interval.low < 1.25 < interval.high
    assert interval.low > 1.0  # and it excludes "no difference"
    assert bootstrap_ratio(slower, baseline, seed=11) == interval
    median = bootstrap_ratio(slower, baseline, quantile_statistic(0.5), seed=11)
    assert median.low < 1.25 < median.high


def test_difference_of_two_samples_brackets_the_true_difference() -> None:
    rng = np.random.default_rng(5)
    first = rng.normal(3.0, 1.0, 400)
    second = rng.normal(2.0, 1.0, 400)
    interval = bootstrap([first, second], difference_of(mean_statistic), seed=2)
    assert interval.low < 1.0 < interval.high
    assert interval.excludes(0.0)


def test_a_single_row_has_its_point_but_no_interval() -> None:
    """Nothing to resample (e.g. one block pair): the statistic still, the interval NaN rather than scipy's error."""
    for block in (1, None):
        interval = bootstrap([[2.0]], mean_statistic, block=block)
        assert interval.point == 2.0 and math.isnan(interval.low) and math.isnan(interval.high)


def test_bootstrap_coverage_over_many_seeded_samples() -> None:
    rng = np.random.default_rng(2024)
    covered = 0
    for trial in range(40):
        a, b = rng.exponential(2.0, 120), rng.exponential(1.0, 120)  # true ratio of means: 2
        interval = bootstrap_ratio(a, b, confidence=0.9, resamples=500, seed=trial)
        covered += interval.low <= 2.0 <= interval.high
    assert covered >= 31  # nominal 90% of 40 = 36; the percentile bootstrap runs a little short


def test_moving_blocks_of_one_resample_like_scipy() -> None:
    rng = np.random.default_rng(9)
    a, b = rng.lognormal(0.0, 0.5, 200), rng.lognormal(0.2, 0.5, 150)
    ratio = lambda x, y: x.mean(axis=1) / y.mean(axis=1)  # noqa: E731
    ours = _moving_block_distribution([a, b], ratio, 4000, [1, 1], np.random.default_rng(1))
    theirs = _scipy_distribution([a, b], ratio, 4000, np.random.default_rng(2))
    # Same distribution up to Monte Carlo error: centre, spread and both 2.5% tails.
    assert ours.mean() == pytest.approx(theirs.mean(), rel=0.01)
    assert ours.std() == pytest.approx(theirs.std(), rel=0.08)
    for q in (0.025, 0.975):
        assert np.quantile(ours, q) == pytest.approx(np.quantile(theirs, q), rel=0.02)


def test_rate_statistic_keeps_rows_paired_and_blocks_widen_the_interval() -> None:
    rng = np.random.default_rng(5)
    tokens = rng.integers(1, 40, 400).astype(float)
    # A slow drift makes neighbouring steps alike: blocks must see that, iid resampling does not.
    drift = np.repeat(rng.lognormal(0.0, 0.3, 20), 20)
    steps = np.column_stack([tokens, tokens * 2.0 * drift])
    other = np.column_stack([tokens, tokens * 2.0 * drift[::-1]])
    assert rate_statistic(steps[None, ...])[0] == pytest.approx(tokens.sum() / steps[:, 1].sum())
    iid = bootstrap_ratio(steps, other, rate_statistic, seed=1, block=1)
    blocked = bootstrap_ratio(steps, other, rate_statistic, seed=1, block=None)
    assert blocked.high - blocked.low > iid.high - iid.low
    assert block_length(400) == 20


def test_blocks_of_correlated_samples_are_wider_than_iid() -> None:
    rng = np.random.default_rng(2)
    # 20 stretches that each share a level: the samples inside one are not independent evidence.
    series = np.concatenate([rng.normal(level, 0.1, 50) for level in rng.normal(10, 1, 20)])
    others = np.concatenate([rng.normal(level, 0.1, 50) for level in rng.normal(10, 1, 20)])
    median = quantile_statistic(0.5)
    blocked = bootstrap_ratio(series, others, median, resamples=500, seed=3, block=50)
    iid = bootstrap_ratio(series, others, median, resamples=500, seed=3)
    assert (blocked.high - blocked.low) > 2 * (iid.high - iid.low)


def test_one_sample_statistics_and_degenerate_resamples() -> None:
    rows = np.array([[10.0, 1.0], [0.0, 1.0], [10.0, 1.0]])
    interval = bootstrap([rows], rate_statistic, resamples=300, seed=0)
    assert interval.point == pytest.approx(20 / 3)
    assert 0.0 <= interval.low <= interval.point <= interval.high <= 10.0
    # Every resample divides by zero: no finite value, so no interval.
    nothing = bootstrap([np.zeros((4, 2))], rate_statistic, resamples=50, seed=0)
    assert math.isnan(nothing.low) and math.isnan(nothing.high)


def test_bad_inputs_raise() -> None:
    with pytest.raises(ValueError):
        mann_whitney_u([], [1.0])
    with pytest.raises(ValueError):
        mann_whitney_u([float("nan")], [1.0])
    with pytest.raises(ValueError):
        bootstrap_ratio([1.0], [1.0], confidence=1.0)
    with pytest.raises(ValueError):
        bootstrap([[]], mean_statistic)
    assert mean_statistic(np.array([[1.0, 3.0]]))[0] == 2.0


def test_wilson_interval_matches_the_textbook_and_stays_honest_at_small_n() -> None:
    from infer_prof.profiler.stats import proportions_differ, wilson_interval

    # Wilson (1927) / Newcombe (1998) table: 81 of 263 -> [0.2553, 0.3662] at 95%.
    interval = wilson_interval(81, 263)
    assert interval.point == pytest.approx(81 / 263)
    assert (interval.low, interval.high) == (pytest.approx(0.2553, abs=1e-4), pytest.approx(0.3662, abs=1e-4))
    two = wilson_interval(0, 2)
    assert two.low == 0.0 and two.high > 0.6  # 2 samples say almost nothing
    assert wilson_interval(2, 2).low < 0.4
    assert not proportions_differ(wilson_interval(1, 2), wilson_interval(0, 2))
    assert proportions_differ(wilson_interval(600, 1000), wilson_interval(400, 1000))
    with pytest.raises(ValueError):
        wilson_interval(3, 2)


def test_a_wilson_interval_holds_its_own_point_at_the_ends() -> None:
    from infer_prof.profiler.stats import wilson_interval

    # At all hits the exact high is 1 and at none the low is 0; rounding once left 30 of 30's high an ulp under 1.
    for trials in (1, 2, 3, 7, 29, 30, 31, 100, 263, 1000, 12345):
        full, empty = wilson_interval(trials, trials), wilson_interval(0, trials)
        assert full.point == full.high == 1.0 and full.low < 1.0
        assert empty.point == empty.low == 0.0 and empty.high > 0.0
    for hits in range(0, 41):
        interval = wilson_interval(hits, 40)
        assert interval.low <= interval.point <= interval.high
