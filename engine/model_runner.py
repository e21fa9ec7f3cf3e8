"""Turns one step's per-sequence tokens and block tables into the flat ModelInput the model consumes."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from .types import ModelInput


def address_tokens(
    query_lens: np.ndarray,
    start_positions: np.ndarray,
    samples: np.ndarray,
    block_tables: np.ndarray,
    block_size: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Positions, cache slots and sampled rows (int64) of a step's flattened tokens, batch order.

    Sequence i computes `query_lens[i]` tokens at positions `start_positions[i]`...; its logits row
    (the last token of the chunk) is sampled only when `samples[i]` is True. Raises ValueError when a
    token's position has no block in its sequence's table.
    """
    batch = len(query_lens)
    if not (len(start_positions) == len(samples) == batch == len(block_tables)):
        raise ValueError(
            f"batch mismatch: {batch} token counts, {len(start_positions)} start positions, "
            f"{len(samples)} sample flags, {len(block_tables)} block tables"
        )
    lens = np.asarray(query_lens, dtype=np.int64)
    starts = np.asarray(start_positions, dtype=np.int64)
    ends = np.cumsum(lens)
    total = int(ends[-1]) if batch else 0
    # Position of every flat token: its offset inside its chunk plus its sequence's start position.
    seq_of_token = np.repeat(np.arange(batch), lens)
    positions = np.arange(total, dtype=np.int64) - np.repeat(ends - lens - starts, lens)
    block_index = positions // block_size
    if total and (block_index >= block_tables.shape[1]).any():
        raise ValueError("a token's position lies past its sequence's block table: grow the table first")
    blocks = block_tables[seq_of_token, block_index].astype(np.int64)
    if (blocks < 0).any():
        raise ValueError("a token's position maps to a padding (-1) entry of its block table")
    slot_mapping = blocks * block_size + positions % block_size
    sample_indices = (ends - 1)[np.asarray(samples, dtype=bool) & (lens > 0)]
    return positions, slot_mapping, sample_indices


def build_model_input(
    step_token_ids: Sequence[Sequence[int]],
    start_positions: Sequence[int],
    samples: Sequence[bool],
    block_tables: np.ndarray,
    block_size: int,
) -> ModelInput:
    """A ModelInput from explicit per-sequence token lists (for tests and benchmarks that drive a model
    without an engine; the engine's input preparation is engine/prepare.py)."""
    query_lens = [len(ids) for ids in step_token_ids]
    tables = np.asarray(block_tables, dtype=np.int32)
    if tables.ndim != 2:
        tables = tables.reshape(len(tables), -1) if tables.size else tables.reshape(len(tables), 0)
    positions, slot_mapping, sample_indices = address_tokens(
        np.asarray(query_lens, dtype=np.int64),
        np.asarray(start_positions, dtype=np.int64),
        np.asarray(samples, dtype=bool),
        tables,
        block_size,
    )
    total = len(positions)
    flat_ids = np.fromiter((t for ids in step_token_ids for t in ids), dtype=np.int64, count=total)
    return ModelInput(
        token_ids=torch.from_numpy(flat_ids),
        positions=torch.from_numpy(positions),
        query_lens=query_lens,
        context_lens=(
            np.asarray(start_positions, dtype=np.int64) + np.asarray(query_lens, dtype=np.int64)
        ).tolist(),
        # A copy: the allocator may rewrite its table buffer while this input is still in use.
        block_tables=torch.from_numpy(np.array(tables, dtype=np.int32)),
        slot_mapping=torch.from_numpy(slot_mapping),
        sample_indices=torch.from_numpy(sample_indices),
    )
