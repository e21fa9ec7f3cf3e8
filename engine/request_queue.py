"""The scheduler's policies, one waiting-queue class each behind one small interface (vLLM v1's request_queue.py).

A policy decides two things: which waiting sequence is admitted next, and which running sequence gives way
when blocks run out. The C twin keeps the same two decisions as a table of functions over its arrays
(native_paths/csrc/scheduler.c); docs/twin-spec.md has the exact orders.
"""

from __future__ import annotations

import heapq
from collections import deque
from dataclasses import dataclass
from typing import Protocol


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


class WaitingQueue(Protocol):
    """The waiting sequences in the order a policy admits them, and the running one it preempts first."""

    def push(self, seq: SeqState) -> None:
        """A new arrival."""
        ...

    def push_preempted(self, seq: SeqState) -> None:
        """A sequence preempted this step, to wait again."""
        ...

    def peek(self) -> SeqState | None:
        """The sequence admitted next, left waiting; None when none waits."""
        ...

    def pop(self) -> SeqState:
        """Take the sequence peek() names."""
        ...

    def remove(self, seq: SeqState) -> None:
        """A waiting sequence that finished (aborted) before it ran."""
        ...

    def pick_victim(self, running: list[SeqState], index: int) -> SeqState:
        """The sequence to preempt: `running[index]` or a later one, none already scheduled this step."""
        ...


class FcfsQueue:
    """First come, first served: arrivals at the back, a preempted sequence back at the head; the newest
    running sequence gives way."""

    def __init__(self) -> None:
        self._queue: deque[SeqState] = deque()

    def push(self, seq: SeqState) -> None:
        self._queue.append(seq)

    def push_preempted(self, seq: SeqState) -> None:
        self._queue.appendleft(seq)

    def peek(self) -> SeqState | None:
        return self._queue[0] if self._queue else None

    def pop(self) -> SeqState:
        return self._queue.popleft()

    def remove(self, seq: SeqState) -> None:
        self._queue.remove(seq)

    def pick_victim(self, running: list[SeqState], index: int) -> SeqState:
        return running[-1]


class PriorityQueue:
    """Lowest (priority, arrival) first, wherever a sequence came from; the largest (priority, arrival)
    among the running ones not yet scheduled this step gives way."""

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, SeqState]] = []

    def push(self, seq: SeqState) -> None:
        heapq.heappush(self._heap, (seq.priority, seq.arrival, seq))

    def push_preempted(self, seq: SeqState) -> None:
        self.push(seq)

    def peek(self) -> SeqState | None:
        return self._heap[0][2] if self._heap else None

    def pop(self) -> SeqState:
        return heapq.heappop(self._heap)[2]

    def remove(self, seq: SeqState) -> None:
        self._heap.remove((seq.priority, seq.arrival, seq))
        heapq.heapify(self._heap)

    def pick_victim(self, running: list[SeqState], index: int) -> SeqState:
        return max(running[index:], key=lambda seq: seq.rank)


# Policy name -> its queue: a new policy is one class and one line here (and its C twin's table entry).
QUEUES: dict[str, type[FcfsQueue] | type[PriorityQueue]] = {"fcfs": FcfsQueue, "priority": PriorityQueue}


def make_waiting_queue(policy: str) -> WaitingQueue:
    """The waiting queue of a policy named in engine.types.SCHEDULING_POLICIES."""
    return QUEUES[policy]()
