"""An independent float64 reading of the sampler spec that also reports how close each decision came to flipping.

Twins that sum the softmax in a different order may legitimately disagree only where a decision
sits on a boundary; `reference_draw` returns the smallest relative distance of any decision to its
boundary, so a test can tell such a near-tie from a real discrepancy.
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np

from infer_prof.engine.types import SamplingParams

MASK64 = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15
NEAR_TIE = 1e-9  # relative; the twins' sums differ by ~1e-15, so anything closer is a tie


def uniform(seed: int, position: int) -> float:
    """SplitMix64 keyed by (seed, position), as docs/twin-spec.md writes it."""
    z = ((seed & MASK64) + (position + 1) * GOLDEN) & MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    z ^= z >> 31
    return (z >> 11) * 2.0**-53


def seed_for(u: float, position: int = 0) -> int:
    """The seed whose draw at `position` is exactly `u` (a multiple of 2**-53): SplitMix64 inverted."""

    def undo_xorshift(y: int, shift: int) -> int:
        x = y
        for _ in range(64 // shift + 1):
            x = y ^ (x >> shift)
        return x

    z = int(u * 2**53) << 11
    z = undo_xorshift(z, 31)
    z = undo_xorshift((z * pow(0x94D049BB133111EB, -1, 1 << 64)) & MASK64, 27)
    z = undo_xorshift((z * pow(0xBF58476D1CE4E5B9, -1, 1 << 64)) & MASK64, 30)
    return (z - (position + 1) * GOLDEN) & MASK64


def penalized(row: np.ndarray, params: SamplingParams, prompt: list[int], output: list[int]) -> np.ndarray:
    """Stage 1 in float64."""
    x = row.astype(np.float64)
    r = params.repetition_penalty
    if r != 1.0:
        for t in set(prompt) | set(output):
            x[t] = x[t] / r if x[t] > 0 else x[t] * r
    if params.frequency_penalty != 0.0 or params.presence_penalty != 0.0:
        for t, c in Counter(output).items():
            x[t] -= params.frequency_penalty * c + params.presence_penalty
    return x


def reference_draw(x: np.ndarray, params: SamplingParams, u: float) -> tuple[int, float]:
    """(token, margin) for stage-1 values x; margin is inf for decisions that involve no rounding."""
    vocab = len(x)
    ids = np.arange(vocab)
    if params.temperature == 0.0:
        return int(np.argmax(x)), math.inf
    y = x / params.temperature
    kept = ids
    if 0 < params.top_k < vocab:
        kept = np.lexsort((ids, -y))[: params.top_k]
        kept.sort()
    m = y[kept].max()
    e = np.exp(y[kept] - m)
    p = e / e.sum()
    margin = math.inf
    keep = np.ones(len(kept), dtype=bool)
    if params.top_p < 1.0:
        order = np.lexsort((kept, -p))
        before = np.concatenate(([0.0], np.cumsum(p[order])[:-1]))
        keep[order] = before < params.top_p
        margin = min(margin, float(np.min(np.abs(before - params.top_p))))
        ranked = p[order]
        if len(ranked) > 1:  # nearly equal p may swap ranks
            margin = min(margin, float(np.min(np.abs(np.diff(ranked)) / ranked[:-1])))
    if params.min_p > 0.0:
        floor = params.min_p * p.max()
        keep &= p >= floor
        margin = min(margin, float(np.min(np.abs(p - floor)) / p.max()))
    chosen, probabilities = kept[keep], p[keep]
    cum = np.cumsum(probabilities)
    target = u * cum[-1]
    margin = min(margin, float(np.min(np.abs(cum - target)) / cum[-1]))
    above = np.nonzero(cum > target)[0]
    return int(chosen[above[0]] if len(above) else chosen[-1]), margin
