"""Plain data and component protocols shared by the engine and every twin (Python or native) of its parts.

The engine is assembled from components passed in by the caller (dependency injection):
a `Model`, a `Tokenizer`, a `Scheduler`, a `KVAllocator`, a `Sampler` and a `Tracer`.
Each protocol below is shaped so that a native twin can serve it with ONE foreign call per engine
step: scheduler and allocator decisions are pure integer bookkeeping (no Python objects cross),
per-request registrations are buffered and handed over inside the step's call.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Protocol, Sequence, runtime_checkable

import numpy as np
import torch

from errors import InvalidSamplingParams

# The sampling domain shared by both twins (see SamplingParams).
MAX_COUNT = 2**31 - 1  # top_k, max_tokens: C int32 fields
MAX_SEED = 2**64 - 1  # seeds: a SplitMix64 state


@dataclass(slots=True, frozen=True)
class SamplingParams:
    """How one request draws its tokens; validated on construction (see engine/sampler.py for the spec).

    The validation is the one domain of sampling values that both twins accept: the C sampler keeps
    counts in 32-bit and seeds in 64-bit fields, so nothing outside those ranges reaches either twin.
    """

    temperature: float = 0.0  # 0 means greedy
    top_k: int = 0  # 0 disables top-k
    top_p: float = 1.0  # 1 disables top-p
    min_p: float = 0.0  # 0 disables min-p
    repetition_penalty: float = 1.0  # 1 disables; applies to prompt and output tokens
    frequency_penalty: float = 0.0  # applies to output tokens, times their count
    presence_penalty: float = 0.0  # applies to output tokens, once each
    seed: int | None = None  # None: the engine derives one from its own seed and the request id
    max_tokens: int = 64
    stop: tuple[str, ...] = ()
    ignore_eos: bool = False

    def __post_init__(self) -> None:
        def bad(name: str, value: object, allowed: str) -> InvalidSamplingParams:
            return InvalidSamplingParams(f"sampling parameter {name}={value!r} is impossible: {allowed}")

        if not (math.isfinite(self.temperature) and self.temperature >= 0):
            raise bad("temperature", self.temperature, "use a finite value >= 0 (0 = greedy)")
        if not (isinstance(self.top_k, int) and 0 <= self.top_k <= MAX_COUNT):
            raise bad("top_k", self.top_k, f"use an integer in [0, {MAX_COUNT}] (0 = off)")
        if not (math.isfinite(self.top_p) and 0 < self.top_p <= 1):
            raise bad("top_p", self.top_p, "use a value in (0, 1] (1 = off)")
        if not (math.isfinite(self.min_p) and 0 <= self.min_p <= 1):
            raise bad("min_p", self.min_p, "use a value in [0, 1] (0 = off)")
        if not (math.isfinite(self.repetition_penalty) and self.repetition_penalty > 0):
            raise bad("repetition_penalty", self.repetition_penalty, "use a finite value > 0 (1 = off)")
        for name in ("frequency_penalty", "presence_penalty"):
            value = getattr(self, name)
            if not (math.isfinite(value) and -2 <= value <= 2):
                raise bad(name, value, "use a value in [-2, 2] (0 = off)")
        if not (isinstance(self.max_tokens, int) and 1 <= self.max_tokens <= MAX_COUNT):
            raise bad("max_tokens", self.max_tokens, f"use an integer in [1, {MAX_COUNT}]")
        if self.seed is not None and not (isinstance(self.seed, int) and 0 <= self.seed <= MAX_SEED):
            raise bad("seed", self.seed, f"use an integer in [0, {MAX_SEED}] or leave it unset")
        if any(not isinstance(s, str) or not s for s in self.stop):
            raise bad("stop", self.stop, "use non-empty strings")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0

    @property
    def has_penalties(self) -> bool:
        return (
            self.repetition_penalty != 1.0 or self.frequency_penalty != 0.0 or self.presence_penalty != 0.0
        )


# ----------------------------------------------------------------------------------------------
# Scheduler: pure integer bookkeeping, so that a C twin can keep the same state in arrays.
# ----------------------------------------------------------------------------------------------


@dataclass(slots=True, frozen=True)
class NewSequence:
    """A sequence entering the scheduler: only the numbers scheduling needs."""

    seq_id: int
    num_prompt_tokens: int
    max_tokens: int
    priority: int = 0  # lower value is served first (vLLM's convention); FCFS ignores it


@dataclass(slots=True)
class StepPlan:
    """One step's decisions, the plain batch description the allocator and model runner consume.

    Order of effects within a step: the allocator first frees `frees` (finished sequences, then
    preempted ones, each sequence's blocks in reverse order), then appends `grow_num_blocks[i]` new
    blocks to sequence `grow_seq_ids[i]` in that order; then the model computes `num_tokens[i]`
    tokens of sequence `seq_ids[i]` starting at position `start_positions[i]`.
    """

    seq_ids: list[int] = field(default_factory=list)
    num_tokens: list[int] = field(default_factory=list)
    start_positions: list[int] = field(default_factory=list)
    samples: list[bool] = field(default_factory=list)  # this chunk reaches the end of the known tokens
    frees: list[int] = field(default_factory=list)
    preempted: list[int] = field(default_factory=list)
    grow_seq_ids: list[int] = field(default_factory=list)
    grow_num_blocks: list[int] = field(default_factory=list)

    @property
    def num_batched_tokens(self) -> int:
        return sum(self.num_tokens)

    def __len__(self) -> int:
        return len(self.seq_ids)


@runtime_checkable
class Scheduler(Protocol):
    """Continuous batching under a token budget; see engine/scheduler.py for the exact policy."""

    block_size: int

    def schedule(
        self, arrivals: Sequence[NewSequence], finished: Sequence[int], num_free_blocks: int
    ) -> StepPlan:
        """Admit `arrivals`, forget `finished` (their blocks go into plan.frees), and plan one step."""
        ...

    @property
    def num_waiting(self) -> int: ...

    @property
    def num_running(self) -> int: ...


# ----------------------------------------------------------------------------------------------
# KV block allocator: an index-based free list, applied once per step.
# ----------------------------------------------------------------------------------------------


@runtime_checkable
class KVAllocator(Protocol):
    """A pool of `num_blocks` blocks of `block_size` token slots; see engine/kv_alloc.py."""

    num_blocks: int
    block_size: int

    @property
    def num_free_blocks(self) -> int: ...

    def step(
        self,
        frees: Sequence[int],
        grow_seq_ids: Sequence[int],
        grow_num_blocks: Sequence[int],
        batch_seq_ids: Sequence[int],
    ) -> np.ndarray:
        """Apply one step's frees then grows; return the batch's block tables as int32
        [len(batch_seq_ids), max blocks among them], padded with -1."""
        ...

    def block_table(self, seq_id: int) -> list[int]: ...


# ----------------------------------------------------------------------------------------------
# Sampler: a whole step's logits in one call; per-request state registered (buffered) beforehand.
# ----------------------------------------------------------------------------------------------


@runtime_checkable
class Sampler(Protocol):
    """Draws one token per row of a step's logits; see engine/sampler.py for the exact spec."""

    def add(self, seq_id: int, params: SamplingParams, prompt_token_ids: Sequence[int]) -> None:
        """Register a request (seed already resolved in params.seed); takes effect at the next sample()."""
        ...

    def remove(self, seq_id: int) -> None:
        """Forget a finished request; takes effect at the next sample()."""
        ...

    def sample(self, logits: torch.Tensor, seq_ids: Sequence[int]) -> list[int]:
        """logits: float32 [len(seq_ids), vocab], contiguous. Returns one token id per row and records
        it in the request's history (penalties, and the RNG position for its next draw)."""
        ...


# ----------------------------------------------------------------------------------------------
# Model: a paged-KV forward over one step's flattened tokens.
# ----------------------------------------------------------------------------------------------


@dataclass(slots=True, frozen=True)
class ModelConfig:
    """Architecture numbers of a Llama-family model."""

    name: str
    vocab_size: int
    dim: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    hidden_dim: int
    context_length: int
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5
    tie_embeddings: bool = True

    @property
    def head_dim(self) -> int:
        return self.dim // self.n_heads


@dataclass(slots=True)
class ModelInput:
    """One step's tokens, flattened in batch order, with the paged-cache addressing they need."""

    token_ids: torch.Tensor  # int64 [T]
    positions: torch.Tensor  # int64 [T]
    query_lens: list[int]  # tokens per sequence this step (sum = T)
    context_lens: list[int]  # tokens in the cache per sequence after this step
    block_tables: torch.Tensor  # int32 [B, max_blocks], padded with -1
    slot_mapping: torch.Tensor  # int64 [T], block_id * block_size + offset for every token
    sample_indices: torch.Tensor  # int64 [S], rows of the flat tokens whose logits are returned


@runtime_checkable
class Model(Protocol):
    """A Llama forward reading and writing K/V in a paged cache it owns."""

    config: ModelConfig

    def allocate_kv_cache(self, num_blocks: int, block_size: int) -> None: ...

    def kv_bytes_per_block(self, block_size: int) -> int: ...

    def forward(self, inp: ModelInput) -> torch.Tensor:
        """Returns float32 logits [S, vocab] for inp.sample_indices."""
        ...
