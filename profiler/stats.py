"""The one statistics module: Mann-Whitney U, seeded bootstrap intervals and Wilson intervals of sample shares.

Mann-Whitney U is scipy's (`scipy.stats.mannwhitneyu`, exact for small samples without ties, else
the tie-corrected normal approximation with continuity correction). Bootstrap intervals are
percentile intervals; independent rows are resampled by `scipy.stats.bootstrap`, and rows in time
order that are not independent (requests in flight together share every step, the tokens of one
step share its duration) by a circular moving-block bootstrap, the one thing scipy does not do,
kept here small and tested against scipy's at block length 1.

A statistic maps resampled data of shape (resamples, n, ...) to one value per resample (shape
(resamples,)); rows of a 2-D sample move as a whole, so paired columns (tokens, seconds) stay paired.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import scipy.stats

Alternative = Literal["two-sided", "less", "greater"]
Statistic = Callable[..., np.ndarray]
# Bounds the resampled values held in memory at once (resamples x n x columns).
CHUNK_VALUES = 2_000_000


@dataclass(frozen=True, slots=True)
class MannWhitneyResult:
    """U of the first sample (pairs x > y, ties counting half) and its p-value."""

    u: float
    p_value: float


def mann_whitney_u(
    x: np.ndarray | Sequence[float],
    y: np.ndarray | Sequence[float],
    *,
    alternative: Alternative = "two-sided",
) -> MannWhitneyResult:
    """Mann-Whitney U test of x against y; "less" asks whether x tends to be smaller than y."""
    a, b = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if a.size == 0 or b.size == 0:
        raise ValueError("mann_whitney_u needs at least one value in each sample")
    if np.isnan(a).any() or np.isnan(b).any():
        raise ValueError("mann_whitney_u got NaN; drop missing values first")
    if np.ptp(np.concatenate([a, b])) == 0:
        # Every value tied: no evidence of any difference (scipy would divide by a zero variance).
        return MannWhitneyResult(u=a.size * b.size / 2.0, p_value=1.0)
    test = scipy.stats.mannwhitneyu(a, b, alternative=alternative, use_continuity=True, method="auto")
    return MannWhitneyResult(u=float(test.statistic), p_value=float(min(1.0, max(0.0, test.pvalue))))


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
class Interval:
    """A point estimate with a two-sided percentile bootstrap interval."""

    point: float
    low: float
    high: float
    confidence: float = 0.95
    resamples: int = 0

    def excludes(self, value: float) -> bool:
        return value < self.low or value > self.high


def mean_statistic(resampled: np.ndarray) -> np.ndarray:
    return resampled.mean(axis=1)


def quantile_statistic(q: float) -> Statistic:
    """The q-quantile (0..1, linear interpolation) of each resample of a 1-D sample."""
    return lambda resampled: np.quantile(resampled, q, axis=1)


def rate_statistic(resampled: np.ndarray) -> np.ndarray:
    """sum(column 0) / sum(column 1) of each resample of paired rows, e.g. tokens / seconds."""
    totals = resampled.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return totals[:, 0] / totals[:, 1]


def slope_statistic(resampled: np.ndarray) -> np.ndarray:
    """The weighted least-squares slope through the origin of column 0 (y) on column 1 (x), column 2 each row's
    weight: sum(w x y) / sum(w x^2) per resample. Where y's noise does not grow with x, it weights the rows of a
    larger x by their larger signal, which a ratio of sums (rate_statistic) does only in proportion to x."""
    y, x, weight = resampled[..., 0], resampled[..., 1], resampled[..., 2]
    with np.errstate(divide="ignore", invalid="ignore"):
        return (weight * x * y).sum(axis=1) / (weight * x * x).sum(axis=1)


def ratio_of(statistic: Statistic) -> Statistic:
    """statistic(first sample) / statistic(second sample), for bootstrap() over two samples."""

    def ratio(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return statistic(numerator) / statistic(denominator)

    return ratio


def difference_of(statistic: Statistic) -> Statistic:
    """statistic(first sample) - statistic(second sample), for bootstrap() over two samples."""

    def difference(first: np.ndarray, second: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return statistic(first) - statistic(second)

    return difference


def block_length(n: int) -> int:
    """Block length for time-ordered samples: sqrt(n), so neighbours that share a batch stay together."""
    return max(1, round(math.sqrt(n)))


def bootstrap(
    samples: Sequence[np.ndarray | Sequence[float]],
    statistic: Statistic,
    *,
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
    block: int | None = 1,
) -> Interval:
    """Percentile bootstrap interval of statistic(*samples), the samples resampled independently, seeded.

    block 1: rows are independent, resampled by scipy.stats.bootstrap. block > 1: rows are in time
    order and resampled as circular blocks of that many neighbours (a moving-block bootstrap); None
    picks block_length(n) per sample. Resamples whose statistic is not finite (a side with no tokens)
    are left out of the interval; when none is finite, or a sample has a single row (nothing to resample),
    the interval is NaN.
    """
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), not {confidence}")
    data = [np.asarray(sample, dtype=float) for sample in samples]
    if not data or any(len(sample) == 0 for sample in data):
        raise ValueError("bootstrap needs at least one value in each sample")
    rng = np.random.default_rng(seed)
    point = float(statistic(*(sample[None, ...] for sample in data))[0])
    if any(len(sample) < 2 for sample in data):
        return Interval(point, math.nan, math.nan, confidence, resamples)
    if block == 1:
        distribution = _scipy_distribution(data, statistic, resamples, rng)
    else:
        blocks = [block or block_length(len(sample)) for sample in data]
        distribution = _moving_block_distribution(data, statistic, resamples, blocks, rng)
    finite = distribution[np.isfinite(distribution)]
    if finite.size == 0:
        return Interval(point, math.nan, math.nan, confidence, resamples)
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(finite, [tail, 1.0 - tail])
    return Interval(point, float(low), float(high), confidence, resamples)


def bootstrap_ratio(
    numerator: np.ndarray | Sequence[float],
    denominator: np.ndarray | Sequence[float],
    statistic: Statistic = mean_statistic,
    *,
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
    block: int | None = 1,
) -> Interval:
    """statistic(numerator) / statistic(denominator) of two independent samples (e.g. two runs), with its interval
    (the options as bootstrap's)."""
    return bootstrap(
        [numerator, denominator],
        ratio_of(statistic),
        confidence=confidence,
        resamples=resamples,
        seed=seed,
        block=block,
    )


def _chunk(data: list[np.ndarray], resamples: int) -> int:
    widest = max(sample.size for sample in data)
    return max(1, min(resamples, CHUNK_VALUES // max(1, widest)))


def _scipy_distribution(
    data: list[np.ndarray], statistic: Statistic, resamples: int, rng: np.random.Generator
) -> np.ndarray:
    """scipy resamples row indices (so rows of any width stay whole); the statistic sees the rows."""

    def on_indices(*picked: np.ndarray, axis: int = -1) -> np.ndarray:
        rows = [sample[indices.astype(np.intp)] for sample, indices in zip(data, picked)]
        if picked[0].ndim == 1:  # scipy's own call on the unresampled data
            return statistic(*(row[None, ...] for row in rows))[0]
        return statistic(*rows)

    indices = tuple(np.arange(len(sample)) for sample in data)
    with warnings.catch_warnings(), np.errstate(divide="ignore", invalid="ignore"):
        warnings.simplefilter("ignore")  # a degenerate distribution is reported as such below, not warned
        result = scipy.stats.bootstrap(
            indices,
            on_indices,
            n_resamples=resamples,
            batch=_chunk(data, resamples),
            vectorized=True,
            paired=False,
            method="percentile",
            random_state=rng,
        )
    return np.asarray(result.bootstrap_distribution, dtype=float)


def moving_block_indices(n: int, count: int, block: int, rng: np.random.Generator) -> np.ndarray:
    """`count` rows of n indices, each made of circular runs of `block` consecutive indices."""
    blocks = -(-n // block)
    starts = rng.integers(0, n, size=(count, blocks, 1))
    return ((starts + np.arange(block)) % n).reshape(count, blocks * block)[:, :n]


def _moving_block_distribution(
    data: list[np.ndarray], statistic: Statistic, resamples: int, blocks: list[int], rng: np.random.Generator
) -> np.ndarray:
    chunk = _chunk(data, resamples)
    out = np.empty(resamples, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        for begin in range(0, resamples, chunk):
            count = min(resamples, begin + chunk) - begin
            rows = [
                sample[moving_block_indices(len(sample), count, block, rng)]
                for sample, block in zip(data, blocks)
            ]
            out[begin : begin + count] = statistic(*rows)
    return out


def wilson_interval(hits: float, trials: float, *, confidence: float = 0.95) -> Interval:
    """The Wilson score interval of a proportion hits/trials (e.g. the share of samples in one category).

    Unlike hits/trials +- z sqrt(p(1-p)/n) it stays inside [0, 1] and is honest at small n and near 0
    or 1: 0 of 2 samples gives [0, 0.66], not [0, 0]. With no trials it is [0, 1] around nan."""
    if trials < 0 or hits < 0 or hits > trials:
        raise ValueError(f"wilson_interval needs 0 <= hits <= trials, got {hits} of {trials}")
    if trials == 0:
        return Interval(float("nan"), 0.0, 1.0, confidence)
    z = float(scipy.stats.norm.ppf(0.5 + confidence / 2))
    p = hits / trials
    denominator = 1 + z * z / trials
    centre = (p + z * z / (2 * trials)) / denominator
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / denominator
    # The exact bounds hold the point (at p = 1 the high is 1), but their floats may miss it by an ulp: 30 of 30 gave
    # a high of 0.9999999999999999 under a point of 1.0, and a replica's share read outside its own interval.
    low = min(p, max(0.0, centre - half))
    high = max(p, min(1.0, centre + half))
    return Interval(p, low, high, confidence)


def proportions_differ(first: Interval, second: Interval) -> bool:
    """Whether two proportions' intervals do not overlap: a difference beyond sampling noise."""
    return first.high < second.low or second.high < first.low


def mean_interval(values: Sequence[float], *, confidence: float = 0.95) -> Interval | None:
    """The mean of a few repeats with its Student-t interval (repeats of a run are few and independent); None
    with fewer than two values, whose spread says nothing about the noise."""
    data = np.asarray([value for value in values if math.isfinite(value)], dtype=float)
    if len(data) < 2:
        return None
    half = float(
        scipy.stats.t.ppf(0.5 + confidence / 2, len(data) - 1) * data.std(ddof=1) / math.sqrt(len(data))
    )
    point = float(data.mean())
    return Interval(point, point - half, point + half, confidence)


def repeats_to_resolve(repeats: int, half_width: float, distance: float, *, most: int = 1000) -> int | None:
    """Repeats at which an interval of `half_width` over `repeats` would shrink (as 1/sqrt(n)) to clear a threshold
    `distance` away from its point; None when the point sits on the threshold (no count resolves it)."""
    if distance <= 0 or repeats < 1:
        return None
    needed = math.ceil(repeats * (half_width / distance) ** 2)
    return min(most, max(repeats + 1, needed))


def bootstrap_standard_error(
    sample: np.ndarray | Sequence[float],
    statistic: Statistic,
    *,
    resamples: int = 400,
    seed: int = 0,
    block: int | None = None,
) -> float:
    """The standard deviation of statistic(sample) over moving-block resamples of its rows (block None: sqrt(n)),
    for an interval whose other parts are not resampled (see `combined_interval`); NaN with under two rows."""
    data = np.asarray(sample, dtype=float)
    if len(data) < 2:
        return math.nan
    rng = np.random.default_rng(seed)
    size = block or block_length(len(data))
    distribution = _moving_block_distribution([data], statistic, resamples, [size], rng)
    finite = distribution[np.isfinite(distribution)]
    return float(finite.std(ddof=1)) if finite.size > 1 else math.nan


def combined_half_width(
    errors: np.ndarray | Sequence[float],
    freedoms: np.ndarray | Sequence[float],
    confidence: float | np.ndarray,
) -> np.ndarray:
    """Half-width of a two-sided Student-t interval for a sum of independent estimates, each with its standard
    error and degrees of freedom (inf for a known variance): the root of the summed variances times t at the
    fewest freedoms of any part that varies. That bounds Welch-Satterthwaite's freedoms from below, which
    undercover (90% for 95% in a simulation) when one part's variance is estimated from two or three values (a few
    kernel windows): their estimate is often small, and the formula then trusts the other part's freedoms.
    The last axis holds the parts; leading axes broadcast (vectorised runs)."""
    se = np.asarray(errors, dtype=float)
    df = np.broadcast_to(np.asarray(freedoms, dtype=float), se.shape)
    freedom = np.where(se > 0, df, np.inf).min(axis=-1)
    level = np.asarray(confidence, dtype=float)
    return scipy.stats.t.ppf(0.5 + level / 2, freedom) * np.sqrt((se**2).sum(axis=-1))


def spent_confidence(look: int, confidence: float = 0.95) -> float:
    """The confidence to give the look-th interval (1, 2, ...) of a run that looks after every round and stops when
    it likes: alpha spent as alpha / (look (look + 1)), which sums to alpha over all looks, so the interval where
    the run stops covers with at least `confidence` (a union bound: a confidence sequence, valid at any stop)."""
    if look < 1:
        raise ValueError(f"looks are numbered from 1, not {look}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), not {confidence}")
    return 1.0 - (1.0 - confidence) / (look * (look + 1))


def combined_interval(
    point: float,
    errors: Sequence[float],
    freedoms: Sequence[float],
    *,
    confidence: float = 0.95,
    bounds: tuple[float, float] = (0.0, 1.0),
) -> Interval:
    """point +- combined_half_width(...), clipped to `bounds` (a share stays in [0, 1]); NaN when an error is."""
    if not errors or any(not math.isfinite(error) for error in errors):
        return Interval(point, math.nan, math.nan, confidence)
    half = float(
        combined_half_width(np.asarray(errors)[None, :], np.asarray(freedoms)[None, :], confidence)[0]
    )
    return Interval(point, max(bounds[0], point - half), min(bounds[1], point + half), confidence)
