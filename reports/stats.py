"""Seeded bootstrap intervals for ratios and the Mann-Whitney U test, in numpy alone (no scipy)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

import numpy as np

# Bounds the resampled block held in memory at once (B x n values), so ITL-sized inputs stay cheap.
_CHUNK_VALUES = 1_000_000


@dataclass(frozen=True)
class Interval:
    """A point estimate with a two-sided confidence interval."""

    point: float
    low: float
    high: float

    def excludes(self, value: float) -> bool:
        return value < self.low or value > self.high


def bootstrap_ratio(
    before: np.ndarray,
    after: np.ndarray,
    statistic: Callable[[np.ndarray], np.ndarray],
    *,
    n_boot: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> Interval:
    """statistic(after) / statistic(before) with a percentile bootstrap interval.

    Each side is resampled with replacement on its own (rows, when a side is 2-D, stay together:
    a window's tokens and seconds move as one). `statistic` maps an array of shape (B, n, ...) to
    shape (B,), one value per resample; it is also called on the data itself, as shape (1, n, ...).
    """
    before, after = np.asarray(before, dtype=float), np.asarray(after, dtype=float)
    if len(before) == 0 or len(after) == 0:
        raise ValueError("bootstrap_ratio needs at least one sample on each side")
    rng = np.random.default_rng(seed)
    point = _safe_ratio(statistic(after[None])[0], statistic(before[None])[0])
    ratios = _safe_ratio(
        _resampled(after, statistic, n_boot, rng), _resampled(before, statistic, n_boot, rng)
    )
    ratios = ratios[np.isfinite(ratios)]
    if ratios.size == 0:
        return Interval(float(point), math.nan, math.nan)
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(ratios, [tail, 100 - tail])
    return Interval(float(point), float(low), float(high))


def block_bootstrap_ratio(
    before: list[np.ndarray],
    after: list[np.ndarray],
    statistic: Callable[[np.ndarray], float],
    *,
    n_boot: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> Interval:
    """statistic(after) / statistic(before) where each side is a list of blocks of samples.

    Whole blocks are resampled with replacement and pooled, so samples that share a block (requests
    that ran at the same time, under the same batch) move together: correlated samples do not
    pass for independent ones and the interval stays honest.
    """
    if not before or not after:
        raise ValueError("block_bootstrap_ratio needs at least one block on each side")
    rng = np.random.default_rng(seed)
    point = _safe_ratio(statistic(np.concatenate(after)), statistic(np.concatenate(before)))

    def replicates(blocks: list[np.ndarray]) -> np.ndarray:
        picks = rng.integers(0, len(blocks), size=(n_boot, len(blocks)))
        return np.array([statistic(np.concatenate([blocks[i] for i in pick])) for pick in picks])

    ratios = _safe_ratio(replicates(after), replicates(before))
    ratios = ratios[np.isfinite(ratios)]
    if ratios.size == 0:
        return Interval(float(point), math.nan, math.nan)
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(ratios, [tail, 100 - tail])
    return Interval(float(point), float(low), float(high))


def _resampled(
    data: np.ndarray, statistic: Callable[[np.ndarray], np.ndarray], n_boot: int, rng: np.random.Generator
) -> np.ndarray:
    n = len(data)
    per_chunk = max(1, _CHUNK_VALUES // max(1, n * (data.shape[1] if data.ndim > 1 else 1)))
    values = []
    for start in range(0, n_boot, per_chunk):
        count = min(per_chunk, n_boot - start)
        values.append(statistic(data[rng.integers(0, n, size=(count, n))]))
    return np.concatenate(values)


def _safe_ratio(numerator: np.ndarray | float, denominator: np.ndarray | float) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.divide(numerator, denominator)


def rank(values: np.ndarray) -> np.ndarray:
    """1-based ranks, ties given the mean of the ranks they span."""
    values = np.asarray(values, dtype=float)
    order = np.argsort(values, kind="mergesort")
    ranks = np.empty(len(values), dtype=float)
    sorted_values = values[order]
    start = 0
    while start < len(values):
        end = start
        while end + 1 < len(values) and sorted_values[end + 1] == sorted_values[start]:
            end += 1
        ranks[order[start : end + 1]] = (start + end) / 2 + 1
        start = end + 1
    return ranks


@cache
def _u_counts(n1: int, n2: int) -> tuple[int, ...]:
    """How many orderings of n1 x's and n2 y's give each U (number of (x, y) pairs with x > y)."""
    if n1 == 0 or n2 == 0:
        return (1,)
    # The largest value is an x (it beats all n2 y's) or a y (it adds nothing).
    with_x = _u_counts(n1 - 1, n2)
    with_y = _u_counts(n1, n2 - 1)
    counts = [0] * (n1 * n2 + 1)
    for u, count in enumerate(with_x):
        counts[u + n2] += count
    for u, count in enumerate(with_y):
        counts[u] += count
    return tuple(counts)


def mann_whitney_u(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """U statistic of x and its two-sided p-value (exact without ties for small samples, else normal)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    n1, n2 = len(x), len(y)
    if n1 == 0 or n2 == 0:
        raise ValueError("mann_whitney_u needs at least one value on each side")
    ranks = rank(np.concatenate([x, y]))
    u = float(ranks[:n1].sum() - n1 * (n1 + 1) / 2)
    has_ties = len(np.unique(np.concatenate([x, y]))) < n1 + n2
    if not has_ties and n1 + n2 <= 40:
        counts = np.array(_u_counts(n1, n2), dtype=float)
        total = counts.sum()
        lower = counts[: round(u) + 1].sum() / total
        upper = counts[round(u) :].sum() / total
        return u, float(min(1.0, 2 * min(lower, upper)))
    mean = n1 * n2 / 2
    _, tie_sizes = np.unique(np.concatenate([x, y]), return_counts=True)
    n = n1 + n2
    variance = n1 * n2 / 12 * ((n + 1) - float((tie_sizes**3 - tie_sizes).sum()) / (n * (n - 1)))
    if variance <= 0:
        return u, 1.0
    z = (abs(u - mean) - 0.5) / math.sqrt(variance)  # continuity correction
    return u, float(min(1.0, math.erfc(max(z, 0.0) / math.sqrt(2))))
