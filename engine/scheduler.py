"""Continuous batching under a token budget: running first, then waiting; chunked prefill; preemption by recompute.

The exact policy, which the C twin reproduces step for step, is in docs/twin-spec.md.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from infer_prof.engine.types import EMPTY_FLAGS, EMPTY_IDS, NewSequence, StepPlan

POLICIES = ("fcfs", "priority")


@dataclass(slots=True, eq=False)  # identity equality: list.remove() finds the very object
class SeqState:
    """What the scheduler knows of one sequence: token counts and the blocks it holds."""

    seq_id: int
    priority: int
    arrival: int  # admission counter: FCFS order and the priority tie-break
    total: int  # prompt tokens + tokens generated so far
    prompt: int  # prompt tokens: a one-token chunk past them is a decode
    computed: int = 0  # tokens in the KV cache
    held: int = 0  # blocks held
    running: bool = False

    @property
    def rank(self) -> tuple[int, int]:
        return (self.priority, self.arrival)


class PythonScheduler:
    """engine.types.Scheduler: one plan per engine step, pure bookkeeping over token and block counts."""

    def __init__(
        self, block_size: int, max_batch: int, max_batched_tokens: int, policy: str = "fcfs"
    ) -> None:
        if block_size < 1 or max_batch < 1 or max_batched_tokens < 1:
            raise ValueError(
                f"block_size={block_size}, max_batch={max_batch} and "
                f"max_batched_tokens={max_batched_tokens} must all be >= 1"
            )
        if policy not in POLICIES:
            raise ValueError(f"unknown scheduling policy {policy!r}: use one of {', '.join(POLICIES)}")
        self.block_size = block_size
        self.max_batch = max_batch
        self.max_batched_tokens = max_batched_tokens
        self.policy = policy
        self._seqs: dict[int, SeqState] = {}
        self._running: list[SeqState] = []  # in the order they entered running
        # FCFS: a deque (preempted sequences go back to its head). Priority: a heap of (priority, arrival).
        self._waiting_fcfs: deque[SeqState] = deque()
        self._waiting_heap: list[tuple[int, int, SeqState]] = []
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

    # -- the waiting queue ---------------------------------------------------------------------

    def _push_waiting(self, seq: SeqState, at_head: bool) -> None:
        seq.running = False
        if self.policy == "fcfs":
            if at_head:
                self._waiting_fcfs.appendleft(seq)
            else:
                self._waiting_fcfs.append(seq)
        else:
            heapq.heappush(self._waiting_heap, (seq.priority, seq.arrival, seq))

    def _peek_waiting(self) -> SeqState | None:
        if self.policy == "fcfs":
            return self._waiting_fcfs[0] if self._waiting_fcfs else None
        return self._waiting_heap[0][2] if self._waiting_heap else None

    def _pop_waiting(self) -> SeqState:
        if self.policy == "fcfs":
            return self._waiting_fcfs.popleft()
        return heapq.heappop(self._waiting_heap)[2]

    def _remove_waiting(self, seq: SeqState) -> None:
        if self.policy == "fcfs":
            self._waiting_fcfs.remove(seq)
        else:
            self._waiting_heap.remove((seq.priority, seq.arrival, seq))
            heapq.heapify(self._waiting_heap)

    # -- one step ------------------------------------------------------------------------------

    def schedule(
        self, arrivals: Sequence[NewSequence], finished: Sequence[int], num_free_blocks: int
    ) -> StepPlan:
        free = num_free_blocks
        frees: list[int] = []
        preempted_ids: list[int] = []
        for seq_id in finished:
            seq = self._seqs.pop(seq_id, None)
            if seq is None:
                continue
            if seq.running:
                self._running.remove(seq)
                frees.append(seq_id)
                free += seq.held
                self._cached -= seq.computed
            else:
                self._remove_waiting(seq)
        for new in arrivals:
            if new.seq_id in self._seqs:
                raise ValueError(f"sequence {new.seq_id} is already scheduled")
            seq = SeqState(
                new.seq_id, new.priority, self._next_arrival, new.num_prompt_tokens, new.num_prompt_tokens
            )
            self._next_arrival += 1
            self._seqs[new.seq_id] = seq
            self._push_waiting(seq, at_head=False)

        budget = self.max_batched_tokens
        scheduled: list[tuple[SeqState, int, int]] = []
        grows: list[tuple[int, int]] = []
        index = 0
        while index < len(self._running):
            seq = self._running[index]
            num_tokens = min(seq.total - seq.computed, budget)
            if num_tokens == 0:
                break
            need = self._blocks_needed(seq, num_tokens)
            while need > free:
                victim = self._pick_victim(index)
                self._running.remove(victim)
                free += victim.held
                self._cached -= victim.computed
                victim.held = victim.computed = 0
                frees.append(victim.seq_id)
                preempted_ids.append(victim.seq_id)
                self._push_waiting(victim, at_head=True)
                if victim is seq:
                    break
            if not seq.running:
                break
            free -= need
            self._admit(scheduled, grows, seq, num_tokens, need)
            budget -= num_tokens
            index += 1
        first_admitted = len(scheduled)

        if not preempted_ids:
            while len(self._running) < self.max_batch and budget > 0:
                seq = self._peek_waiting()
                if seq is None:
                    break
                num_tokens = min(seq.total - seq.computed, budget)
                need = self._blocks_needed(seq, num_tokens)
                if need > free:
                    break  # head-of-line: nothing behind it is admitted
                self._pop_waiting()
                seq.running = True
                self._running.append(seq)
                free -= need
                self._admit(scheduled, grows, seq, num_tokens, need)
                budget -= num_tokens
        return self._plan(scheduled, grows, frees, preempted_ids, first_admitted)

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

    def _pick_victim(self, index: int) -> SeqState:
        """The sequence to preempt: only `running[index]` or a later one, none already scheduled this step."""
        if self.policy == "fcfs":
            return self._running[-1]
        return max(self._running[index:], key=lambda seq: seq.rank)

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
