"""Explain a sampler divergence between the twins: recompute the row by the spec in float64 and find the boundary.

Given the exact logits row both twins saw, the request's parameters and history, and the two
picked tokens, this replays docs/twin-spec.md step by step with plain numpy and says where the two
candidates part: the greedy argmax, the top-k, top-p or min-p cut, or the draw. A divergence is a
*near-tie* only when the two tokens part at a decision within floating-point rounding
(NEAR_TIE_RELATIVE of its magnitude) and taking that decision the other way leads to the other twin's
token: two greedy logits within rounding of each other, two values tied at the top-k cut, a top-p or
min-p cut within rounding, or a draw at the running sum's step between them. A cut within rounding
elsewhere in the row explains nothing about the pair; anything else is a *logic error*.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TypedDict

import numpy as np

from ...engine.sampler import splitmix64_uniform
from ...engine.types import SamplingParams

# Sums of up to 49,152 float64 terms in another order differ by far less than this (n * eps ~ 1e-11).
NEAR_TIE_RELATIVE = 1e-9
# Tokens on each side of a cut compared with each other: ties of more than a few are not rounding.
_MAX_SWAPS = 8


class Candidate(TypedDict):
    """One of the two twins' tokens as the spec saw it: its logit, its probability after the cuts, kept or cut."""

    logit: float
    p: float | None  # None for greedy
    kept: bool


@dataclass
class Explanation:
    kind: str  # "near-tie" or "logic error"
    stage: str  # greedy, top-k, top-p, min-p, draw
    margin: float  # how far apart the deciding quantities are (absolute)
    draw: float | None
    candidates: dict[int, Candidate] = field(default_factory=dict)  # token -> its logit, p, kept
    detail: str = ""


def _penalized(
    row: np.ndarray, params: SamplingParams, prompt: Sequence[int], output: Sequence[int]
) -> np.ndarray:
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
    row: np.ndarray,
    params: SamplingParams,
    prompt: Sequence[int],
    output: Sequence[int],
    position: int,
    python_token: int,
    native_token: int,
) -> Explanation:
    """Why the Python twin picked `python_token` and the C twin `native_token` from the same row."""
    x = _penalized(row, params, prompt, output)
    pair = (python_token, native_token)
    if params.temperature == 0.0:
        return _explain_greedy(x, pair)
    return _explain_draw(x, params, position, pair)


def _explain_greedy(x: np.ndarray, pair: tuple[int, int]) -> Explanation:
    """A greedy pick (the penalized row `x`): an exact tie has one right answer, a near one is within rounding."""
    python_token, native_token = pair
    best = float(x.max())
    lowest = int(np.flatnonzero(x == best)[0])
    margin = abs(float(x[python_token] - x[native_token]))
    candidates: dict[int, Candidate] = {
        t: {"logit": float(x[t]), "p": None, "kept": t == lowest} for t in pair
    }
    a, b = float(x[python_token]), float(x[native_token])
    if a == b:  # an exact tie has one right answer: the lower id
        kind, detail = "logic error", f"exact tie: the spec picks the lower id {min(pair)}"
    else:
        kind = "near-tie" if _close(a, b) else "logic error"
        detail = f"argmax by the spec is {lowest} (logit {best:.9g})"
    return Explanation(kind, "greedy", margin, None, candidates, detail)


def _explain_draw(x: np.ndarray, params: SamplingParams, position: int, pair: tuple[int, int]) -> Explanation:
    """A sampled pick (the penalized row `x`): the spec's own draw, then whether a decision within rounding
    leads from it to the other twin's token."""
    python_token, native_token = pair
    x = x / params.temperature
    u = splitmix64_uniform(params.seed or 0, position)
    spec = _truncate(x, params)
    # exp(x - max) is proportional to every kept set's softmax (each keeps the best token): one draw weight.
    weights = np.exp(x - x.max())
    picked = _draw(spec.kept, weights, u)
    candidates: dict[int, Candidate] = {
        t: {"logit": float(x[t] * params.temperature), "p": float(spec.p[t]), "kept": bool(spec.kept[t])}
        for t in pair
    }
    if picked not in pair:
        return Explanation(
            "logic error",
            "spec",
            float("nan"),
            u,
            candidates,
            f"the spec picks {picked}, neither twin's token",
        )
    other = native_token if picked == python_token else python_token
    # A near-tie is a decision within rounding whose other outcome leads to the other twin's token: the
    # two tokens part there. A cut within rounding elsewhere in the row explains nothing about this pair.
    for stage, margin, detail, kept in spec.alternatives:
        if _draw(kept, weights, u) == other:
            return Explanation("near-tie", stage, margin, u, candidates, detail)
    edge = _draw_edge(spec.kept, weights, u, other)
    if edge is not None:
        return Explanation(
            "near-tie",
            "draw",
            edge,
            u,
            candidates,
            f"the draw falls within rounding of the running sum's step between {picked} and {other}",
        )
    stage = spec.removed_by.get(other, "draw")
    where = f"removed by {stage}" if stage != "draw" else "kept"
    return Explanation(
        "logic error",
        stage,
        spec.distance(x, other, stage),
        u,
        candidates,
        f"the spec picks {picked}; {other} is {where}, and no decision within rounding leads to it",
    )


@dataclass
class _Truncation:
    """The spec's kept set, the softmax over the top-k survivors, which stage removed each dropped
    token, and each decision within rounding with the kept set it gives the other way."""

    kept: np.ndarray
    p: np.ndarray
    removed_by: dict[int, str]
    alternatives: list[tuple[str, float, str, np.ndarray]]  # (stage, margin, detail, kept the other way)
    thresholds: dict[str, float]

    def distance(self, x: np.ndarray, token: int, stage: str) -> float:
        """How far `token` was from surviving the stage that removed it (nan for top-p and the draw)."""
        if stage == "top-k":
            return abs(float(x[token]) - self.thresholds["top-k"])
        if stage == "min-p":
            return abs(float(self.p[token]) - self.thresholds["min-p"])
        return float("nan")


def _softmax(x: np.ndarray, kept: np.ndarray) -> np.ndarray:
    e = np.where(kept, np.exp(x - x[kept].max()), 0.0)
    return e / e.sum()


def _top_k(
    x: np.ndarray, order: np.ndarray, k: int
) -> tuple[np.ndarray, list[tuple[str, float, str, np.ndarray]]]:
    """Stage 4's kept set, and the swaps across its cut of values within rounding of the k-th."""
    kept = np.zeros(len(x), dtype=bool)
    kept[order[:k]] = True
    swaps: list[tuple[str, float, str, np.ndarray]] = []
    if k == len(x):
        return kept, swaps
    last = float(x[order[k - 1]])
    inside = [int(t) for t in order[:k][::-1][:_MAX_SWAPS] if _close(float(x[t]), last)]
    outside = [int(t) for t in order[k:][:_MAX_SWAPS] if _close(float(x[t]), last)]
    for a in inside:
        for b in outside:
            if x[a] == x[b]:
                continue  # both twins divide the same logits by the same t: an exact tie has one answer, the lower id
            swapped = kept.copy()
            swapped[a], swapped[b] = False, True
            swaps.append(
                (
                    "top-k",
                    abs(float(x[a] - x[b])),
                    f"{a} and {b} tie at the top-k cut within rounding ({float(x[a]):.17g} vs {float(x[b]):.17g})",
                    swapped,
                )
            )
    return kept, swaps


def _top_p(
    p: np.ndarray, order: np.ndarray, kept: np.ndarray, top_p: float
) -> tuple[np.ndarray, list[tuple[str, float, str, np.ndarray]]]:
    """Stage 6's kept set, and the cut one rank wider or narrower where its sum is within rounding of top_p."""
    ranked = order[kept[order]]
    before = np.concatenate(([0.0], np.cumsum(p[ranked])[:-1]))
    cut = max(1, int((before < top_p).sum()))  # the first rank is always kept
    out = kept.copy()
    out[ranked[cut:]] = False
    moves: list[tuple[str, float, str, np.ndarray]] = []
    for rank, wider in ((cut, True), (cut - 1, False)):
        if 0 < rank < len(ranked) and _close(float(before[rank]), top_p):
            moved = out.copy()
            moved[ranked[rank]] = wider
            moves.append(
                (
                    "top-p",
                    abs(float(before[rank]) - top_p),
                    f"the top-p cut at {int(ranked[rank])} falls within rounding ({float(before[rank]):.17g} vs "
                    f"{top_p:.17g})",
                    moved,
                )
            )
    return out, moves


def _truncate(x: np.ndarray, params: SamplingParams, top_k_kept: np.ndarray | None = None) -> _Truncation:
    """Stages 4-7 of the spec on temperature-scaled logits (`top_k_kept` replaces stage 4's answer)."""
    n = len(x)
    order = np.lexsort((np.arange(n), -x))  # x descending, id ascending
    k = params.top_k if 0 < params.top_k < n else n
    kept, alternatives = _top_k(x, order, k)
    if top_k_kept is not None:
        kept, alternatives = top_k_kept, []
    removed_by = {int(t): "top-k" for t in np.flatnonzero(~kept)}
    thresholds = {"top-k": float(x[order[k - 1]])}
    p = _softmax(x, kept)
    if top_k_kept is None:
        # A swap at the top-k cut changes what the later stages see: run them again on it.
        alternatives = [
            (stage, margin, detail, _truncate(x, params, swapped).kept)
            for stage, margin, detail, swapped in alternatives
        ]
    if params.top_p < 1.0:
        narrowed, moves = _top_p(p, order, kept, params.top_p)
        removed_by.update({int(t): "top-p" for t in np.flatnonzero(kept & ~narrowed)})
        alternatives += moves
        kept = narrowed
    if params.min_p > 0.0:
        threshold = params.min_p * float(p.max())
        thresholds["min-p"] = threshold
        survive = p >= threshold
        near = np.flatnonzero(kept & (np.abs(p - threshold) <= NEAR_TIE_RELATIVE * max(threshold, 1e-300)))
        # The earlier stages' alternatives pass through this cut too.
        alternatives = [
            (stage, margin, detail, other & survive) for stage, margin, detail, other in alternatives
        ]
        for t in near[:_MAX_SWAPS]:
            flipped = kept & survive
            flipped[t] = not flipped[t]
            alternatives.append(
                (
                    "min-p",
                    abs(float(p[t]) - threshold),
                    f"{int(t)} sits at the min-p cut within rounding ({float(p[t]):.17g} vs {threshold:.17g})",
                    flipped,
                )
            )
        removed_by.update({int(t): "min-p" for t in np.flatnonzero(kept & ~survive)})
        kept = kept & survive
    return _Truncation(kept, p, removed_by, alternatives, thresholds)


def _draw(kept: np.ndarray, weights: np.ndarray, u: float) -> int:
    """Stage 8: the first kept id (ascending) whose running sum of p exceeds u times their total
    (`weights` proportional to p: the walk does not depend on the scale)."""
    ids = np.flatnonzero(kept)
    cum = np.cumsum(weights[ids])
    index = int(np.searchsorted(cum, u * cum[-1], side="right"))
    return int(ids[min(index, len(ids) - 1)])


def _draw_edge(kept: np.ndarray, weights: np.ndarray, u: float, other: int) -> float | None:
    """How far the draw target is from the running-sum step that would pick `other` instead, when that
    is within rounding (None otherwise, or when `other` is not kept)."""
    ids = np.flatnonzero(kept)
    index = int(np.searchsorted(ids, other))
    if index >= len(ids) or ids[index] != other:
        return None
    cum = np.cumsum(weights[ids])
    cum = cum / cum[-1]  # in units of the kept total, as the twins' running sums are
    target = u
    low = float(cum[index - 1]) if index > 0 else 0.0
    margin = min(abs(target - low), abs(target - float(cum[index])))
    return margin if margin <= NEAR_TIE_RELATIVE * max(1.0, target) else None
