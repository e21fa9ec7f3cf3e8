"""A thin clone of the loaded model (same layers, heads and ops, tiny tensors) whose forward measures each op's fixed fee."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import numpy as np


def make_fee_probe(loaded: Any, block_size: int = 16) -> Callable[[], None] | None:
    """A callable running one decode step of a thin clone of `loaded.model`, or None for other models.

    The clone keeps the layer count, head counts and code path (so the same ops run in the same
    order) but shrinks head_dim, the hidden size and the vocabulary to a few elements, so what its
    ops cost is their framework fee, not arithmetic.
    """
    from engine.model import LlamaModel
    from engine.model_runner import build_model_input
    from engine.models import synthetic_weights

    model = loaded.model
    if not isinstance(model, LlamaModel):
        return None
    config = model.config
    thin = dataclasses.replace(
        config, name=f"{config.name} (fee probe)", vocab_size=256, dim=config.n_heads * 4, hidden_dim=16
    )
    clone = LlamaModel(thin, synthetic_weights(thin, seed=0))
    clone.allocate_kv_cache(8, block_size)
    tables = np.arange(8, dtype=np.int32).reshape(1, 8)
    clone.forward(build_model_input([[1] * 32], [0], [True], tables, block_size))
    decode = build_model_input([[2]], [32], [True], tables, block_size)

    def probe() -> None:
        clone.forward(decode)

    return probe
