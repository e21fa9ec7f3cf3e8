"""The native scheduler: engine.types.Scheduler backed by csrc/scheduler.c, one C call per step."""

from __future__ import annotations

import struct
import weakref
from collections.abc import Sequence

from engine.types import NewSequence, StepPlan
from native_paths.loader import require

POLICIES = {"fcfs": 0, "priority": 1}
MAX_PROMPT_TOKENS = 2**60  # far from int64 overflow in C's counters


class NativeScheduler:
    """Plans the same steps as engine.scheduler.PythonScheduler, from queues and counters kept in C arrays."""

    def __init__(
        self, block_size: int, max_num_seqs: int, max_batched_tokens: int, policy: str = "fcfs"
    ) -> None:
        for name, value in (("block_size", block_size), ("max_num_seqs", max_num_seqs),
                            ("max_batched_tokens", max_batched_tokens)):  # fmt: skip
            if not isinstance(value, int) or not 1 <= value <= 2**62:
                raise ValueError(
                    f"block_size={block_size}, max_num_seqs={max_num_seqs} and "
                    f"max_batched_tokens={max_batched_tokens} must all be >= 1 ({name} is not)"
                )
        if policy not in POLICIES:
            raise ValueError(f"unknown scheduling policy {policy!r}: use one of {', '.join(POLICIES)}")
        self._ffi, self._lib = require()
        self.block_size = block_size
        self.max_num_seqs = max_num_seqs
        self.max_batched_tokens = max_batched_tokens
        self.policy = policy
        self.calls = 0
        self._scheduler = self._lib.np_scheduler_create(
            block_size, max_num_seqs, max_batched_tokens, POLICIES[policy]
        )
        if self._scheduler == self._ffi.NULL:
            raise MemoryError("cannot allocate the native scheduler")
        self._finalizer = weakref.finalize(self, self._lib.np_scheduler_destroy, self._scheduler)
        self._plan = self._ffi.new("np_plan *")
        self._schedule = self._lib.np_scheduler_schedule
        self._batch: tuple[list[int], list[int], list[bool]] | None = None  # the last plan's batch lists

    def close(self) -> None:
        """Free the C state now (otherwise it goes when the object is collected)."""
        self._finalizer()

    # Both counts come with each plan, so that reading them costs no second C call per step.
    @property
    def num_waiting(self) -> int:
        return self._plan.num_waiting

    @property
    def num_running(self) -> int:
        return self._plan.num_running

    def schedule(
        self, arrivals: Sequence[NewSequence], finished: Sequence[int], num_free_blocks: int
    ) -> StepPlan:
        """Admit `arrivals`, forget `finished` (their blocks go into plan.frees), and plan one step."""
        self.calls += 1  # foreign calls made, for the budget counters (one per engine step)
        n_arrivals, n_finished = len(arrivals), len(finished)
        try:
            packed = struct.pack(
                f"{3 * n_arrivals + n_finished + 1}q",
                *[new.seq_id for new in arrivals],
                *[new.num_prompt_tokens for new in arrivals],
                *[new.priority for new in arrivals],
                *finished,
                num_free_blocks,
            )
        except struct.error as error:
            raise ValueError(
                f"sequence ids, token counts and priorities must be int64 ints ({error})"
            ) from None
        ffi, plan = self._ffi, self._plan
        ints = ffi.from_buffer("int64_t[]", packed)
        status = self._schedule(
            self._scheduler, ints, ints + n_arrivals, ints + 2 * n_arrivals, n_arrivals,
            ints + 3 * n_arrivals, n_finished, ints[3 * n_arrivals + n_finished], plan,
        )  # fmt: skip
        if status:
            self._batch = None
            self._raise(status, arrivals)
        n_batch, n_frees, n_preempted, n_grows = plan.n_batch, plan.n_frees, plan.n_preempted, plan.n_grows
        reuse = plan.batch_unchanged and self._batch is not None
        # One conversion for every int64 list (see np_plan.ints); a steady decode step stops short of
        # seq_ids and num_tokens and reuses the previous step's lists instead.
        tail = n_batch + n_frees + n_preempted + 2 * n_grows
        count = tail if reuse else plan.n_ints
        ints = memoryview(ffi.buffer(plan.ints, 8 * count)).cast("q").tolist() if count else []
        if reuse:
            seq_ids, num_tokens, samples = (list(values) for values in self._batch)  # type: ignore[union-attr]
        else:
            seq_ids, num_tokens = ints[tail : tail + n_batch], ints[tail + n_batch :]
            samples = memoryview(ffi.buffer(plan.samples, n_batch)).cast("?").tolist() if n_batch else []
            self._batch = (list(seq_ids), list(num_tokens), list(samples))
        at = n_batch + n_frees + n_preempted
        return StepPlan(
            seq_ids=seq_ids,
            num_tokens=num_tokens,
            start_positions=ints[:n_batch],
            samples=samples,
            frees=ints[n_batch : n_batch + n_frees],
            preempted=ints[n_batch + n_frees : at],
            grow_seq_ids=ints[at : at + n_grows],
            grow_num_blocks=ints[at + n_grows : tail],
        )

    def _raise(self, status: int, arrivals: Sequence[NewSequence]) -> None:
        lib, index = self._lib, self._plan.bad_index
        if status == lib.NP_ERR_DUPLICATE:
            raise ValueError(f"sequence {arrivals[index].seq_id} is already scheduled")
        if status == lib.NP_ERR_ARG and 0 <= index < len(arrivals):
            raise ValueError(
                f"sequence {arrivals[index].seq_id}: num_prompt_tokens={arrivals[index].num_prompt_tokens} "
                f"must be in [0, {MAX_PROMPT_TOKENS}]"
            )
        if status == lib.NP_ERR_NOMEM:
            raise MemoryError("the native scheduler ran out of memory")
        raise RuntimeError(f"np_scheduler_schedule failed with status {status}")
