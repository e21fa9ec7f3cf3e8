"""Small, seeded statistics for noise-aware budgets: Mann-Whitney U and a bootstrap interval of a ratio."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

Alternative = Literal["two-sided", "less", "greater"]
# A statistic maps resampled data of shape (resamples, n, ...) to one value per resample.
Statistic = Callable[[np.ndarray], np.ndarray]


@dataclass(frozen=True, slots=True)
class MannWhitneyResult:
    """U of the first sample (pairs x > y, ties counting half) and its normal-approximation p-value."""

    u: float
    p_value: float
    z: float


def _normal_cdf(z: float) -> float:
    return 0.5 * math.erfc(-z / math.sqrt(2.0))


def _rank_with_ties(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Average ranks (1-based) and the size of every tie group."""
    order = np.argsort(values, kind="mergesort")
    sorted_values = values[order]
    # Group boundaries: where the sorted value changes.
    starts = np.flatnonzero(np.r_[True, sorted_values[1:] != sorted_values[:-1]])
    sizes = np.diff(np.r_[starts, len(values)])
    average_rank = starts + (sizes + 1) / 2.0  # 1-based mean rank of each group
    ranks = np.empty(len(values), dtype=float)
    ranks[order] = np.repeat(average_rank, sizes)
    return ranks, sizes


def mann_whitney_u(
    x: Sequence[float], y: Sequence[float], *, alternative: Alternative = "two-sided", continuity: bool = True
) -> MannWhitneyResult:
    """Mann-Whitney U test of x against y; "less" asks whether x tends to be smaller than y.

    The p-value uses the normal approximation with the tie-corrected variance
    n1*n2/12 * ((n+1) - sum(t^3 - t) / (n(n-1))) and, by default, a continuity correction of 1/2.
    """
    a = np.asarray(x, dtype=float)
    b = np.asarray(y, dtype=float)
    if a.size == 0 or b.size == 0:
        raise ValueError("mann_whitney_u needs at least one value in each sample")
    if np.isnan(a).any() or np.isnan(b).any():
        raise ValueError("mann_whitney_u got NaN; drop missing values first")
    n1, n2 = a.size, b.size
    n = n1 + n2
    ranks, tie_sizes = _rank_with_ties(np.concatenate([a, b]))
    u = float(ranks[:n1].sum() - n1 * (n1 + 1) / 2.0)
    mean_u = n1 * n2 / 2.0
    tie_term = float((tie_sizes.astype(float) ** 3 - tie_sizes).sum())
    variance = n1 * n2 / 12.0 * ((n + 1) - (tie_term / (n * (n - 1)) if n > 1 else 0.0))
    if variance <= 0:
        # Every value is tied: there is no evidence of any difference.
        return MannWhitneyResult(u=u, p_value=1.0, z=0.0)
    sd = math.sqrt(variance)
    correction = 0.5 if continuity else 0.0
    if alternative == "two-sided":
        z = (abs(u - mean_u) - correction) / sd
        z = max(z, 0.0)
        p = 2.0 * (1.0 - _normal_cdf(z))
    elif alternative == "greater":
        z = (u - mean_u - correction) / sd
        p = 1.0 - _normal_cdf(z)
    elif alternative == "less":
        z = (u - mean_u + correction) / sd
        p = _normal_cdf(z)
    else:
        raise ValueError(f"alternative must be 'two-sided', 'less' or 'greater', not {alternative!r}")
    return MannWhitneyResult(u=u, p_value=min(1.0, max(0.0, p)), z=z)


def smallest_p_value(n1: int, n2: int, *, alternative: Alternative = "two-sided") -> float:
    """The p-value of complete separation: no samples of these sizes can reach a smaller one."""
    if n1 == 0 or n2 == 0:
        return 1.0
    # "greater" is most significant with every x above every y; the others with every x below.
    x_above = alternative == "greater"
    x = np.arange(n1, dtype=float) + (n2 if x_above else 0)
    y = np.arange(n2, dtype=float) + (0 if x_above else n1)
    return mann_whitney_u(x, y, alternative=alternative).p_value


@dataclass(frozen=True, slots=True)
class RatioInterval:
    """A percentile bootstrap interval of statistic(numerator) / statistic(denominator)."""

    ratio: float
    low: float
    high: float
    confidence: float
    resamples: int


def quantile_statistic(q: float) -> Statistic:
    """The q-quantile (0..1, linear interpolation) of each resample of a 1-D sample."""
    return lambda resampled: np.quantile(resampled, q, axis=1)


def mean_statistic(resampled: np.ndarray) -> np.ndarray:
    return resampled.mean(axis=1)


def rate_statistic(resampled: np.ndarray) -> np.ndarray:
    """sum(column 0) / sum(column 1) of each resample of paired rows, e.g. tokens / seconds."""
    totals = resampled.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return totals[:, 0] / totals[:, 1]


def _resample_indices(n: int, count: int, block: int, rng: np.random.Generator) -> np.ndarray:
    """`count` rows of n indices: iid when block is 1, else circular blocks of `block` neighbours."""
    if block <= 1:
        return rng.integers(0, n, size=(count, n))
    blocks = -(-n // block)
    starts = rng.integers(0, n, size=(count, blocks, 1))
    return ((starts + np.arange(block)) % n).reshape(count, blocks * block)[:, :n]


def _resampled_statistic(
    sample: np.ndarray, statistic: Statistic, resamples: int, block: int, rng: np.random.Generator
) -> np.ndarray:
    n = len(sample)
    # Chunk the resamples so that a long steps table never needs a huge index matrix.
    chunk = max(1, min(resamples, 2_000_000 // max(1, n * max(1, sample[0].size))))
    out = np.empty(resamples, dtype=float)
    for begin in range(0, resamples, chunk):
        end = min(resamples, begin + chunk)
        out[begin:end] = statistic(sample[_resample_indices(n, end - begin, block, rng)])
    return out


def block_length(n: int) -> int:
    """Block length for time-ordered samples: sqrt(n), so neighbours that share a batch stay together."""
    return max(1, round(math.sqrt(n)))


def bootstrap_ratio_ci(
    numerator: Sequence[float] | np.ndarray,
    denominator: Sequence[float] | np.ndarray,
    *,
    statistic: Statistic = mean_statistic,
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
    block: int | None = 1,
) -> RatioInterval:
    """Percentile bootstrap interval of statistic(numerator) / statistic(denominator), seeded.

    The two samples are resampled independently (they are different runs). Rows of a 2-D sample
    are resampled as a whole, so paired columns (tokens, seconds) stay paired. Rows in time order
    are correlated (requests that share steps, steps that share a batch): `block` > 1 resamples
    circular blocks of that many neighbours (a moving-block bootstrap); None picks block_length(n).
    """
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), not {confidence}")
    a = np.asarray(numerator, dtype=float)
    b = np.asarray(denominator, dtype=float)
    if len(a) == 0 or len(b) == 0:
        raise ValueError("bootstrap_ratio_ci needs at least one value in each sample")
    rng = np.random.default_rng(seed)
    point = float(statistic(a[None, ...])[0] / statistic(b[None, ...])[0])
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = _resampled_statistic(
            a, statistic, resamples, block or block_length(len(a)), rng
        ) / _resampled_statistic(b, statistic, resamples, block or block_length(len(b)), rng)
    ratios = ratios[np.isfinite(ratios)]
    if ratios.size == 0:
        return RatioInterval(point, float("nan"), float("nan"), confidence, resamples)
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(ratios, [tail, 1.0 - tail])
    return RatioInterval(point, float(low), float(high), confidence, resamples)
