"""Decode steps as CUDA graphs: padded (batch, context) buckets captured once each, replayed with one launch a step.

A step where every sequence decodes one token is padded up to the nearest captured batch size and
context length (in blocks), as vLLM pads its decode batches. The padded rows decode token 0 at
position 0 into a scratch KV block that the allocator never hands out (the model allocates it past
the pool when graphs are on), so they touch nothing real and their logits are dropped. Buckets are
captured lazily, on the first step that needs them, into one shared memory pool; steps with a
prefill, a batch or context past the largest bucket, or rows left unsampled run eagerly.

`capture=False` runs the very same padded, static-shape computation eagerly: how the CPU tests check
that padding and the scratch block leave every real row's logits unchanged.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from .types import ModelInput

if TYPE_CHECKING:
    from .llama import LlamaModel

SMALL_BATCHES = (1, 2, 4)  # then every multiple of BATCH_STEP, as vLLM's capture sizes
BATCH_STEP = 8


def batch_buckets(max_batch: int) -> list[int]:
    """The padded batch sizes graphs are captured at: 1, 2, 4, then multiples of 8, the last max_batch."""
    buckets = [size for size in SMALL_BATCHES if size < max_batch]
    size = BATCH_STEP
    while size < max_batch:
        if not buckets or size > buckets[-1]:
            buckets.append(size)
        size += BATCH_STEP
    buckets.append(max_batch)
    return buckets


def block_buckets(max_blocks: int) -> list[int]:
    """Context lengths in KV blocks graphs are captured at: powers of two, the last one max_blocks."""
    buckets, size = [], 1
    while size < max_blocks:
        buckets.append(size)
        size *= 2
    buckets.append(max_blocks)
    return buckets


def bucket_for(value: int, buckets: list[int]) -> int | None:
    """The smallest bucket holding `value`, or None when it is past the largest."""
    for bucket in buckets:
        if value <= bucket:
            return bucket
    return None


@dataclass
class _Bucket:
    """Static input and output buffers of one (batch, blocks) bucket, and its graph once captured."""

    batch: int
    blocks: int
    token_ids: torch.Tensor
    positions: torch.Tensor
    slots: torch.Tensor
    tables: torch.Tensor  # int64 [batch, blocks]
    lens: torch.Tensor
    sample_indices: torch.Tensor
    logits: torch.Tensor | None = None
    graph: Any = None


@dataclass
class GraphStats:
    """What the graphs did in a run: steps replayed and run eagerly, captures and their cost."""

    replayed_steps: int = 0
    eager_steps: int = 0
    captures: int = 0
    capture_ms: float = 0.0
    buckets: list[list[int]] = field(default_factory=list)


class DecodeGraphs:
    """Runs a model's pure decode steps from captured CUDA graphs (or, with capture=False, the same padded
    computation eagerly). Install with `model.graphs = DecodeGraphs(model, ...)` before the KV cache is
    allocated; the model calls run() at the top of every forward."""

    def __init__(self, model: LlamaModel, *, max_batch: int, max_blocks: int, capture: bool = True) -> None:
        self.model = model
        self.capture = capture
        self.batch_buckets = batch_buckets(max_batch)
        self.block_buckets = block_buckets(max_blocks)
        self.stats = GraphStats()
        self._buckets: dict[tuple[int, int], _Bucket] = {}
        self._pool: Any = None
        self._scratch_block = -1
        self._block_size = 0

    def reset(self, *, scratch_block: int, block_size: int) -> None:
        """A new KV pool: graphs captured over the old one's tensors are dropped."""
        self._buckets.clear()
        self._scratch_block, self._block_size = scratch_block, block_size

    def run(self, inp: ModelInput) -> torch.Tensor | None:
        """The step's logits from its bucket's graph, or None when the step must run eagerly."""
        batch = len(inp.block_tables)
        # Every row sampled means every row has a token; as many tokens as rows then means one each.
        if not batch or len(inp.sample_indices) != batch or len(inp.token_ids) != batch:
            self.stats.eager_steps += 1
            return None
        longest = max(inp.context_lens)
        padded_batch = bucket_for(batch, self.batch_buckets)
        padded_blocks = bucket_for(-(-longest // self._block_size), self.block_buckets)
        if padded_batch is None or padded_blocks is None:
            self.stats.eager_steps += 1
            return None
        bucket = self._buckets.get((padded_batch, padded_blocks)) or self._new_bucket(
            padded_batch, padded_blocks
        )
        self._load(bucket, inp, batch)
        if bucket.graph is not None:
            bucket.graph.replay()
        else:
            bucket.logits = self._static_forward(bucket)
        self.stats.replayed_steps += 1
        assert bucket.logits is not None
        return bucket.logits[:batch]

    # -- internals ------------------------------------------------------------------------------

    def _static_forward(self, bucket: _Bucket) -> torch.Tensor:
        model = self.model
        plan = model.decode_plan(bucket.positions, bucket.slots, bucket.tables, bucket.lens)
        return model.run_layers(bucket.token_ids, plan, bucket.sample_indices)

    def _new_bucket(self, batch: int, blocks: int) -> _Bucket:
        device = self.model.device
        scratch_slot = self._scratch_block * self._block_size

        def full(shape: tuple[int, ...], value: int) -> torch.Tensor:
            return torch.full(shape, value, dtype=torch.int64, device=device)

        # Every row starts as padding: token 0 at position 0 into the scratch block, one visible slot.
        bucket = _Bucket(
            batch,
            blocks,
            token_ids=full((batch,), 0),
            positions=full((batch,), 0),
            slots=full((batch,), scratch_slot),
            tables=full((batch, blocks), self._scratch_block),
            lens=full((batch,), 1),
            sample_indices=torch.arange(batch, device=device),
        )
        if self.capture:
            started = time.perf_counter()
            self._capture(bucket)
            self.stats.captures += 1
            self.stats.capture_ms += (time.perf_counter() - started) * 1e3
        self.stats.buckets.append([batch, blocks])
        self._buckets[(batch, blocks)] = bucket
        return bucket

    def _capture(self, bucket: _Bucket) -> None:
        """Warm the bucket up on a side stream (cuBLAS picks its kernels), then capture it."""
        device = self.model.device
        side = torch.cuda.Stream(device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):
            for _ in range(2):
                self._static_forward(bucket)
        torch.cuda.current_stream(device).wait_stream(side)
        if self._pool is None:
            self._pool = torch.cuda.graph_pool_handle()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self._pool):
            bucket.logits = self._static_forward(bucket)
        bucket.graph = graph

    def _load(self, bucket: _Bucket, inp: ModelInput, batch: int) -> None:
        """The step's rows into the bucket's static buffers; rows past `batch` are reset to padding."""
        padded = bucket.batch
        tables = inp.block_tables[:, : bucket.blocks].to(torch.int64).clamp(min=0)
        host_tables = torch.full((padded, bucket.blocks), self._scratch_block, dtype=torch.int64)
        host_tables[:batch, : tables.shape[1]] = tables
        host_tables[:batch, tables.shape[1] :] = 0  # past a row's table: masked by its length
        lens = torch.ones(padded, dtype=torch.int64)
        lens[:batch] = torch.as_tensor(inp.context_lens, dtype=torch.int64)
        for static, rows, pad in (
            (bucket.token_ids, inp.token_ids, 0),
            (bucket.positions, inp.positions, 0),
            (bucket.slots, inp.slot_mapping, self._scratch_block * self._block_size),
        ):
            host = torch.full((padded,), pad, dtype=torch.int64)
            host[:batch] = rows.to(torch.int64)
            static.copy_(host)
        bucket.tables.copy_(host_tables)
        bucket.lens.copy_(lens)
