"""The native KV block allocator: engine.types.KVAllocator backed by csrc/kv_alloc.c, one C call per step."""

from __future__ import annotations

import struct
import weakref
from collections.abc import Sequence

import numpy as np

from native_paths.loader import require


class NativeKVAllocator:
    """Makes the same decisions as engine.kv_alloc.PythonKVAllocator (same free-list order, same block ids)."""

    def __init__(self, num_blocks: int, block_size: int) -> None:
        if not isinstance(num_blocks, int) or not 1 <= num_blocks <= 2**31 - 3:
            raise ValueError(f"num_blocks must be an int in [1, 2**31 - 3], got {num_blocks!r}")
        if not isinstance(block_size, int) or not 1 <= block_size <= 2**31 - 1:
            raise ValueError(f"block_size must be an int >= 1, got {block_size!r}")
        self._ffi, self._lib = require()
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.calls = 0
        self._kv = self._lib.np_kv_alloc_create(num_blocks, block_size)
        if self._kv == self._ffi.NULL:
            raise MemoryError(f"cannot allocate a native KV pool of {num_blocks} blocks")
        self._finalizer = weakref.finalize(self, self._lib.np_kv_alloc_destroy, self._kv)
        self._result = self._ffi.new("np_kv_alloc_result *")
        self._step = self._lib.np_kv_alloc_step
        self._batch_ids: list[int] = []  # the last batch, and its int64 buffer
        self._batch = b"\0" * 8
        self._num_free = num_blocks

    def close(self) -> None:
        """Free the C state now (otherwise it goes when the object is collected)."""
        self._finalizer()

    # -- reporting, as PythonKVAllocator ----------------------------------------------------------------

    @property
    def num_free_blocks(self) -> int:
        return self._num_free  # kept from the last step: no second C call per engine step

    @property
    def num_used_blocks(self) -> int:
        return self.num_blocks - self.num_free_blocks

    @property
    def utilization(self) -> float:
        return self.num_used_blocks / self.num_blocks

    @property
    def num_sequences(self) -> int:
        return self._lib.np_kv_alloc_num_sequences(self._kv)

    def block_table(self, seq_id: int) -> list[int]:
        blocks = self._ffi.new("int32_t **")
        length = self._lib.np_kv_alloc_table(self._kv, seq_id, blocks)
        return self._ffi.unpack(blocks[0], length) if length else []

    def ref_count(self, block: int) -> int:
        if not 0 <= block < self.num_blocks:
            raise IndexError(f"block {block} is outside the pool [0, {self.num_blocks})")
        return self._lib.np_kv_alloc_ref_count(self._kv, block)

    def free_block_ids(self) -> list[int]:
        """The free list from head to tail (O(N); for tests and debugging)."""
        capacity = self._lib.np_kv_alloc_num_free(self._kv)
        out = self._ffi.new("int32_t[]", max(capacity, 1))
        count = self._lib.np_kv_alloc_free_list(self._kv, out, capacity)
        return self._ffi.unpack(out, min(count, capacity))

    # -- the step -------------------------------------------------------------------------------

    def step(
        self,
        frees: Sequence[int],
        grow_seq_ids: Sequence[int],
        grow_num_blocks: Sequence[int],
        batch_seq_ids: Sequence[int],
    ) -> np.ndarray:
        """Apply one step's frees, then its grows; return the batch's block tables (int32, padded with -1)."""
        self.calls += 1  # foreign calls made, for the budget counters (one per engine step)
        n_frees, n_grows, n_batch = len(frees), len(grow_seq_ids), len(batch_seq_ids)
        if len(grow_num_blocks) != n_grows:
            raise ValueError(
                f"grow_seq_ids has {n_grows} entries but grow_num_blocks has {len(grow_num_blocks)}"
            )
        # struct converts a list of ints several times faster than ffi.new, and raises struct.error
        # for anything that is not an int fitting int64. Decode steps repeat the batch of the step
        # before: comparing lists (mostly the very same int objects) is cheaper than converting.
        try:
            packed = struct.pack(f"{n_frees + 2 * n_grows}q", *frees, *grow_seq_ids, *grow_num_blocks)
            if type(batch_seq_ids) is not list or batch_seq_ids != self._batch_ids:
                self._batch = struct.pack(f"{n_batch}q", *batch_seq_ids)
                self._batch_ids = list(batch_seq_ids)
        except struct.error as error:
            raise ValueError(
                f"sequence ids and block counts must be ints that fit in int64 ({error})"
            ) from None
        ffi, result = self._ffi, self._result
        ids = ffi.from_buffer("int64_t[]", packed)
        batch = ffi.from_buffer("int64_t[]", self._batch)
        grows = ids + n_frees
        status = self._step(self._kv, ids, n_frees, grows, grows + n_grows, n_grows, batch, n_batch, result)
        self._num_free = result.num_free
        if status:
            self._raise(status, grow_seq_ids, grow_num_blocks)
        width = result.width
        if n_batch == 0 or width == 0:
            return np.full((n_batch, width), -1, dtype=np.int32)
        tables = np.empty((n_batch, width), dtype=np.int32)  # a copy: the C buffer is reused next step
        ffi.memmove(ffi.from_buffer(tables), result.tables, n_batch * width * 4)
        return tables

    def _raise(self, status: int, grow_seq_ids: Sequence[int], grow_num_blocks: Sequence[int]) -> None:
        lib, index = self._lib, self._result.bad_index
        if status == lib.NP_ERR_ARG and index >= 0:
            raise ValueError(
                f"cannot allocate {grow_num_blocks[index]} blocks to sequence {grow_seq_ids[index]}"
            )
        if status == lib.NP_ERR_EXHAUSTED:
            raise RuntimeError(
                f"KV block pool exhausted: the step plan grows {sum(grow_num_blocks)} blocks, "
                f"{self._result.num_free} free (a scheduler bug)"
            )
        if status == lib.NP_ERR_NOMEM:
            raise MemoryError("the native KV allocator ran out of memory")
        raise RuntimeError(f"np_kv_alloc_step failed with status {status}")
