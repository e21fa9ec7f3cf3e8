"""Whether a sampler's draws follow the truncated, renormalised softmax: the exact probabilities of one row under top-k and top-p, and a chi-square test of observed counts against them."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

MIN_EXPECTED = 5.0  # cells expected to hold fewer draws are pooled (chi-square wants ~5 a cell)


@dataclass(frozen=True, slots=True)
class ChiSquare:
    """Pearson's statistic of draws against exact probabilities; `outside` counts draws of tokens the cut removed."""

    statistic: float
    dof: int
    p_value: float
    draws: int
    outside: int


def truncated_softmax(logits: np.ndarray, top_k: int = 0, top_p: float = 1.0) -> np.ndarray:
    """The probability of each token of one row (temperature applied): the top_k best kept (0 or >= vocab: all),
    softmax over them, then the smallest set of the most likely whose mass reaches top_p (docs/twin-spec.md:
    rank r stays iff the ranks before it sum to < top_p), renormalised. float64; ties by the lower id."""
    x = np.asarray(logits, dtype=np.float64)
    ids = np.arange(len(x))
    order = np.lexsort((ids, -x))  # best first, lower id on ties
    kept = order[:top_k] if 0 < top_k < len(x) else order
    e = np.exp(x[kept] - x[kept].max())
    p = e / e.sum()
    if top_p < 1.0:
        before = np.concatenate(([0.0], np.cumsum(p)[:-1]))
        kept, p = kept[before < top_p], p[before < top_p]
        p = p / p.sum()
    full = np.zeros(len(x))
    full[kept] = p
    return full


def chi_square(tokens: np.ndarray, probabilities: np.ndarray) -> ChiSquare:
    """Draws `tokens` against `probabilities`: the kept tokens' cells (those expected to hold fewer than
    MIN_EXPECTED draws pooled into one), Pearson's statistic and its p-value; draws outside the kept set are
    counted apart (any one is a failure: the exact probability there is 0)."""
    tokens = np.asarray(tokens, dtype=np.int64)
    n = len(tokens)
    counts = np.bincount(tokens, minlength=len(probabilities)).astype(np.float64)
    kept = probabilities > 0
    outside = int(counts[~kept].sum())
    expected, observed = probabilities[kept] * n, counts[kept]
    small = expected < MIN_EXPECTED
    if small.any():
        expected = np.append(expected[~small], expected[small].sum())
        observed = np.append(observed[~small], observed[small].sum())
    if len(expected) < 2:  # one cell: nothing to test beyond `outside`
        return ChiSquare(0.0, 0, 1.0, n, outside)
    observed = observed * (expected.sum() / max(observed.sum(), 1.0))  # the outside draws are reported apart
    statistic, p_value = stats.chisquare(observed, expected)
    return ChiSquare(float(statistic), len(expected) - 1, float(p_value), n, outside)
