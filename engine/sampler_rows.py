"""The Python twin of np_sampler_draw_rows: another engine's batch (temperatures applied) drawn by the spec, row by row, each from its own seed."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from .sampler import MASK64, PythonSampler
from .types import SamplingParams


def draw_rows(
    logits: torch.Tensor,
    top_k: Sequence[int] | None,
    top_p: Sequence[float] | None,
    seeds: Sequence[int],
) -> list[int]:
    """One token per row of float32 `logits` [rows, vocab], as docs/twin-spec.md's stages 4-8 at temperature 1.

    top_k[row]: 0, or the vocabulary size or more, keeps every token (vLLM's "none" is the vocabulary size);
    top_p[row]: 1 keeps every token, and is read as the float32 the C twin reads; seeds[row] starts its
    SplitMix64 stream at position 0 (its 64 bits: an int64 -1 is the uint64 2**64 - 1). None for top_k or top_p turns it off for every row.
    """
    if logits.dim() != 2 or logits.dtype != torch.float32:
        raise ValueError(f"logits must be float32 [rows, vocab], got {logits.dtype} {tuple(logits.shape)}")
    rows, vocab = logits.shape
    if len(seeds) != rows:
        raise ValueError(f"{len(seeds)} seeds for {rows} rows")
    sampler = PythonSampler()
    for row in range(rows):
        k = 0 if top_k is None else int(top_k[row])
        p = 1.0 if top_p is None else float(torch.tensor(float(top_p[row]), dtype=torch.float32))
        params = SamplingParams(
            temperature=1.0, top_k=0 if k >= vocab else k, top_p=p, seed=int(seeds[row]) & MASK64
        )
        sampler.add(row, params, ())
    return sampler.sample(logits, list(range(rows)))
