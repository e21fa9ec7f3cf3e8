"""Plain data and component protocols shared by the engine and every twin (Python or native) of its parts.

The engine is assembled from components passed in by the caller (dependency injection):
a `Model`, a `TextTokenizer`, a `Scheduler`, a `KVAllocator`, a `Prepare` (input preparation), a
`Sampler` and a `Tracer`. Each protocol below is shaped so that a native twin can serve it with ONE
foreign call per engine step: scheduler and allocator decisions are pure integer bookkeeping handed
over as arrays (a native twin's are views of memory it reuses step to step, so no per-sequence
Python object crosses), per-request registrations are buffered and handed over inside the step's call.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np
import torch

from ..errors import InvalidSamplingParams

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
        return self.repetition_penalty != 1.0 or self.frequency_penalty != 0.0 or self.presence_penalty != 0.0


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


def _readonly(array: np.ndarray) -> np.ndarray:
    array.flags.writeable = False
    return array


EMPTY_IDS = _readonly(np.empty(0, dtype=np.int64))
EMPTY_FLAGS = _readonly(np.empty(0, dtype=np.bool_))
PLAN_ARRAYS = (
    "seq_ids",
    "num_tokens",
    "start_positions",
    "samples",
    "frees",
    "preempted",
    "grow_seq_ids",
    "grow_num_blocks",
)
PLAN_COUNTS = (
    "num_waiting",
    "num_running",
    "first_admitted",
    "prefill_tokens",
    "decode_tokens",
    "num_cached_tokens",
)


@dataclass(slots=True, eq=False)
class StepPlan:
    """One step's decisions as arrays (int64; `samples` bool), the batch description the allocator,
    input preparation and the engine consume without walking Python lists.

    Order of effects within a step: the allocator first frees `frees` (finished sequences, then
    preempted ones, each sequence's blocks in reverse order), then appends `grow_num_blocks[i]` new
    blocks to sequence `grow_seq_ids[i]` in that order; then the model computes `num_tokens[i]`
    tokens of sequence `seq_ids[i]` starting at position `start_positions[i]`.

    A plan is valid until its scheduler's next schedule() call: the C twin hands out views of memory
    it rewrites in place each step (copy() keeps one). The counts describe the state after the step.
    """

    seq_ids: np.ndarray = field(default_factory=lambda: EMPTY_IDS)
    num_tokens: np.ndarray = field(default_factory=lambda: EMPTY_IDS)
    start_positions: np.ndarray = field(default_factory=lambda: EMPTY_IDS)
    samples: np.ndarray = field(
        default_factory=lambda: EMPTY_FLAGS
    )  # the chunk reaches the end of the known tokens
    frees: np.ndarray = field(default_factory=lambda: EMPTY_IDS)
    preempted: np.ndarray = field(default_factory=lambda: EMPTY_IDS)
    grow_seq_ids: np.ndarray = field(default_factory=lambda: EMPTY_IDS)
    grow_num_blocks: np.ndarray = field(default_factory=lambda: EMPTY_IDS)
    num_waiting: int = 0
    num_running: int = 0
    first_admitted: int = 0  # batch entries from here on were admitted from waiting in this step
    prefill_tokens: int = 0  # tokens of chunks that are not a single decode token past the prompt
    decode_tokens: int = 0  # sequences computing one token past their prompt
    num_cached_tokens: int = 0  # tokens in the KV cache over every sequence holding blocks

    @property
    def num_batched_tokens(self) -> int:
        return int(self.num_tokens.sum())

    def __len__(self) -> int:
        return len(self.seq_ids)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, StepPlan):
            return NotImplemented
        return all(np.array_equal(getattr(self, name), getattr(other, name)) for name in PLAN_ARRAYS) and all(
            getattr(self, name) == getattr(other, name) for name in PLAN_COUNTS
        )

    def copy(self) -> StepPlan:
        """A plan that owns its arrays (a native plan's views change at the next step)."""
        return StepPlan(
            seq_ids=np.array(self.seq_ids),
            num_tokens=np.array(self.num_tokens),
            start_positions=np.array(self.start_positions),
            samples=np.array(self.samples),
            frees=np.array(self.frees),
            preempted=np.array(self.preempted),
            grow_seq_ids=np.array(self.grow_seq_ids),
            grow_num_blocks=np.array(self.grow_num_blocks),
            num_waiting=int(self.num_waiting),
            num_running=int(self.num_running),
            first_admitted=int(self.first_admitted),
            prefill_tokens=int(self.prefill_tokens),
            decode_tokens=int(self.decode_tokens),
            num_cached_tokens=int(self.num_cached_tokens),
        )

    def as_lists(self) -> dict[str, list[int] | list[bool] | int]:
        """Every field as plain Python values (for messages and comparisons in tests)."""
        return {
            **{name: np.asarray(getattr(self, name)).tolist() for name in PLAN_ARRAYS},
            **{name: int(getattr(self, name)) for name in PLAN_COUNTS},
        }


SCHEDULING_POLICIES = ("fcfs", "priority")  # engine/request_queue.py has one class each
MAX_SCHEDULER_COUNT = (
    2**62
)  # block size, batch and token budget: far from int64 overflow in the C twin's counters


def check_scheduler_config(block_size: int, max_batch: int, max_batched_tokens: int, policy: str) -> None:
    """Both scheduler twins' constructor checks, so that they refuse the same arguments with the same words."""
    for name, value in (
        ("block_size", block_size),
        ("max_batch", max_batch),
        ("max_batched_tokens", max_batched_tokens),
    ):
        if not isinstance(value, int) or not 1 <= value <= MAX_SCHEDULER_COUNT:
            raise ValueError(
                f"block_size={block_size}, max_batch={max_batch} and "
                f"max_batched_tokens={max_batched_tokens} must all be >= 1 ({name} is not)"
            )
    if policy not in SCHEDULING_POLICIES:
        raise ValueError(f"unknown scheduling policy {policy!r}: use one of {', '.join(SCHEDULING_POLICIES)}")


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
        frees: Sequence[int] | np.ndarray,
        grow_seq_ids: Sequence[int] | np.ndarray,
        grow_num_blocks: Sequence[int] | np.ndarray,
        batch_seq_ids: Sequence[int] | np.ndarray,
    ) -> np.ndarray:
        """Apply one step's frees then grows; return the batch's block tables as int32
        [len(batch_seq_ids), max blocks among them], padded with -1 (rows may be strided; valid until
        the next step)."""
        ...

    def block_table(self, seq_id: int) -> list[int]: ...


# ----------------------------------------------------------------------------------------------
# Input preparation: the flat tensors one forward reads, from the plan and the block tables.
# ----------------------------------------------------------------------------------------------


@runtime_checkable
class Prepare(Protocol):
    """Keeps each sequence's token ids and builds a step's ModelInput in one call; see engine/prepare.py."""

    block_size: int

    def add(self, seq_id: int, prompt_token_ids: Sequence[int]) -> None:
        """Register a sequence with its prompt; takes effect at the next prepare()."""
        ...

    def remove(self, seq_id: int) -> None:
        """Forget a finished sequence; takes effect at the next prepare()."""
        ...

    def append_sampled(self, tokens: Sequence[int]) -> None:
        """The tokens drawn for the last prepared input's sampled rows, in row order; appended to their
        sequences at the next prepare(), before that call's removals and registrations."""
        ...

    def prepare(self, plan: StepPlan, block_tables: np.ndarray) -> ModelInput:
        """The step's ModelInput (valid until the next call): tokens, positions, cache slots, tables,
        and the rows to sample."""
        ...


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
# Tokenizer: text <-> token ids, on the submitting thread (encode) and the engine thread (decode).
# ----------------------------------------------------------------------------------------------


class TextTokenizer(Protocol):
    """What the engine and its detokenizer call: engine.tokenizer.Tokenizer, or a test's stand-in."""

    @property
    def stop_token_ids(self) -> AbstractSet[int]: ...

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]: ...

    def encode_chat(self, user_text: str) -> list[int]:
        """Ids of a one-turn chat prompt asking `user_text`, ending with the assistant's turn header."""
        ...

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str: ...


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


class ModelInput:
    """One step's tokens, flattened in batch order, with the paged-cache addressing they need.

        token_ids       int64 [T]
        positions       int64 [T]
        query_lens      tokens per sequence this step (sum = T); a list[int] when read
        context_lens    tokens in the cache per sequence after this step; a list[int] when read
        block_tables    int32 [B, max_blocks], padded with -1 (rows may be strided)
        slot_mapping    int64 [T], block_id * block_size + offset for every token
        sample_indices  int64 [S], rows of the flat tokens whose logits are returned

    Input preparation hands over arrays (views of buffers it reuses); query_lens and context_lens
    become lists only when the model reads them, since its per-sequence planning is Python.
    """

    __slots__ = (
        "token_ids",
        "positions",
        "block_tables",
        "slot_mapping",
        "sample_indices",
        "_query_lens",
        "_context_lens",
    )
    _query_lens: Sequence[int] | np.ndarray  # a list once read
    _context_lens: Sequence[int] | np.ndarray

    def __init__(
        self,
        token_ids: torch.Tensor,
        positions: torch.Tensor,
        query_lens: Sequence[int] | np.ndarray,
        context_lens: Sequence[int] | np.ndarray,
        block_tables: torch.Tensor,
        slot_mapping: torch.Tensor,
        sample_indices: torch.Tensor,
    ) -> None:
        self.token_ids = token_ids
        self.positions = positions
        self._query_lens = query_lens
        self._context_lens = context_lens
        self.block_tables = block_tables
        self.slot_mapping = slot_mapping
        self.sample_indices = sample_indices

    @property
    def query_lens(self) -> list[int]:
        lens = self._query_lens
        if type(lens) is list:
            return lens
        self._query_lens = listed = lens.tolist() if hasattr(lens, "tolist") else list(lens)
        return listed

    @property
    def context_lens(self) -> list[int]:
        lens = self._context_lens
        if type(lens) is list:
            return lens
        self._context_lens = listed = lens.tolist() if hasattr(lens, "tolist") else list(lens)
        return listed

    def same_as(self, other: ModelInput) -> bool:
        """Equal tensors and lengths, field by field (the twins' equivalence check)."""
        tensors = ("token_ids", "positions", "block_tables", "slot_mapping", "sample_indices")
        return (
            all(torch.equal(getattr(self, name), getattr(other, name)) for name in tensors)
            and self.query_lens == other.query_lens
            and self.context_lens == other.context_lens
        )

    def as_lists(self) -> dict[str, list]:
        """Every field as plain Python lists (for messages in tests and golden)."""
        names = ("token_ids", "positions", "block_tables", "slot_mapping", "sample_indices")
        return {
            **{name: getattr(self, name).tolist() for name in names},
            "query_lens": self.query_lens,
            "context_lens": self.context_lens,
        }


@runtime_checkable
class Model(Protocol):
    """A Llama forward reading and writing K/V in a paged cache it owns."""

    config: ModelConfig

    def allocate_kv_cache(self, num_blocks: int, block_size: int) -> None: ...

    def kv_bytes_per_block(self, block_size: int) -> int: ...

    def forward(self, inp: ModelInput) -> torch.Tensor:
        """Returns float32 logits [S, vocab] for inp.sample_indices."""
        ...


class BlockKernel(Protocol):
    """Runs a block-quantized linear (engine.blockquant): the C kernel in native_paths, or the Python twin."""

    def __call__(
        self, packed: torch.Tensor, bits: int, out: int, width: int, x: torch.Tensor
    ) -> torch.Tensor:
        """y float32 [rows, out] for x [rows, width] and the [out, width] matrix `packed` holds in `bits` bits."""
        ...


class DecodeAttentionKernel(Protocol):
    """Runs a decode step's attention against a layer's paged KV pool in place (native_paths.decode_attention);
    engine.llama's gather and SDPA are its Python twin."""

    def __call__(
        self, q: torch.Tensor, pool: torch.Tensor, tables: torch.Tensor, lens: torch.Tensor, n_kv_heads: int
    ) -> torch.Tensor:
        """out float32 [B, n_heads * head_dim] for q [B, n_heads * head_dim], pool [blocks, block_size, 2,
        n_kv_heads, head_dim], tables int64 [B, width] and lens int64 [B]."""
        ...


@dataclass(frozen=True, slots=True)
class PackedLayer:
    """One layer of a q4_1 model as a native decode step reads it: the norms' float32 weights [dim], the four
    4-bit matrices as engine.blockquant packs them, and the layer's KV pool."""

    attn_norm: torch.Tensor
    ffn_norm: torch.Tensor
    qkv: torch.Tensor
    attn_out: torch.Tensor
    gate_up: torch.Tensor
    down: torch.Tensor
    pool: torch.Tensor  # float32 [num_blocks, block_size, 2, n_kv_heads, head_dim]


class DecodeLayers(Protocol):
    """A model's layers bound to native code (DecodeLayersKernel): runs them all for one decode step."""

    def __call__(
        self,
        x: torch.Tensor,
        rope: torch.Tensor,
        slots: torch.Tensor,
        tables: torch.Tensor,
        lens: torch.Tensor,
    ) -> None:
        """Updates x float32 [B, dim] in place through every layer and writes each row's key and value at its
        slot (int64 [B]); rope float32 [B, 1, head_dim // 2, 2] the (cos, sin) pairs of the rows' positions,
        tables int64 [B, width] and lens int64 [B] as DecodeAttentionKernel reads them."""
        ...


class DecodeLayersKernel(Protocol):
    """Binds a q4_1 model's layers for native_paths.decode_layers, which runs a decode step's layers in one
    call; engine.llama's run_layers, op by op, is its Python twin."""

    def __call__(self, config: ModelConfig, layers: Sequence[PackedLayer]) -> DecodeLayers: ...


@dataclass(frozen=True, slots=True)
class ModelKernels:
    """Native kernels a model may run instead of its torch code; None: the torch code (the Python twin)."""

    block_linear: BlockKernel | None = None
    decode_attention: DecodeAttentionKernel | None = None
    decode_layers: DecodeLayersKernel | None = None  # q4_1's all-decode steps, whole
