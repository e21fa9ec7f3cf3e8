"""Turns one step's per-sequence tokens and block tables into the flat ModelInput the model consumes."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from engine.types import ModelInput


def build_model_input(
    step_token_ids: Sequence[Sequence[int]],
    start_positions: Sequence[int],
    samples: Sequence[bool],
    block_tables: np.ndarray,
    block_size: int,
) -> ModelInput:
    """Flatten the tokens computed this step (batch order) and address each one's cache slot.

    Sequence i computes `step_token_ids[i]` at positions `start_positions[i]`...; its logits row (the
    last token of the chunk) is returned only when `samples[i]` is True.
    """
    batch = len(step_token_ids)
    if not (len(start_positions) == len(samples) == batch == len(block_tables)):
        raise ValueError(
            f"batch mismatch: {batch} token lists, {len(start_positions)} start positions, "
            f"{len(samples)} sample flags, {len(block_tables)} block tables"
        )
    query_lens = [len(ids) for ids in step_token_ids]
    total = sum(query_lens)
    lens = np.asarray(query_lens, dtype=np.int64)
    starts = np.asarray(start_positions, dtype=np.int64)
    ends = np.cumsum(lens)
    # Position of every flat token: its offset inside its chunk plus its sequence's start position.
    seq_of_token = np.repeat(np.arange(batch), lens)
    positions = np.arange(total, dtype=np.int64) - np.repeat(ends - lens - starts, lens)
    tables = np.asarray(block_tables, dtype=np.int64)
    block_index = positions // block_size
    if total and (block_index >= tables.shape[1]).any():
        raise ValueError("a token's position lies past its sequence's block table: grow the table first")
    blocks = tables[seq_of_token, block_index]
    if (blocks < 0).any():
        raise ValueError("a token's position maps to a padding (-1) entry of its block table")
    slot_mapping = blocks * block_size + positions % block_size
    flat_ids = np.fromiter((t for ids in step_token_ids for t in ids), dtype=np.int64, count=total)
    sample_indices = (ends - 1)[np.asarray(samples, dtype=bool) & (lens > 0)]
    return ModelInput(
        token_ids=torch.from_numpy(flat_ids),
        positions=torch.from_numpy(positions),
        query_lens=query_lens,
        context_lens=(starts + lens).tolist(),
        # A copy: the allocator may rewrite its table buffer while this input is still in use.
        block_tables=torch.from_numpy(np.array(block_tables, dtype=np.int32)),
        slot_mapping=torch.from_numpy(slot_mapping),
        sample_indices=torch.from_numpy(sample_indices),
    )
