"""Input preparation: each sequence's token ids, and per step the flat tensors one forward reads (the Python twin).

The exact contract, which the C twin (native_paths/csrc/prepare.c) reproduces, is in docs/twin-spec.md.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from .model_runner import address_tokens
from .types import ModelInput, StepPlan

MAX_TOKEN_ID = 2**31 - 1  # token ids are stored as int32 by the C twin


class PythonPrepare:
    """engine.types.Prepare: token ids per sequence in Python lists, addressing with numpy."""

    def __init__(self, block_size: int) -> None:
        if not isinstance(block_size, int) or block_size < 1:
            raise ValueError(f"block_size must be an int >= 1, got {block_size!r}")
        self.block_size = block_size
        self._tokens: dict[int, list[int]] = {}
        self._adds: dict[int, list[int]] = {}  # pending, applied at the next prepare()
        self._removes: list[int] = []
        self._sampled: Sequence[int] = ()
        self._sample_rows: list[int] = []  # sequences of the last input's sampled rows

    @property
    def num_sequences(self) -> int:
        """Sequences registered as of the last prepare() (pending work not yet applied)."""
        return len(self._tokens)

    def tokens(self, seq_id: int) -> list[int]:
        """The token ids known for seq_id as of the last prepare() (prompt, then sampled tokens); for tests."""
        return list(self._tokens.get(seq_id, ()))

    def add(self, seq_id: int, prompt_token_ids: Sequence[int]) -> None:
        """Register a sequence with its prompt; takes effect at the next prepare()."""
        prompt = list(prompt_token_ids)
        if not all(isinstance(token, int) and 0 <= token <= MAX_TOKEN_ID for token in prompt):
            raise ValueError(f"sequence {seq_id}: prompt token ids must be ints in [0, 2**31)")
        self._adds[seq_id] = prompt

    def remove(self, seq_id: int) -> None:
        """Forget a finished sequence; takes effect at the next prepare()."""
        self._adds.pop(seq_id, None)
        self._removes.append(seq_id)

    def append_sampled(self, tokens: Sequence[int]) -> None:
        """The tokens drawn for the last prepared input's sampled rows; appended at the next prepare()."""
        if len(tokens) != len(self._sample_rows):
            raise ValueError(
                f"{len(tokens)} sampled tokens for the {len(self._sample_rows)} sampled rows of the last input"
            )
        self._sampled = tokens

    def prepare(self, plan: StepPlan, block_tables: np.ndarray) -> ModelInput:
        """Apply pending tokens, removals and registrations, then build this step's ModelInput."""
        batch = len(plan.seq_ids)
        if not len(plan.num_tokens) == len(plan.start_positions) == len(plan.samples) == batch:
            raise ValueError(
                f"batch mismatch: {len(plan.num_tokens)} token counts, {len(plan.start_positions)} start "
                f"positions, {len(plan.samples)} sample flags for {batch} sequences"
            )
        sampled, self._sampled = self._sampled, ()
        rows, self._sample_rows = self._sample_rows, []
        if sampled:
            if not all(isinstance(token, int) and 0 <= token <= MAX_TOKEN_ID for token in sampled):
                raise ValueError("sampled token ids must be ints in [0, 2**31)")
            for seq_id, token in zip(rows, sampled):
                self._tokens[seq_id].append(token)  # every row's sequence is known: removals come after
        self._apply_pending_registrations()
        seq_ids = plan.seq_ids.tolist()
        starts = plan.start_positions.tolist()
        counts = plan.num_tokens.tolist()
        if len(block_tables) != len(seq_ids):
            raise ValueError(f"{len(block_tables)} block tables for a batch of {len(seq_ids)}")
        flat: list[int] = []
        for seq_id, start, count in zip(seq_ids, starts, counts):
            known = self._tokens.get(seq_id)
            if known is None:
                raise KeyError(f"sequence {seq_id} was never added to input preparation")
            if start < 0 or start + count > len(known):
                raise ValueError(
                    f"sequence {seq_id}: tokens [{start}, {start + count}) asked for, {len(known)} known"
                )
            if count == 1:
                flat.append(known[start])
            else:
                flat += known[start : start + count]
        lens = plan.num_tokens
        positions, slot_mapping, sample_indices = address_tokens(
            lens, plan.start_positions, plan.samples, block_tables, self.block_size
        )
        self._sample_rows = [seq_id for seq_id, sample in zip(seq_ids, plan.samples.tolist()) if sample]
        return ModelInput(
            token_ids=torch.tensor(flat, dtype=torch.int64),
            positions=torch.from_numpy(positions),
            query_lens=counts,
            context_lens=(plan.start_positions + lens).tolist(),
            block_tables=torch.from_numpy(np.asarray(block_tables, dtype=np.int32)),
            slot_mapping=torch.from_numpy(slot_mapping),
            sample_indices=torch.from_numpy(sample_indices),
        )

    def _apply_pending_registrations(self) -> None:
        removes, self._removes = self._removes, []
        adds, self._adds = self._adds, {}
        for seq_id in removes:
            self._tokens.pop(seq_id, None)
        self._tokens.update(adds)
