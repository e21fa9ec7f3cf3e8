"""`--native core`: scheduler, KV allocator and input preparation fused into one C call per step (csrc/core.c).

The engine still talks to three components; here they are three faces of one C object. The
scheduler's schedule() makes the step's one foreign call, which also runs the allocator and the
preparation; kv_alloc.step() and prepare.prepare() then hand over what that call produced.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence

import numpy as np

from ..engine.types import ModelInput, NewSequence, StepPlan, check_scheduler_config
from .kv_alloc import KVInspection, TableViews, check_pool_config, raise_kv_error
from .loader import require
from .prepare import InputViews, PendingWork, PrepareQueries, raise_prepare_error
from .scheduler import (
    NUM_COUNTS,
    POLICIES,
    PlanViews,
    pack_schedule_inputs,
    raise_schedule_error,
)

ALL_COUNTS = (1 << NUM_COUNTS) - 1


class NativeCore:
    """One C object behind `scheduler`, `kv_alloc` and `prepare` (engine.types protocols)."""

    def __init__(
        self,
        num_blocks: int,
        block_size: int,
        max_batch: int,
        max_batched_tokens: int,
        policy: str = "fcfs",
    ) -> None:
        check_pool_config(num_blocks, block_size)
        check_scheduler_config(block_size, max_batch, max_batched_tokens, policy)
        self._ffi, self._lib = ffi, lib = require()
        self._core = lib.np_core_create(
            num_blocks, block_size, max_batch, max_batched_tokens, POLICIES[policy]
        )
        if self._core == ffi.NULL:
            raise MemoryError(f"cannot allocate the native core ({num_blocks} KV blocks)")
        self._finalizer = weakref.finalize(self, lib.np_core_destroy, self._core)
        self.pending = PendingWork(ffi)
        self.plan_views = PlanViews(ffi, lib.np_scheduler_plan(lib.np_core_scheduler(self._core)))
        self.table_views = TableViews(ffi, lib.np_kv_alloc_output(lib.np_core_kv_alloc(self._core)))
        self.input_views = InputViews(ffi, lib.np_prepare_output_of(lib.np_core_prepare(self._core)))
        self.outcome = 0  # the last step's NP_CORE_* failure bits
        self.fresh_tables = self.fresh_input = False  # produced by a step and not yet handed over
        self.scheduler = CoreScheduler(self, block_size, max_batch, max_batched_tokens, policy)
        self.kv_alloc = CoreKVAllocator(self, num_blocks, block_size)
        self.prepare = CorePrepare(self, block_size)

    def close(self) -> None:
        """Free the C state now (otherwise it goes when the object is collected)."""
        self._finalizer()

    def step(self, arrivals: Sequence[NewSequence], finished: Sequence[int]) -> StepPlan:
        """The one foreign call of an engine step; its tables and input wait for the other two faces."""
        ffi, lib = self._ffi, self._lib
        pending, taken = self.pending.take()
        if arrivals or finished:
            inputs = ffi.from_buffer("int64_t[]", pack_schedule_inputs(arrivals, finished))
        else:
            inputs = ffi.NULL
        result = lib.np_core_step(self._core, inputs, len(arrivals), len(finished), *pending)
        self.fresh_tables = self.fresh_input = True
        if result < 0:
            self.fresh_tables = self.fresh_input = False
            self.plan_views.refresh(ALL_COUNTS)
            raise_schedule_error(lib, result, self.plan_views.bad_index, arrivals)
        self.outcome = result & (lib.NP_CORE_KV_FAILED | lib.NP_CORE_PREPARE_FAILED)
        if self.outcome & lib.NP_CORE_PREPARE_FAILED:
            header = self.input_views.header()
            if header[4] in (lib.NP_PREPARE_TOKEN_RANGE, lib.NP_PREPARE_SAMPLED_COUNT):
                self.pending.restore(taken)  # refused before anything was applied, as in NativePrepare
        plan = self.plan_views.refresh(result & ~self.outcome)
        if not self.outcome:
            self.pending.num_sample_rows = self.input_views.header()[2]
        return plan

    def status(self) -> int:
        return self._lib.np_core_status(self._core)


class CoreScheduler:
    """engine.types.Scheduler: schedule() runs the whole fused step (the one counted foreign call)."""

    def __init__(
        self, core: NativeCore, block_size: int, max_batch: int, max_batched_tokens: int, policy: str
    ) -> None:
        self._core = core
        self.block_size = block_size
        self.max_batch = max_batch
        self.max_batched_tokens = max_batched_tokens
        self.policy = policy
        self.calls = 0

    @property
    def num_waiting(self) -> int:
        return self._core.plan_views.plan.num_waiting

    @property
    def num_running(self) -> int:
        return self._core.plan_views.plan.num_running

    def schedule(
        self, arrivals: Sequence[NewSequence], finished: Sequence[int], num_free_blocks: int
    ) -> StepPlan:
        """Plan one step (num_free_blocks is the core's own pool's: the argument is not needed)."""
        self.calls += 1  # foreign calls made, for the budget counters (one per engine step)
        return self._core.step(arrivals, finished)


class CoreKVAllocator(KVInspection):
    """engine.types.KVAllocator: step() hands over the tables the fused step wrote (no foreign call)."""

    def __init__(self, core: NativeCore, num_blocks: int, block_size: int) -> None:
        self._core = core
        self._ffi, self._lib = core._ffi, core._lib
        self._kv = core._lib.np_core_kv_alloc(core._core)
        self.num_blocks = num_blocks
        self.block_size = block_size

    @property
    def num_free_blocks(self) -> int:
        return self._core.table_views.header()[4]

    def step(
        self,
        frees: Sequence[int] | np.ndarray,
        grow_seq_ids: Sequence[int] | np.ndarray,
        grow_num_blocks: Sequence[int] | np.ndarray,
        batch_seq_ids: Sequence[int] | np.ndarray,
    ) -> np.ndarray:
        """The tables of the plan the last schedule() made; the arguments must be that plan's."""
        core = self._core
        if not core.fresh_tables:
            raise RuntimeError(
                "the fused core allocates inside schedule(): call schedule() before each step()"
            )
        core.fresh_tables = False
        header = core.table_views.header()
        if core.outcome & self._lib.NP_CORE_KV_FAILED:
            raise_kv_error(self._lib, core.status(), header[5], header[4], grow_seq_ids, grow_num_blocks)
        if len(batch_seq_ids) != header[0]:
            raise ValueError(
                f"a batch of {len(batch_seq_ids)} for the plan's {header[0]}: pass the plan's arrays"
            )
        return core.table_views.tables(header)


class CorePrepare(PrepareQueries):
    """engine.types.Prepare: registrations buffered for the next fused step; prepare() hands over the
    input that step built (no foreign call)."""

    def __init__(self, core: NativeCore, block_size: int) -> None:
        self._core = core
        self._ffi, self._lib = core._ffi, core._lib
        self._prepare = core._lib.np_core_prepare(core._core)
        self.block_size = block_size

    def add(self, seq_id: int, prompt_token_ids: Sequence[int]) -> None:
        self._core.pending.add(seq_id, prompt_token_ids)

    def remove(self, seq_id: int) -> None:
        self._core.pending.remove(seq_id)

    def append_sampled(self, tokens: Sequence[int]) -> None:
        self._core.pending.append_sampled(tokens)

    def prepare(self, plan: StepPlan, block_tables: np.ndarray) -> ModelInput:
        """The input the last schedule() built for its own plan and tables."""
        core = self._core
        if plan is not core.plan_views.plan or not core.fresh_input:
            raise RuntimeError(
                "the fused core prepares inside schedule(): pass the plan it returned, once per step"
            )
        core.fresh_input = False
        header = core.input_views.header()
        if core.outcome:
            raise_prepare_error(self._lib, core.status(), header, plan, len(block_tables))
        return core.input_views.model_input(header, block_tables)


def core_components(
    num_blocks: int, block_size: int, max_batch: int, max_batched_tokens: int, policy: str = "fcfs"
) -> tuple[CoreScheduler, CoreKVAllocator, CorePrepare]:
    """(scheduler, kv_alloc, prepare) of one fused core."""
    core = NativeCore(num_blocks, block_size, max_batch, max_batched_tokens, policy)
    return core.scheduler, core.kv_alloc, core.prepare
