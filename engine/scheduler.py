"""Continuous batching under a token budget: running first, then waiting; chunked prefill; preemption by recompute.

The exact policy, which the C twin reproduces step for step, is in docs/twin-spec.md.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .request_queue import SeqState, make_waiting_queue
from .types import (
    EMPTY_FLAGS,
    EMPTY_IDS,
    NewSequence,
    StepPlan,
    check_scheduler_config,
)


class PythonScheduler:
    """engine.types.Scheduler: one plan per engine step, pure bookkeeping over token and block counts."""

    def __init__(
        self, block_size: int, max_batch: int, max_batched_tokens: int, policy: str = "fcfs"
    ) -> None:
        check_scheduler_config(block_size, max_batch, max_batched_tokens, policy)
        self.block_size = block_size
        self.max_batch = max_batch
        self.max_batched_tokens = max_batched_tokens
        self.policy = policy
        self._seqs: dict[int, SeqState] = {}
        self._running: list[SeqState] = []  # in the order they entered running
        self._waiting = make_waiting_queue(policy)  # the policy: who is admitted next, who gives way
        self._next_arrival = 0
        self._cached = 0  # sum of `computed` over running sequences (the others hold no blocks)

    @property
    def num_waiting(self) -> int:
        return len(self._seqs) - len(self._running)

    @property
    def num_running(self) -> int:
        return len(self._running)

    def state(self, seq_id: int) -> SeqState | None:
        return self._seqs.get(seq_id)

    # -- one step ------------------------------------------------------------------------------

    def schedule(
        self, arrivals: Sequence[NewSequence], finished: Sequence[int], num_free_blocks: int
    ) -> StepPlan:
        frees: list[int] = []
        free = num_free_blocks + self._retire(finished, frees)
        self._enqueue(arrivals)
        scheduled: list[tuple[SeqState, int, int]] = []
        grows: list[tuple[int, int]] = []
        preempted_ids: list[int] = []
        free, budget = self._continue_running(free, scheduled, grows, frees, preempted_ids)
        first_admitted = len(scheduled)
        if not preempted_ids:
            self._admit_waiting(free, budget, scheduled, grows)
        return self._plan(scheduled, grows, frees, preempted_ids, first_admitted)

    def _retire(self, finished: Sequence[int], frees: list[int]) -> int:
        """Forget the finished sequences (unknown ids are skipped); the blocks the running ones held, freed."""
        freed = 0
        for seq_id in finished:
            seq = self._seqs.pop(seq_id, None)
            if seq is None:
                continue
            if seq.running:
                self._running.remove(seq)
                frees.append(seq_id)
                freed += seq.held
                self._cached -= seq.computed
            else:
                self._waiting.remove(seq)
        return freed

    def _enqueue(self, arrivals: Sequence[NewSequence]) -> None:
        """The new sequences into the waiting queue, numbered in order of arrival."""
        for new in arrivals:
            if new.seq_id in self._seqs:
                raise ValueError(f"sequence {new.seq_id} is already scheduled")
            seq = SeqState(
                new.seq_id, new.priority, self._next_arrival, new.num_prompt_tokens, new.num_prompt_tokens
            )
            self._next_arrival += 1
            self._seqs[new.seq_id] = seq
            self._waiting.push(seq)

    def _continue_running(
        self,
        free: int,
        scheduled: list[tuple[SeqState, int, int]],
        grows: list[tuple[int, int]],
        frees: list[int],
        preempted_ids: list[int],
    ) -> tuple[int, int]:
        """The running sequences first, in order, each as many tokens as the budget leaves; when blocks run
        short the policy's victim is preempted until they suffice or the sequence itself gave way, which ends
        the pass. The blocks still free and the budget left."""
        budget = self.max_batched_tokens
        index = 0
        while index < len(self._running):
            seq = self._running[index]
            num_tokens = min(seq.total - seq.computed, budget)
            if num_tokens == 0:
                break
            need = self._blocks_needed(seq, num_tokens)
            while need > free:
                victim = self._waiting.pick_victim(self._running, index)
                free += self._preempt(victim, frees, preempted_ids)
                if victim is seq:
                    break
            if not seq.running:
                break
            free -= need
            self._admit(scheduled, grows, seq, num_tokens, need)
            budget -= num_tokens
            index += 1
        return free, budget

    def _preempt(self, victim: SeqState, frees: list[int], preempted_ids: list[int]) -> int:
        """`victim` back to waiting, to be recomputed from scratch; the blocks it held, freed."""
        self._running.remove(victim)
        freed = victim.held
        self._cached -= victim.computed
        victim.held = victim.computed = 0
        frees.append(victim.seq_id)
        preempted_ids.append(victim.seq_id)
        victim.running = False
        self._waiting.push_preempted(victim)
        return freed

    def _admit_waiting(
        self,
        free: int,
        budget: int,
        scheduled: list[tuple[SeqState, int, int]],
        grows: list[tuple[int, int]],
    ) -> None:
        """Waiting sequences in the policy's order while the batch, the budget and the free blocks allow."""
        while len(self._running) < self.max_batch and budget > 0:
            seq = self._waiting.peek()
            if seq is None:
                break
            num_tokens = min(seq.total - seq.computed, budget)
            need = self._blocks_needed(seq, num_tokens)
            if need > free:
                break  # head-of-line: nothing behind it is admitted
            self._waiting.pop()
            seq.running = True
            self._running.append(seq)
            free -= need
            self._admit(scheduled, grows, seq, num_tokens, need)
            budget -= num_tokens

    def _plan(
        self,
        scheduled: list[tuple[SeqState, int, int]],
        grows: list[tuple[int, int]],
        frees: list[int],
        preempted_ids: list[int],
        first_admitted: int,
    ) -> StepPlan:
        """Apply the step's computed tokens and hand the decisions over as arrays."""
        seq_ids, counts, starts, samples = [], [], [], []
        prefill = decode = 0
        for seq, num_tokens, start in scheduled:
            sample = start + num_tokens == seq.total
            seq_ids.append(seq.seq_id)
            counts.append(num_tokens)
            starts.append(start)
            samples.append(sample)
            if num_tokens == 1 and start >= seq.prompt:
                decode += 1
            else:
                prefill += num_tokens
            seq.computed += num_tokens
            self._cached += num_tokens
            if sample:
                seq.total += 1
        return StepPlan(
            seq_ids=_ids(seq_ids),
            num_tokens=_ids(counts),
            start_positions=_ids(starts),
            samples=np.array(samples, dtype=np.bool_) if samples else EMPTY_FLAGS,
            frees=_ids(frees),
            preempted=_ids(preempted_ids),
            grow_seq_ids=_ids([seq_id for seq_id, _ in grows]),
            grow_num_blocks=_ids([need for _, need in grows]),
            num_waiting=self.num_waiting,
            num_running=len(self._running),
            first_admitted=first_admitted,
            prefill_tokens=prefill,
            decode_tokens=decode,
            num_cached_tokens=self._cached,
        )

    def _blocks_needed(self, seq: SeqState, num_tokens: int) -> int:
        return -(-(seq.computed + num_tokens) // self.block_size) - seq.held

    @staticmethod
    def _admit(
        scheduled: list[tuple[SeqState, int, int]],
        grows: list[tuple[int, int]],
        seq: SeqState,
        num_tokens: int,
        need: int,
    ) -> None:
        seq.held += need
        scheduled.append((seq, num_tokens, seq.computed))
        if need > 0:
            grows.append((seq.seq_id, need))


def _ids(values: list[int]) -> np.ndarray:
    return np.array(values, dtype=np.int64) if values else EMPTY_IDS
