"""The KV-cache block pool: fixed-size blocks on an O(1) index-based free list, and per-sequence block tables."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def num_blocks_for_memory(kv_memory_bytes: int, bytes_per_block: int) -> int:
    """How many whole blocks of `bytes_per_block` fit in `kv_memory_bytes`."""
    if bytes_per_block <= 0:
        raise ValueError(f"bytes_per_block must be > 0, got {bytes_per_block}")
    return max(0, kv_memory_bytes) // bytes_per_block


def blocks_for_tokens(num_tokens: int, block_size: int) -> int:
    """Blocks needed to hold `num_tokens` token slots."""
    return -(-num_tokens // block_size)


class PythonKVAllocator:
    """`num_blocks` blocks of `block_size` token slots, allocated and freed per engine step (docs/twin-spec.md).

    The free list is doubly linked through two int lists indexed by block id, with a head sentinel
    (`num_blocks`) and a tail sentinel (`num_blocks + 1`), so that popping the head, appending at the
    tail and unlinking any free block are each a few index writes. Plain lists rather than numpy
    arrays because scalar indexing of a list is several times cheaper from Python.
    """

    def __init__(self, num_blocks: int, block_size: int) -> None:
        if num_blocks < 1:
            raise ValueError(f"num_blocks must be >= 1, got {num_blocks}")
        if block_size < 1:
            raise ValueError(f"block_size must be >= 1, got {block_size}")
        self.num_blocks = num_blocks
        self.block_size = block_size
        self._head = num_blocks
        self._tail = num_blocks + 1
        # Initial list head -> 0 -> 1 -> ... -> N-1 -> tail.
        self._next = list(range(1, num_blocks + 1)) + [0, -1]
        self._next[num_blocks - 1] = self._tail
        self._prev = [self._head] + list(range(num_blocks - 1)) + [-1, num_blocks - 1]
        self._ref_count = [0] * num_blocks
        self._num_free = num_blocks
        self._tables: dict[int, list[int]] = {}

    # -- reporting ------------------------------------------------------------------------------

    @property
    def num_free_blocks(self) -> int:
        return self._num_free

    @property
    def num_used_blocks(self) -> int:
        return self.num_blocks - self._num_free

    @property
    def utilization(self) -> float:
        """Fraction of blocks held by some sequence."""
        return self.num_used_blocks / self.num_blocks

    @property
    def num_sequences(self) -> int:
        return len(self._tables)

    def block_table(self, seq_id: int) -> list[int]:
        return list(self._tables.get(seq_id, ()))

    def ref_count(self, block: int) -> int:
        return self._ref_count[block]

    def free_block_ids(self) -> list[int]:
        """The free list from head to tail (O(N); for tests and debugging)."""
        blocks = []
        block = self._next[self._head]
        while block != self._tail:
            blocks.append(block)
            block = self._next[block]
        return blocks

    # -- free-list primitives, O(1) each -----------------------------------------------------

    def _unlink(self, block: int) -> None:
        prev, nxt = self._prev[block], self._next[block]
        self._next[prev] = nxt
        self._prev[nxt] = prev

    def pop(self) -> int:
        """Take the block at the head of the free list."""
        block = self._next[self._head]
        if block == self._tail:
            raise RuntimeError("KV block pool exhausted: the scheduler planned more blocks than are free")
        self._unlink(block)
        self._ref_count[block] = 1
        self._num_free -= 1
        return block

    def release(self, block: int) -> None:
        """Drop one reference to `block`; at zero it goes to the tail of the free list."""
        if self._ref_count[block] <= 0:
            raise RuntimeError(f"KV block {block} freed twice")
        self._ref_count[block] -= 1
        if self._ref_count[block] == 0:
            last = self._prev[self._tail]
            self._next[last] = block
            self._prev[block] = last
            self._next[block] = self._tail
            self._prev[self._tail] = block
            self._num_free += 1

    def remove(self, block: int) -> None:
        """Take a specific free block out of the free list (e.g. to reuse cached contents)."""
        if self._ref_count[block] != 0:
            raise RuntimeError(f"KV block {block} is not free")
        self._unlink(block)
        self._ref_count[block] = 1
        self._num_free -= 1

    # -- per-sequence operations ---------------------------------------------------------------

    def allocate(self, seq_id: int, num_blocks: int) -> list[int]:
        """Append `num_blocks` fresh blocks to the table of `seq_id`; all or nothing."""
        if num_blocks < 0:
            raise ValueError(f"cannot allocate {num_blocks} blocks")
        if num_blocks > self._num_free:
            raise RuntimeError(
                f"KV block pool exhausted: sequence {seq_id} asked for {num_blocks} blocks, "
                f"{self._num_free} free (a scheduler bug)"
            )
        table = self._tables.setdefault(seq_id, [])
        new_blocks = [self.pop() for _ in range(num_blocks)]
        table.extend(new_blocks)
        return new_blocks

    def free(self, seq_id: int) -> None:
        """Give back every block of `seq_id`, last allocated first; unknown ids are a no-op."""
        table = self._tables.pop(seq_id, None)
        if table is None:
            return
        for block in reversed(table):
            self.release(block)

    def step(
        self,
        frees: Sequence[int] | np.ndarray,
        grow_seq_ids: Sequence[int] | np.ndarray,
        grow_num_blocks: Sequence[int] | np.ndarray,
        batch_seq_ids: Sequence[int] | np.ndarray,
    ) -> np.ndarray:
        """Apply one step's frees, then its grows; return the batch's block tables (int32, padded with -1)."""
        frees, grow_seq_ids, grow_num_blocks, batch_seq_ids = (
            _as_list(values) for values in (frees, grow_seq_ids, grow_num_blocks, batch_seq_ids)
        )
        for seq_id in frees:
            self.free(seq_id)
        # Check the whole grow phase up front so that a bad plan changes no table at all.
        total = sum(grow_num_blocks)
        if total > self._num_free:
            raise RuntimeError(
                f"KV block pool exhausted: the step plan grows {total} blocks, {self._num_free} free "
                "(a scheduler bug)"
            )
        for seq_id, num_blocks in zip(grow_seq_ids, grow_num_blocks):
            self.allocate(seq_id, num_blocks)
        tables = [self._tables.get(seq_id, ()) for seq_id in batch_seq_ids]
        width = max((len(t) for t in tables), default=0)
        out = np.full((len(tables), width), -1, dtype=np.int32)
        for row, table in enumerate(tables):
            out[row, : len(table)] = table
        return out


def _as_list(values: Sequence[int] | np.ndarray) -> Sequence[int]:
    """Plain ints: dict lookups and sums over numpy scalars cost several times more."""
    return values.tolist() if isinstance(values, np.ndarray) else values
