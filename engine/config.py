"""The engine's options as plain values, validated on construction, and the Python components they describe."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import EngineConfigError

if (
    TYPE_CHECKING
):  # the components import torch; this module stays light so option tables can read its defaults
    from .kv_alloc import PythonKVAllocator
    from .sampler import PythonSampler
    from .scheduler import PythonScheduler
    from .types import Model

# The model every face loads when none is named (engine.loader finds or downloads it).
DEFAULT_MODEL = "smollm2-135m"
# KV memory used when neither kv_blocks nor kv_memory_bytes is given (then capped to what
# max_batch full-length sequences could ever use).
DEFAULT_KV_MEMORY_BYTES = 256 * 2**20


def _bad(name: str, value: object, allowed: str) -> EngineConfigError:
    return EngineConfigError(f"engine option {name} = {value!r} is impossible: {allowed}")


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(slots=True)
class EngineConfig:
    """How the engine batches and how big its KV pool is; these defaults are every face's defaults
    (profiler.session.options reads them)."""

    block_size: int = 16  # token slots per KV block
    kv_blocks: int | None = None  # the pool size in blocks ...
    kv_memory_bytes: int | None = None  # ... or in bytes (give at most one of the two)
    max_batch: int = 32  # most sequences running at once
    max_batched_tokens: int = 512  # token budget of one step (prefill chunks + decodes)
    policy: str = "fcfs"  # "fcfs" or "priority"
    seed: int = 0  # requests without a seed get one derived from this and their request id
    max_model_len: int | None = None  # prompt + output tokens per request; None: the model's context

    def __post_init__(self) -> None:
        for name in ("block_size", "max_batch", "max_batched_tokens"):
            value = getattr(self, name)
            if not (_is_int(value) and value >= 1):
                raise _bad(name, value, "use an integer >= 1")
        if self.kv_blocks is not None and self.kv_memory_bytes is not None:
            raise EngineConfigError(
                "engine options kv_blocks and kv_memory_bytes both size the KV pool: give one of them"
            )
        if self.kv_blocks is not None and not (_is_int(self.kv_blocks) and self.kv_blocks >= 1):
            raise _bad("kv_blocks", self.kv_blocks, "use an integer >= 1")
        if self.kv_memory_bytes is not None and not (
            _is_int(self.kv_memory_bytes) and self.kv_memory_bytes >= 1
        ):
            raise _bad("kv_memory_bytes", self.kv_memory_bytes, "use a positive number of bytes")
        from .types import SCHEDULING_POLICIES

        if self.policy not in SCHEDULING_POLICIES:
            raise _bad("policy", self.policy, f"use one of {', '.join(SCHEDULING_POLICIES)}")
        if not _is_int(self.seed):
            raise _bad("seed", self.seed, "use an integer")
        if self.max_model_len is not None and not (_is_int(self.max_model_len) and self.max_model_len >= 2):
            raise _bad("max_model_len", self.max_model_len, "use an integer >= 2")

    def resolve_max_model_len(self, context_length: int) -> int:
        """max_model_len, defaulting to the model's context; it may not exceed that context."""
        if self.max_model_len is None:
            return context_length
        if self.max_model_len > context_length:
            allowed = f"the model's context length is {context_length}; use at most that"
            raise _bad("max_model_len", self.max_model_len, allowed)
        return self.max_model_len

    def resolve_num_blocks(self, bytes_per_block: int, max_model_len: int) -> int:
        """The KV pool size in blocks: given, or from a memory budget (the default one capped to need)."""
        from .kv_alloc import blocks_for_tokens, num_blocks_for_memory

        if self.kv_blocks is not None:
            return self.kv_blocks
        if self.kv_memory_bytes is not None:
            blocks = num_blocks_for_memory(self.kv_memory_bytes, bytes_per_block)
            if blocks < 1:
                allowed = f"one KV block of {self.block_size} tokens takes {bytes_per_block} bytes; give at least that"
                raise _bad("kv_memory_bytes", self.kv_memory_bytes, allowed)
            return blocks
        needed = self.max_batch * blocks_for_tokens(max_model_len, self.block_size)
        return max(1, min(num_blocks_for_memory(DEFAULT_KV_MEMORY_BYTES, bytes_per_block), needed))


def pool_blocks_for(config: EngineConfig, model: Model) -> int:
    """The KV pool size in blocks that `config` gives `model` (its context and bytes per block)."""
    max_model_len = config.resolve_max_model_len(model.config.context_length)
    return config.resolve_num_blocks(model.kv_bytes_per_block(config.block_size), max_model_len)


def python_components(
    config: EngineConfig, model: Model
) -> tuple[PythonScheduler, PythonKVAllocator, PythonSampler]:
    """The Python scheduler, KV block pool and sampler that `config` describes, sized for `model`."""
    from .kv_alloc import PythonKVAllocator
    from .sampler import PythonSampler
    from .scheduler import PythonScheduler

    num_blocks = pool_blocks_for(config, model)
    scheduler = PythonScheduler(config.block_size, config.max_batch, config.max_batched_tokens, config.policy)
    return scheduler, PythonKVAllocator(num_blocks, config.block_size), PythonSampler()
