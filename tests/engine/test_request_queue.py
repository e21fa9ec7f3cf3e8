"""The scheduler's policies as waiting queues: admission order, where a preempted sequence goes, the victim."""

from __future__ import annotations

import pytest

from infer_prof.engine.request_queue import QUEUES, FcfsQueue, PriorityQueue, SeqState, make_waiting_queue
from infer_prof.engine.scheduler import PythonScheduler
from infer_prof.engine.types import SCHEDULING_POLICIES, check_scheduler_config


def seq(seq_id: int, priority: int = 0, arrival: int | None = None) -> SeqState:
    return SeqState(seq_id, priority, seq_id if arrival is None else arrival, total=4, prompt=4)


def drain(queue: FcfsQueue | PriorityQueue) -> list[int]:
    order = []
    while queue.peek() is not None:
        order.append(queue.pop().seq_id)
    return order


def test_every_policy_has_a_queue_and_the_factory_makes_it() -> None:
    assert tuple(QUEUES) == SCHEDULING_POLICIES
    assert isinstance(make_waiting_queue("fcfs"), FcfsQueue)
    assert isinstance(make_waiting_queue("priority"), PriorityQueue)


def test_fcfs_admits_by_arrival_and_a_preempted_sequence_first() -> None:
    queue = FcfsQueue()
    for seq_id in (1, 2, 3):
        queue.push(seq(seq_id))
    queue.push_preempted(seq(9))
    queue.remove(next(s for s in list(queue._queue) if s.seq_id == 2))
    assert drain(queue) == [9, 1, 3]


def test_priority_admits_by_priority_then_arrival_wherever_a_sequence_came_from() -> None:
    queue = PriorityQueue()
    queue.push(seq(1, priority=2))
    queue.push(seq(2, priority=0))
    late = seq(3, priority=2, arrival=0)
    queue.push_preempted(late)  # a preempted sequence keeps its rank: no jump to the head
    queue.push(seq(4, priority=1))
    queue.remove(next(s for _, _, s in queue._heap if s.seq_id == 4))
    assert drain(queue) == [2, 3, 1]


def test_victims_newest_under_fcfs_largest_rank_after_index_under_priority() -> None:
    running = [seq(1, priority=5), seq(2, priority=0), seq(3, priority=1)]
    assert FcfsQueue().pick_victim(running, 0).seq_id == 3
    assert PriorityQueue().pick_victim(running, 0).seq_id == 1
    assert PriorityQueue().pick_victim(running, 1).seq_id == 3  # running[0] is already scheduled


@pytest.mark.parametrize("bad", [0, 2**62 + 1, 1.5])
def test_the_config_check_refuses_what_the_c_twin_cannot_hold(bad: object) -> None:
    with pytest.raises(ValueError, match=r"must all be >= 1 \(max_batch is not\)"):
        check_scheduler_config(16, bad, 64, "fcfs")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"max_batch is not"):
        PythonScheduler(16, bad, 64)  # type: ignore[arg-type]
