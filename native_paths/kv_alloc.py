"""The native KV block allocator: engine.types.KVAllocator backed by csrc/kv_alloc.c, one C call per step."""

from __future__ import annotations

import struct
import weakref
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from .loader import require


class KVInspection:
    """What PythonKVAllocator reports besides its step, read from a C pool at `self._kv` (for the
    separate allocator and the fused core's alike)."""

    # cffi's FFI and the extension's lib (native_paths.loader.require): cffi ships no types for them.
    _ffi: Any
    _lib: Any
    _kv: object  # the C pool, opaque here: only handed back to the lib's functions
    num_blocks: int
    _num_free: int

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


class NativeKVAllocator(KVInspection):
    """Makes the same decisions as engine.kv_alloc.PythonKVAllocator (same free-list order, same block ids)."""

    def __init__(self, num_blocks: int, block_size: int) -> None:
        check_pool_config(num_blocks, block_size)
        self._ffi, self._lib = require()
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.calls = 0
        self._kv = self._lib.np_kv_alloc_create(num_blocks, block_size)
        if self._kv == self._ffi.NULL:
            raise MemoryError(f"cannot allocate a native KV pool of {num_blocks} blocks")
        self._finalizer = weakref.finalize(self, self._lib.np_kv_alloc_destroy, self._kv)
        self._views = TableViews(self._ffi, self._lib.np_kv_alloc_output(self._kv))
        self._step = self._lib.np_kv_alloc_step
        self._num_free = num_blocks

    def close(self) -> None:
        """Free the C state now (otherwise it goes when the object is collected)."""
        self._finalizer()

    # -- the step -------------------------------------------------------------------------------

    def step(
        self,
        frees: Sequence[int] | np.ndarray,
        grow_seq_ids: Sequence[int] | np.ndarray,
        grow_num_blocks: Sequence[int] | np.ndarray,
        batch_seq_ids: Sequence[int] | np.ndarray,
    ) -> np.ndarray:
        """Apply one step's frees, then its grows; return the batch's block tables (int32, padded with -1),
        a view of the allocator's own buffer: valid until the next step."""
        self.calls += 1  # foreign calls made, for the budget counters (one per engine step)
        n_grows = len(grow_seq_ids)
        if len(grow_num_blocks) != n_grows:
            raise ValueError(
                f"grow_seq_ids has {n_grows} entries but grow_num_blocks has {len(grow_num_blocks)}"
            )
        # A plan's arrays go over as they are (no copy); lists are packed once. Four plain calls, not a
        # generator: the whole C step is short enough that the adapter's own lines show.
        ffi, what = self._ffi, "sequence ids and block counts"
        frees_pointer = int64_pointer(ffi, frees, what)
        grows_pointer = int64_pointer(ffi, grow_seq_ids, what)
        counts_pointer = int64_pointer(ffi, grow_num_blocks, what)
        batch_pointer = int64_pointer(ffi, batch_seq_ids, what)
        status = self._step(
            self._kv,
            frees_pointer,
            len(frees),
            grows_pointer,
            counts_pointer,
            n_grows,
            batch_pointer,
            len(batch_seq_ids),
        )
        header = self._views.header()
        self._num_free = header[4]
        if status:
            self._raise(status, header[5], grow_seq_ids, grow_num_blocks)
        return self._views.tables(header)

    def _raise(
        self,
        status: int,
        index: int,
        grow_seq_ids: Sequence[int] | np.ndarray,
        grow_num_blocks: Sequence[int] | np.ndarray,
    ) -> None:
        raise_kv_error(self._lib, status, index, self._num_free, grow_seq_ids, grow_num_blocks)


def check_pool_config(num_blocks: int, block_size: int) -> None:
    if not isinstance(num_blocks, int) or not 1 <= num_blocks <= 2**31 - 3:
        raise ValueError(f"num_blocks must be an int in [1, 2**31 - 3], got {num_blocks!r}")
    if not isinstance(block_size, int) or not 1 <= block_size <= 2**31 - 1:
        raise ValueError(f"block_size must be an int >= 1, got {block_size!r}")


def raise_kv_error(
    lib: Any,
    status: int,
    index: int,
    num_free: int,
    grow_seq_ids: Sequence[int] | np.ndarray,
    grow_num_blocks: Sequence[int] | np.ndarray,
) -> None:
    """The exception PythonKVAllocator raises for the same step (or a MemoryError / RuntimeError)."""
    if status == lib.NP_ERR_ARG and index >= 0:
        raise ValueError(
            f"cannot allocate {int(grow_num_blocks[index])} blocks to sequence {int(grow_seq_ids[index])}"
        )
    if status == lib.NP_ERR_EXHAUSTED:
        raise RuntimeError(
            f"KV block pool exhausted: the step plan grows {int(sum(grow_num_blocks))} blocks, {num_free} free "
            "(a scheduler bug)"
        )
    if status == lib.NP_ERR_NOMEM:
        raise MemoryError("the native KV allocator ran out of memory")
    raise RuntimeError(f"np_kv_alloc_step failed with status {status}")


# np_kv_alloc_result's leading int64 fields, in order (csrc/native_paths.h).
RESULT_FIELDS = ("rows", "width", "stride", "capacity_rows", "num_free", "bad_index", "version")


class ResultPointer(Protocol):
    """A `struct np_kv_alloc_result *` as cffi gives it: the header's int64 fields, then the tables' pointer."""

    @property
    def tables(self) -> object: ...


class TableViews:
    """The batch's block tables as a numpy view of the allocator's output buffer, made again only when
    the buffer moved or the batch's shape changed."""

    def __init__(self, ffi: Any, result_pointer: ResultPointer) -> None:
        self._ffi = ffi
        self._result = result_pointer
        self._header = memoryview(ffi.buffer(result_pointer, 8 * len(RESULT_FIELDS))).cast("q")
        self._full: np.ndarray | None = None
        self._version = -1
        self._shape = (-1, -1)
        self._view = np.empty((0, 0), dtype=np.int32)

    def header(self) -> list[int]:
        return self._header.tolist()

    def tables(self, header: list[int]) -> np.ndarray:
        rows, width, stride, capacity_rows, _, _, version = header
        if version != self._version:
            self._version = version
            self._shape = (-1, -1)
            pointer = self._result.tables
            self._full = (
                np.frombuffer(self._ffi.buffer(pointer, 4 * capacity_rows * stride), dtype=np.int32).reshape(
                    capacity_rows, stride
                )
                if pointer != self._ffi.NULL
                else None
            )
        if (rows, width) != self._shape:
            self._shape = (rows, width)
            full = self._full
            self._view = full[:rows, :width] if full is not None else np.empty((rows, width), dtype=np.int32)
        return self._view


INT64 = np.dtype(np.int64)


def int64_pointer(ffi: Any, values: Sequence[int] | np.ndarray, what: str) -> Any:
    """An int64_t* over `values`: a contiguous int64 array's own memory, or a packed copy of a list."""
    if type(values) is np.ndarray and values.dtype is INT64 and values.flags.c_contiguous:
        return ffi.from_buffer("int64_t[]", values) if len(values) else ffi.NULL
    if isinstance(values, np.ndarray):
        if values.dtype.kind not in "iub":
            raise ValueError(f"{what} must be integers, got an array of {values.dtype}")
        values = values.tolist()
    if not len(values):
        return ffi.NULL
    try:
        return ffi.from_buffer("int64_t[]", struct.pack(f"{len(values)}q", *values))
    except struct.error as error:
        raise ValueError(f"{what} must be ints that fit in int64 ({error})") from None
