"""Mann-Whitney U and the bootstrap ratio interval against hand-computed values and known truths."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from profiler.stats import (
    block_length,
    bootstrap_ratio_ci,
    mann_whitney_u,
    mean_statistic,
    quantile_statistic,
    rate_statistic,
    smallest_p_value,
)  # fmt: skip


def _u_by_pairs(x: list[float], y: list[float]) -> float:
    """U by its definition: pairs with x above y, ties counting one half."""
    return sum(1.0 if a > b else 0.5 if a == b else 0.0 for a in x for b in y)


def test_u_of_a_textbook_example() -> None:
    # Two groups of 5 and 4: U_x = 17 and U_y = 3 by counting pairs (U_x + U_y = n1 * n2).
    x, y = [19, 22, 16, 29, 24], [20, 11, 17, 12]
    assert mann_whitney_u(x, y).u == 17 == _u_by_pairs(x, y)
    assert mann_whitney_u(y, x).u == 3


def test_p_value_of_complete_separation_matches_the_normal_approximation_by_hand() -> None:
    # U = 0, mean 4.5, sd sqrt(3*3*7/12); continuity-corrected z = 4 / sd; two-sided p = 2 * (1 - Phi(z)).
    result = mann_whitney_u([1, 2, 3], [4, 5, 6])
    sd = math.sqrt(9 * 7 / 12)
    expected = math.erfc((4.0 / sd) / math.sqrt(2))
    assert result.u == 0
    assert result.p_value == pytest.approx(expected, rel=1e-12)
    assert result.p_value == pytest.approx(0.0809, abs=1e-4)
    assert mann_whitney_u([1, 2, 3], [4, 5, 6], alternative="less").p_value == pytest.approx(
        expected / 2, rel=1e-12
    )
    assert mann_whitney_u([1, 2, 3], [4, 5, 6], alternative="greater").p_value > 0.95


def test_tie_correction_uses_the_tie_group_sizes() -> None:
    x, y = [1, 2, 2, 3], [2, 3, 3, 4]
    # Ties: value 2 three times, value 3 three times -> sum(t^3 - t) = 24 + 24.
    n1 = n2 = 4
    n = n1 + n2
    variance = n1 * n2 / 12 * ((n + 1) - 48 / (n * (n - 1)))
    u = _u_by_pairs(x, y)
    z = (abs(u - n1 * n2 / 2) - 0.5) / math.sqrt(variance)
    result = mann_whitney_u(x, y)
    assert result.u == u == 3.0
    assert result.p_value == pytest.approx(math.erfc(z / math.sqrt(2)), rel=1e-12)
    assert mann_whitney_u([5, 5, 5], [5, 5]).p_value == 1.0  # all tied: no evidence at all


def test_normal_approximation_is_close_to_the_exact_permutation_p_value() -> None:
    rng = np.random.default_rng(3)
    x, y = rng.normal(0.0, 1.0, 6).round(2), rng.normal(1.0, 1.0, 6).round(2)
    pooled = np.concatenate([x, y])
    observed = _u_by_pairs(list(x), list(y))
    exact_less = np.mean([
        _u_by_pairs(list(pooled[list(chosen)]), list(np.delete(pooled, list(chosen)))) <= observed
        for chosen in itertools.combinations(range(12), 6)
    ])  # fmt: skip
    assert mann_whitney_u(x, y, alternative="less").p_value == pytest.approx(exact_less, abs=0.02)


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
    interval = bootstrap_ratio_ci(slower, baseline, seed=11)
    assert interval.low < 1.25 < interval.high
    assert interval.low > 1.0  # and it excludes "no difference"
    assert bootstrap_ratio_ci(slower, baseline, seed=11) == interval
    median = bootstrap_ratio_ci(slower, baseline, statistic=quantile_statistic(0.5), seed=11)
    assert median.low < 1.25 < median.high


def test_bootstrap_coverage_over_many_seeded_samples() -> None:
    rng = np.random.default_rng(2024)
    covered = 0
    for trial in range(40):
        a, b = rng.exponential(2.0, 120), rng.exponential(1.0, 120)  # true ratio of means: 2
        interval = bootstrap_ratio_ci(a, b, confidence=0.9, resamples=500, seed=trial)
        covered += interval.low <= 2.0 <= interval.high
    assert covered >= 31  # nominal 90% of 40 = 36; the percentile bootstrap runs a little short


def test_rate_statistic_keeps_rows_paired_and_blocks_widen_the_interval() -> None:
    rng = np.random.default_rng(5)
    tokens = rng.integers(1, 40, 400).astype(float)
    # A slow drift makes neighbouring steps alike: blocks must see that, iid resampling does not.
    drift = np.repeat(rng.lognormal(0.0, 0.3, 20), 20)
    steps = np.column_stack([tokens, tokens * 2.0 * drift])
    other = np.column_stack([tokens, tokens * 2.0 * drift[::-1]])
    assert rate_statistic(steps[None, ...])[0] == pytest.approx(tokens.sum() / steps[:, 1].sum())
    iid = bootstrap_ratio_ci(steps, other, statistic=rate_statistic, seed=1, block=1)
    blocked = bootstrap_ratio_ci(steps, other, statistic=rate_statistic, seed=1, block=None)
    assert blocked.high - blocked.low > iid.high - iid.low
    assert block_length(400) == 20


def test_bad_inputs_raise() -> None:
    with pytest.raises(ValueError):
        mann_whitney_u([], [1.0])
    with pytest.raises(ValueError):
        mann_whitney_u([float("nan")], [1.0])
    with pytest.raises(ValueError):
        bootstrap_ratio_ci([1.0], [1.0], confidence=1.0)
    assert mean_statistic(np.array([[1.0, 3.0]]))[0] == 2.0
