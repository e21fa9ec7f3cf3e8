"""Explain a sampler divergence between the twins: recompute the row by the spec in float64 and find the boundary.

Given the exact logits row both twins saw, the request's parameters and history, and the two
picked tokens, this replays docs/twin-spec.md step by step with plain numpy and says where the two
candidates part: the greedy argmax, the top-k, top-p or min-p cut, or the draw. A divergence is a
*near-tie* when the deciding quantities differ by no more than floating-point rounding can explain
(NEAR_TIE_RELATIVE of their magnitude); anything else is a *logic error*.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from engine.sampler import splitmix64_uniform
from engine.types import SamplingParams

# Sums of up to 49,152 float64 terms in another order differ by far less than this (n * eps ~ 1e-11).
NEAR_TIE_RELATIVE = 1e-9


@dataclass
class Explanation:
    kind: str  # "near-tie" or "logic error"
    stage: str  # greedy, top-k, top-p, min-p, draw
    margin: float  # how far apart the deciding quantities are (absolute)
    draw: float | None
    candidates: dict[int, dict[str, Any]] = field(default_factory=dict)  # token -> {logit, p, kept}
    detail: str = ""


def _penalized(row: np.ndarray, params: SamplingParams, prompt: Sequence[int], output: Sequence[int]) -> np.ndarray:
    x = row.astype(np.float64)
    if params.repetition_penalty != 1.0:
        seen = np.unique(np.asarray(list(prompt) + list(output), dtype=np.int64))
        values = x[seen]
        x[seen] = np.where(values > 0, values / params.repetition_penalty, values * params.repetition_penalty)
    if output and (params.frequency_penalty or params.presence_penalty):
        tokens, counts = np.unique(np.asarray(output, dtype=np.int64), return_counts=True)
        x[tokens] -= params.frequency_penalty * counts + params.presence_penalty
    return x


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= NEAR_TIE_RELATIVE * max(1.0, abs(a), abs(b))


def explain(
    row: np.ndarray, params: SamplingParams, prompt: Sequence[int], output: Sequence[int], position: int,
    python_token: int, native_token: int,
) -> Explanation:  # fmt: skip
    """Why the Python twin picked `python_token` and the C twin `native_token` from the same row."""
    x = _penalized(row, params, prompt, output)
    pair = (python_token, native_token)
    if params.temperature == 0.0:
        best = float(x.max())
        lowest = int(np.flatnonzero(x == best)[0])
        margin = abs(float(x[python_token] - x[native_token]))
        candidates = {t: {"logit": float(x[t]), "p": None, "kept": t == lowest} for t in pair}
        a, b = float(x[python_token]), float(x[native_token])
        if a == b:  # an exact tie has one right answer: the lower id
            kind, detail = "logic error", f"exact tie: the spec picks the lower id {min(pair)}"
        else:
            kind = "near-tie" if _close(a, b) else "logic error"
            detail = f"argmax by the spec is {lowest} (logit {best:.9g})"
        return Explanation(kind, "greedy", margin, None, candidates, detail)
    x = x / params.temperature
    order = np.lexsort((np.arange(len(x)), -x))  # x descending, id ascending
    kept = np.zeros(len(x), dtype=bool)
    k = params.top_k if 0 < params.top_k < len(x) else len(x)
    kept[order[:k]] = True
    boundary: list[tuple[str, float, float]] = []  # (stage, quantity, threshold) at each cut
    if k < len(x):
        boundary.append(("top-k", float(x[order[k - 1]]), float(x[order[k]])))
    e = np.where(kept, np.exp(x - x[kept].max()), 0.0)
    p = e / e.sum()
    if params.top_p < 1.0:
        ranked = order[kept[order]]
        before = np.concatenate(([0.0], np.cumsum(p[ranked])[:-1]))
        keep_rank = before < params.top_p
        keep_rank[0] = True
        cut = int(keep_rank.sum())
        if cut < len(ranked):
            boundary.append(("top-p", float(before[cut]), params.top_p))
        dropped = ranked[~keep_rank]
        kept[dropped] = False
    if params.min_p > 0.0:
        threshold = params.min_p * float(p.max())
        near = kept & (np.abs(p - threshold) <= NEAR_TIE_RELATIVE * max(threshold, 1e-300))
        if near.any():
            boundary.append(("min-p", float(p[near][0]), threshold))
        kept &= p >= threshold
    u = splitmix64_uniform(params.seed or 0, position)
    ids = np.flatnonzero(kept)
    cum = np.cumsum(p[ids])
    target = u * cum[-1]
    candidates = {t: {"logit": float(x[t] * params.temperature), "p": float(p[t]), "kept": bool(kept[t])} for t in pair}
    for stage, value, threshold in boundary:
        if _close(value, threshold):
            return Explanation("near-tie", stage, abs(value - threshold), u, candidates,
                               f"the {stage} cut falls within rounding ({value:.17g} vs {threshold:.17g})")  # fmt: skip
    if kept[python_token] and kept[native_token]:
        # Both survive truncation: the draw decides. The running sum crossing the target between them is a near-tie.
        positions = np.searchsorted(ids, pair)
        edges = [float(cum[i]) for i in positions] + [float(cum[i - 1]) if i > 0 else 0.0 for i in positions]
        margin = min(abs(edge - target) for edge in edges)
        kind = "near-tie" if margin <= NEAR_TIE_RELATIVE * max(1.0, target) else "logic error"
        return Explanation(kind, "draw", margin, u, candidates, f"draw target {target:.17g} of total {cum[-1]:.17g}")
    return Explanation("logic error", "truncation", float("nan"), u, candidates,
                       "one twin picked a token the spec removes, and no cut is within rounding")  # fmt: skip
