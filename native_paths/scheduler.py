"""The native scheduler: engine.types.Scheduler backed by csrc/scheduler.c, one C call per step, the plan as views of C memory."""

from __future__ import annotations

import struct
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..engine.types import PLAN_ARRAYS, PLAN_COUNTS, NewSequence, StepPlan, check_scheduler_config
from .loader import require

# engine.types.SCHEDULING_POLICIES -> the C twin's policy table index (NP_POLICY_*, csrc/native_paths.h).
POLICIES = {"fcfs": 0, "priority": 1}
MAX_PROMPT_TOKENS = 2**60  # far from int64 overflow in C's counters
# np_plan's leading int64 fields, in order (csrc/native_paths.h).
PLAN_FIELDS = (
    "n_batch",
    "n_frees",
    "n_preempted",
    "n_grows",
    *PLAN_COUNTS,  # num_waiting ... num_cached_tokens, as the StepPlan names them
    "bad_index",
    "version",
    "capacity",
)
NUM_COUNTS = 4  # n_batch, n_frees, n_preempted, n_grows


def pack_schedule_inputs(arrivals: Sequence[NewSequence], finished: Sequence[int]) -> bytes:
    """Arrival ids, prompt token counts, priorities, then finished ids, as one int64 buffer."""
    try:
        return struct.pack(
            f"{3 * len(arrivals) + len(finished)}q",
            *[new.seq_id for new in arrivals],
            *[new.num_prompt_tokens for new in arrivals],
            *[new.priority for new in arrivals],
            *finished,
        )
    except struct.error as error:
        raise ValueError(f"sequence ids, token counts and priorities must be int64 ints ({error})") from None


class PlanViews:
    """One StepPlan over a C np_plan, reused step to step: its arrays are numpy views of the C arrays,
    re-sliced only when a length changed, and its counts are refreshed from one int64 read."""

    def __init__(self, ffi: Any, plan_pointer: Any) -> None:
        self._ffi = ffi
        self._c_plan = plan_pointer
        self._header = memoryview(ffi.buffer(plan_pointer, 8 * len(PLAN_FIELDS))).cast("q")
        self.plan = StepPlan()
        self._full: dict[str, np.ndarray] = {}
        self._version = -1

    def refresh(self, changed: int) -> StepPlan:
        """The plan after a step whose np_scheduler_step returned `changed` (NP_PLAN_* bits)."""
        header = self._header.tolist()
        plan = self.plan
        if changed:
            if header[11] != self._version:
                self._wrap(header[12])
                self._version = header[11]
                changed = (1 << NUM_COUNTS) - 1
            full = self._full
            if changed & 1:
                n = header[0]
                plan.seq_ids, plan.num_tokens = full["seq_ids"][:n], full["num_tokens"][:n]
                plan.start_positions, plan.samples = full["start_positions"][:n], full["samples"][:n]
            if changed & 2:
                plan.frees = full["frees"][: header[1]]
            if changed & 4:
                plan.preempted = full["preempted"][: header[2]]
            if changed & 8:
                plan.grow_seq_ids, plan.grow_num_blocks = (
                    full["grow_seq_ids"][: header[3]],
                    full["grow_num_blocks"][: header[3]],
                )
        (
            plan.num_waiting,
            plan.num_running,
            plan.first_admitted,
            plan.prefill_tokens,
            plan.decode_tokens,
            plan.num_cached_tokens,
        ) = header[4:10]
        return plan

    def _wrap(self, capacity: int) -> None:
        ffi, c_plan = self._ffi, self._c_plan
        self._full = {
            name: np.frombuffer(
                ffi.buffer(getattr(c_plan, name), capacity * (1 if name == "samples" else 8)),
                dtype=np.bool_ if name == "samples" else np.int64,
            )
            for name in PLAN_ARRAYS
        }

    @property
    def bad_index(self) -> int:
        return self._header[10]


def raise_schedule_error(lib: Any, status: int, index: int, arrivals: Sequence[NewSequence]) -> None:
    """The exception PythonScheduler raises for the same input (or a MemoryError / RuntimeError)."""
    if status == lib.NP_ERR_DUPLICATE:
        raise ValueError(f"sequence {arrivals[index].seq_id} is already scheduled")
    if status == lib.NP_ERR_ARG and 0 <= index < len(arrivals):
        raise ValueError(
            f"sequence {arrivals[index].seq_id}: num_prompt_tokens={arrivals[index].num_prompt_tokens} "
            f"must be in [0, {MAX_PROMPT_TOKENS}]"
        )
    if status == lib.NP_ERR_NOMEM:
        raise MemoryError("the native scheduler ran out of memory")
    raise RuntimeError(f"np_scheduler_step failed with status {status}")


class NativeScheduler:
    """Plans the same steps as engine.scheduler.PythonScheduler, from queues and counters kept in C arrays.

    The plan it returns is one reused object whose arrays view C memory: valid until the next schedule().
    """

    def __init__(
        self, block_size: int, max_batch: int, max_batched_tokens: int, policy: str = "fcfs"
    ) -> None:
        check_scheduler_config(block_size, max_batch, max_batched_tokens, policy)
        self._ffi, self._lib = require()
        self.block_size = block_size
        self.max_batch = max_batch
        self.max_batched_tokens = max_batched_tokens
        self.policy = policy
        self.calls = 0
        self._scheduler = self._lib.np_scheduler_create(
            block_size, max_batch, max_batched_tokens, POLICIES[policy]
        )
        if self._scheduler == self._ffi.NULL:
            raise MemoryError("cannot allocate the native scheduler")
        self._finalizer = weakref.finalize(self, self._lib.np_scheduler_destroy, self._scheduler)
        self._views = PlanViews(self._ffi, self._lib.np_scheduler_plan(self._scheduler))
        self._step = self._lib.np_scheduler_step
        self._null = self._ffi.NULL

    def close(self) -> None:
        """Free the C state now (otherwise it goes when the object is collected)."""
        self._finalizer()

    # Both counts come with each plan, so that reading them costs no second C call per step.
    @property
    def num_waiting(self) -> int:
        return self._views.plan.num_waiting

    @property
    def num_running(self) -> int:
        return self._views.plan.num_running

    def schedule(
        self, arrivals: Sequence[NewSequence], finished: Sequence[int], num_free_blocks: int
    ) -> StepPlan:
        """Admit `arrivals`, forget `finished` (their blocks go into plan.frees), and plan one step."""
        self.calls += 1  # foreign calls made, for the budget counters (one per engine step)
        if arrivals or finished:
            inputs = self._ffi.from_buffer("int64_t[]", pack_schedule_inputs(arrivals, finished))
            changed = self._step(self._scheduler, inputs, len(arrivals), len(finished), num_free_blocks)
        else:  # a steady step: nothing to hand over
            changed = self._step(self._scheduler, self._null, 0, 0, num_free_blocks)
        if changed < 0:
            self._views.refresh((1 << NUM_COUNTS) - 1)
            raise_schedule_error(self._lib, changed, self._views.bad_index, arrivals)
        return self._views.refresh(changed)
