"""Native input preparation: engine.types.Prepare backed by csrc/prepare.c, one C call per step into reused tensors."""

from __future__ import annotations

import struct
import weakref
from array import array
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from ..engine.types import ModelInput, StepPlan
from .kv_alloc import int64_pointer
from .loader import require

BOOL = np.dtype(np.bool_)
# np_prepare_output's leading int64 fields, in order (csrc/native_paths.h).
OUTPUT_FIELDS = (
    "num_tokens",
    "num_seqs",
    "num_samples",
    "bad_index",
    "error_detail",
    "version",
    "token_capacity",
    "seq_capacity",
)


class PendingWork:
    """Registrations, removals and sampled tokens buffered in Python until the next step's C call,
    packed as that call's arguments (the sampler's pattern: a remove cancels a pending add).

    Registrations are packed as they come (ids, prompt offsets, prompt tokens), so that the step's
    call only points C at the buffers; a cancelled or replaced registration has them rebuilt.
    """

    def __init__(self, ffi: Any) -> None:
        self._ffi = ffi
        self.adds: dict[int, bytes] = {}  # what is pending, in order: the reference for the buffers
        self.removes: list[int] = []
        self.sampled: Sequence[int] = ()
        self.num_sample_rows = 0  # sampled rows of the last input
        self._fresh_buffers()

    def _fresh_buffers(self) -> None:
        self._add_ids = array("q")
        self._offsets = array("q", [0])
        self._prompts = bytearray()
        self._remove_ids = array("q")
        self._packed = True  # the buffers hold exactly `adds`

    def add(self, seq_id: int, prompt_token_ids: Sequence[int]) -> None:
        if not isinstance(seq_id, int) or not -(2**63) <= seq_id < 2**63:
            raise ValueError(f"sequence id {seq_id!r} must be an int64 int")
        count = len(prompt_token_ids)
        try:
            # Unsigned packing refuses negative ids; the int32 view below catches those >= 2**31.
            prompt = struct.pack(f"{count}I", *prompt_token_ids)
        except struct.error as error:
            raise ValueError(
                f"sequence {seq_id}: prompt token ids must be ints in [0, 2**31) ({error})"
            ) from None
        if count and np.frombuffer(prompt, dtype=np.int32).min() < 0:
            raise ValueError(f"sequence {seq_id}: prompt token ids must be ints in [0, 2**31)")
        if seq_id in self.adds:
            self._packed = False  # replaced: the buffers are rebuilt at the step
        self.adds[seq_id] = prompt
        if self._packed:
            self._add_ids.append(seq_id)
            self._prompts += prompt
            self._offsets.append(self._offsets[-1] + count)

    def remove(self, seq_id: int) -> None:
        if not isinstance(seq_id, int) or not -(2**63) <= seq_id < 2**63:
            raise ValueError(f"sequence id {seq_id!r} must be an int64 int")
        if self.adds.pop(seq_id, None) is not None:
            self._packed = False
        self.removes.append(seq_id)
        self._remove_ids.append(seq_id)

    def append_sampled(self, tokens: Sequence[int]) -> None:
        if len(tokens) != self.num_sample_rows:
            raise ValueError(
                f"{len(tokens)} sampled tokens for the {self.num_sample_rows} sampled rows of the last input"
            )
        self.sampled = tokens

    def take(self) -> tuple[tuple[Any, ...], tuple[dict[int, bytes], list[int]]]:
        """The pending work as np_prepare_apply's arguments (after the object), and what to put back
        if C refuses it before applying anything (see restore)."""
        ffi = self._ffi
        adds, removes, sampled = self.adds, self.removes, self.sampled
        sampled_pointer = add_ids = offsets = tokens = remove_ids = ffi.NULL
        try:
            if sampled:
                sampled_pointer = ffi.from_buffer("int64_t[]", struct.pack(f"{len(sampled)}q", *sampled))
        except struct.error as error:
            self.sampled = ()
            self.num_sample_rows = 0
            raise ValueError(f"sampled token ids must be ints in [0, 2**31) ({error})") from None
        if adds:
            if not self._packed:
                self._repack()
            add_ids = ffi.from_buffer("int64_t[]", self._add_ids)
            offsets = ffi.from_buffer("int64_t[]", self._offsets)
            tokens = ffi.from_buffer("int32_t[]", self._prompts) if self._prompts else ffi.NULL
        if removes:
            remove_ids = ffi.from_buffer("int64_t[]", self._remove_ids)
        self.adds, self.removes, self.sampled = {}, [], ()
        self.num_sample_rows = 0
        if adds or removes:
            self._fresh_buffers()  # the cdata above keep the old ones alive for the call
        arguments = (
            sampled_pointer,
            len(sampled),
            remove_ids,
            len(removes),
            add_ids,
            offsets,
            tokens,
            len(adds),
        )
        return arguments, (adds, removes)

    def _repack(self) -> None:
        removes = self._remove_ids
        self._fresh_buffers()
        self._remove_ids = removes
        for seq_id, prompt in self.adds.items():
            self._add_ids.append(seq_id)
            self._prompts += prompt
            self._offsets.append(self._offsets[-1] + len(prompt) // 4)

    def restore(self, taken: tuple[dict[int, bytes], list[int]]) -> None:
        """Put refused registrations and removals back in front of any made since."""
        adds, removes = taken
        self.removes[:0] = removes
        self._remove_ids = array("q", self.removes)
        self.adds = {**adds, **self.adds}
        self._packed = False


class InputViews:
    """The step's ModelInput over a C np_prepare_output: tensors made once per buffer and re-sliced only
    when a length changes; the block tables' tensor is reused while the allocator hands the same view."""

    def __init__(self, ffi: Any, output_pointer: Any) -> None:
        self._ffi = ffi
        self._output = output_pointer
        self._header = memoryview(ffi.buffer(output_pointer, 8 * len(OUTPUT_FIELDS))).cast("q")
        self._version = -1
        self._full: dict[str, Any] = {}
        self._tokens = self._seqs = self._samples = -1
        self._token_views: tuple[torch.Tensor, ...] = ()
        self._seq_views: tuple[np.ndarray, ...] = ()
        self._sample_view = torch.empty(0, dtype=torch.int64)
        self._tables: np.ndarray | None = None
        self._tables_tensor = torch.empty((0, 0), dtype=torch.int32)

    def header(self) -> list[int]:
        return self._header.tolist()

    def model_input(self, header: list[int], block_tables: np.ndarray) -> ModelInput:
        num_tokens, num_seqs, num_samples, _, _, version, token_capacity, seq_capacity = header
        if version != self._version:
            self._wrap(token_capacity, seq_capacity)
            self._version = version
            self._tokens = self._seqs = self._samples = -1
        full = self._full
        if num_tokens != self._tokens:
            self._tokens = num_tokens
            # from_numpy of a numpy slice costs less than slicing a tensor; three calls, no generator.
            self._token_views = (
                torch.from_numpy(full["token_ids"][:num_tokens]),
                torch.from_numpy(full["positions"][:num_tokens]),
                torch.from_numpy(full["slot_mapping"][:num_tokens]),
            )
        if num_seqs != self._seqs:
            self._seqs = num_seqs
            self._seq_views = (full["query_lens"][:num_seqs], full["context_lens"][:num_seqs])
        if num_samples != self._samples:
            self._samples = num_samples
            self._sample_view = torch.from_numpy(full["sample_indices"][:num_samples])
        if block_tables is not self._tables:
            self._tables = block_tables
            self._tables_tensor = torch.from_numpy(block_tables)
        token_ids, positions, slot_mapping = self._token_views
        query_lens, context_lens = self._seq_views
        return ModelInput(
            token_ids,
            positions,
            query_lens,
            context_lens,
            self._tables_tensor,
            slot_mapping,
            self._sample_view,
        )

    def _wrap(self, token_capacity: int, seq_capacity: int) -> None:
        ffi, output = self._ffi, self._output

        def int64s(name: str, count: int) -> np.ndarray:
            return np.frombuffer(ffi.buffer(getattr(output, name), 8 * count), dtype=np.int64)

        self._full = {
            name: int64s(name, token_capacity) for name in ("token_ids", "positions", "slot_mapping")
        }
        self._full["sample_indices"] = int64s("sample_indices", seq_capacity)
        self._full["query_lens"] = int64s("query_lens", seq_capacity)
        self._full["context_lens"] = int64s("context_lens", seq_capacity)


def table_arguments(ffi: Any, block_tables: np.ndarray, cache: list[Any]) -> tuple[Any, int, int, int]:
    """(int32_t*, rows, width, row stride in ints) of a 2-D int32 table, strided rows allowed; the pointer
    of the last table is kept in `cache` while the allocator keeps handing the same view."""
    if cache and cache[0] is block_tables:
        return cache[1]
    if not isinstance(block_tables, np.ndarray) or block_tables.ndim != 2 or block_tables.dtype != np.int32:
        raise ValueError("block tables must be a 2-D int32 numpy array")
    rows, width = block_tables.shape
    row_stride, item_stride = block_tables.strides
    if rows and width and (item_stride != 4 or row_stride % 4 or row_stride < 4 * width):
        raise ValueError("block tables need contiguous rows of int32")
    if rows == 0 or width == 0:
        arguments = (ffi.NULL, rows, width, width)
    else:
        address = block_tables.__array_interface__["data"][0]
        arguments = (ffi.cast("int32_t *", address), rows, width, row_stride // 4)
    cache[:] = [block_tables, arguments]
    return arguments


def batch_arguments(ffi: Any, plan: StepPlan, cache: list[Any]) -> tuple[Any, Any, Any, Any, int]:
    """(seq_ids, num_tokens, start_positions, samples, batch) for C: the plan's own memory when its arrays
    are contiguous int64 (bool for samples), as both schedulers hand them; C reads `batch` items of each.
    The C scheduler hands the same array objects while the batch keeps its size: `cache` keeps them."""
    seq_ids, num_tokens, starts, samples = plan.seq_ids, plan.num_tokens, plan.start_positions, plan.samples
    if (
        cache
        and cache[0] is seq_ids
        and cache[1] is num_tokens
        and cache[2] is starts
        and cache[3] is samples
    ):
        return cache[4]
    batch = len(seq_ids)
    if not len(num_tokens) == len(starts) == len(samples) == batch:
        raise ValueError(
            f"batch mismatch: {len(num_tokens)} token counts, {len(starts)} start positions, "
            f"{len(samples)} sample flags for {batch} sequences"
        )
    if not batch:
        return ffi.NULL, ffi.NULL, ffi.NULL, ffi.NULL, 0
    if type(samples) is not np.ndarray or samples.dtype is not BOOL or not samples.flags.c_contiguous:
        samples = np.ascontiguousarray(samples, dtype=np.bool_)
    what = "the plan's arrays"
    arguments = (
        int64_pointer(ffi, seq_ids, what),
        int64_pointer(ffi, num_tokens, what),
        int64_pointer(ffi, starts, what),
        ffi.from_buffer("uint8_t[]", samples),
        batch,
    )
    cache[:] = [plan.seq_ids, plan.num_tokens, plan.start_positions, plan.samples, arguments]
    return arguments


PREPARE_ERRORS = {
    "NP_PREPARE_POSITIONS": "tokens asked for beyond those known",
    "NP_PREPARE_PAST_TABLE": "a token's position lies past its sequence's block table: grow the table first",
    "NP_PREPARE_PADDING": "a token's position maps to a padding (-1) entry of its block table",
}


def raise_prepare_error(
    lib: Any, status: int, header: list[int], plan: StepPlan | None, tables_rows: int
) -> None:
    """The exception PythonPrepare raises for the same input (or a MemoryError)."""
    index, detail = header[3], header[4]
    seq_id = int(plan.seq_ids[index]) if plan is not None and 0 <= index < len(plan.seq_ids) else None
    if status == lib.NP_ERR_NOMEM:
        raise MemoryError("native input preparation ran out of memory")
    if detail == lib.NP_PREPARE_UNKNOWN:
        raise KeyError(f"sequence {seq_id} was never added to input preparation")
    if detail == lib.NP_PREPARE_TABLE_ROWS:
        raise ValueError(
            f"{tables_rows} block tables for a batch of {len(plan.seq_ids) if plan is not None else 0}"
        )
    if detail == lib.NP_PREPARE_TOKEN_RANGE:
        raise ValueError("sampled token ids must be ints in [0, 2**31)")
    if detail == lib.NP_PREPARE_POSITIONS:
        raise ValueError(f"sequence {seq_id}: {PREPARE_ERRORS['NP_PREPARE_POSITIONS']}")
    if detail == lib.NP_PREPARE_PAST_TABLE:
        raise ValueError(PREPARE_ERRORS["NP_PREPARE_PAST_TABLE"])
    if detail == lib.NP_PREPARE_PADDING:
        raise ValueError(PREPARE_ERRORS["NP_PREPARE_PADDING"])
    raise ValueError(f"np_prepare_step refused its arguments (status {status}, entry {index})")


class PrepareQueries:
    """What a C np_prepare state answers about its sequences, for a class holding `_ffi`, `_lib` and `_prepare`."""

    @property
    def num_sequences(self) -> int:
        """Sequences registered as of the last prepare() (pending work not yet applied)."""
        return self._lib.np_prepare_num_sequences(self._prepare)  # type: ignore[attr-defined]

    def tokens(self, seq_id: int) -> list[int]:
        """The token ids known for seq_id as of the last prepare(); for tests."""
        ffi, lib = self._ffi, self._lib  # type: ignore[attr-defined]
        pointer = ffi.new("int32_t **")
        count = lib.np_prepare_tokens(self._prepare, seq_id, pointer)  # type: ignore[attr-defined]
        return ffi.unpack(pointer[0], count) if count > 0 else []


class NativePrepare(PrepareQueries):
    """Builds the same ModelInput as engine.prepare.PythonPrepare, with token ids kept in C arrays and
    the input written into buffers the returned tensors view (valid until the next prepare())."""

    def __init__(self, block_size: int) -> None:
        if not isinstance(block_size, int) or not 1 <= block_size <= 2**31 - 1:
            raise ValueError(f"block_size must be an int >= 1, got {block_size!r}")
        self._ffi, self._lib = require()
        self.block_size = block_size
        self.calls = 0
        self._prepare = self._lib.np_prepare_create(block_size)
        if self._prepare == self._ffi.NULL:
            raise MemoryError("cannot allocate native input preparation")
        self._finalizer = weakref.finalize(self, self._lib.np_prepare_destroy, self._prepare)
        self._pending = PendingWork(self._ffi)
        self._views = InputViews(self._ffi, self._lib.np_prepare_output_of(self._prepare))
        self._step = self._lib.np_prepare_step
        self._table_cache: list[Any] = []
        self._batch_cache: list[Any] = []

    def close(self) -> None:
        """Free the C state now (otherwise it goes when the object is collected)."""
        self._finalizer()

    def add(self, seq_id: int, prompt_token_ids: Sequence[int]) -> None:
        """Register a sequence with its prompt; takes effect at the next prepare()."""
        self._pending.add(seq_id, prompt_token_ids)

    def remove(self, seq_id: int) -> None:
        """Forget a finished sequence; takes effect at the next prepare()."""
        self._pending.remove(seq_id)

    def append_sampled(self, tokens: Sequence[int]) -> None:
        """The tokens drawn for the last prepared input's sampled rows; appended at the next prepare()."""
        self._pending.append_sampled(tokens)

    def prepare(self, plan: StepPlan, block_tables: np.ndarray) -> ModelInput:
        """Apply pending tokens, removals and registrations, then build this step's ModelInput."""
        self.calls += 1  # foreign calls made, for the budget counters (one per engine step)
        ffi = self._ffi
        batch = batch_arguments(ffi, plan, self._batch_cache)
        pending, taken = self._pending.take()
        tables = table_arguments(ffi, block_tables, self._table_cache)
        status = self._step(self._prepare, *pending, *batch, *tables)
        header = self._views.header()
        if status:
            if header[4] in (self._lib.NP_PREPARE_TOKEN_RANGE, self._lib.NP_PREPARE_SAMPLED_COUNT):
                self._pending.restore(taken)  # refused before anything was applied
            raise_prepare_error(self._lib, status, header, plan, tables[1])
        self._pending.num_sample_rows = header[2]
        return self._views.model_input(header, block_tables)
