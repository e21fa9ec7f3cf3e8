"""Tests of the Python scheduler: hand-made scenarios from the twin spec, and properties with the real allocator."""

from __future__ import annotations

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from infer_prof.engine.kv_alloc import PythonKVAllocator
from infer_prof.engine.scheduler import PythonScheduler
from infer_prof.engine.types import NewSequence, Scheduler, StepPlan


def batch(plan: StepPlan) -> list[tuple[int, int, int, bool]]:
    return list(zip(plan.seq_ids, plan.num_tokens, plan.start_positions, plan.samples))


def grows(plan: StepPlan) -> list[tuple[int, int]]:
    return list(zip(plan.grow_seq_ids, plan.grow_num_blocks))


def test_is_a_scheduler_and_validates_its_config() -> None:
    assert isinstance(PythonScheduler(16, 4, 64), Scheduler)
    with pytest.raises(ValueError, match="policy"):
        PythonScheduler(16, 4, 64, policy="lifo")
    with pytest.raises(ValueError, match="max_batch"):
        PythonScheduler(16, 0, 64)


def test_chunked_prefill_of_a_long_prompt_then_decode() -> None:
    scheduler = PythonScheduler(block_size=4, max_batch=4, max_batched_tokens=8)
    plan = scheduler.schedule([NewSequence(1, 20, 5)], [], 100)
    assert batch(plan) == [(1, 8, 0, False)] and grows(plan) == [(1, 2)]
    plan = scheduler.schedule([], [], 98)
    assert batch(plan) == [(1, 8, 8, False)] and grows(plan) == [(1, 2)]
    plan = scheduler.schedule([], [], 96)
    assert batch(plan) == [(1, 4, 16, True)] and grows(plan) == [(1, 1)]
    plan = scheduler.schedule([], [], 95)  # the sampled token (position 20) opens a sixth block
    assert batch(plan) == [(1, 1, 20, True)] and grows(plan) == [(1, 1)]
    plan = scheduler.schedule([], [], 94)
    assert batch(plan) == [(1, 1, 21, True)] and grows(plan) == []
    assert scheduler.num_running == 1 and scheduler.num_waiting == 0


def test_decode_batching_running_first_then_a_chunk_of_the_waiting_head() -> None:
    scheduler = PythonScheduler(block_size=4, max_batch=8, max_batched_tokens=10)
    plan = scheduler.schedule([NewSequence(i, 3, 9) for i in range(3)], [], 100)
    assert batch(plan) == [(0, 3, 0, True), (1, 3, 0, True), (2, 3, 0, True)]
    plan = scheduler.schedule([NewSequence(3, 12, 9), NewSequence(4, 2, 9)], [], 97)
    # Three decodes take 3 tokens of the budget; the head of waiting gets the remaining 7 (a chunk);
    # sequence 4 waits even though it is short: the budget is spent.
    assert batch(plan) == [(0, 1, 3, True), (1, 1, 3, True), (2, 1, 3, True), (3, 7, 0, False)]
    assert grows(plan) == [(3, 2)]
    assert scheduler.num_waiting == 1
    plan = scheduler.schedule([], [], 95)
    assert batch(plan) == [
        (0, 1, 4, True),
        (1, 1, 4, True),
        (2, 1, 4, True),
        (3, 5, 7, True),
        (4, 2, 0, True),
    ]
    assert grows(plan) == [(0, 1), (1, 1), (2, 1), (3, 1), (4, 1)]


def test_max_num_seqs_limits_running() -> None:
    scheduler = PythonScheduler(block_size=4, max_batch=2, max_batched_tokens=100)
    plan = scheduler.schedule([NewSequence(i, 2, 4) for i in range(5)], [], 100)
    assert plan.seq_ids.tolist() == [0, 1] and scheduler.num_running == 2 and scheduler.num_waiting == 3
    plan = scheduler.schedule([], [0], 98)
    assert plan.frees.tolist() == [0] and plan.seq_ids.tolist() == [1, 2]


def test_finished_running_frees_blocks_finished_waiting_is_dropped_unknown_ignored() -> None:
    scheduler = PythonScheduler(block_size=4, max_batch=1, max_batched_tokens=100)
    scheduler.schedule([NewSequence(0, 5, 4), NewSequence(1, 5, 4)], [], 2)
    plan = scheduler.schedule([], [1, 0, 77], 0)  # 0's two blocks come back and go to... nobody waits
    assert plan.frees.tolist() == [0] and plan.seq_ids.tolist() == [] and scheduler.num_waiting == 0
    assert scheduler.num_running == 0


def test_preemption_of_the_newest_when_blocks_run_out_and_it_waits_at_the_head() -> None:
    scheduler = PythonScheduler(block_size=4, max_batch=4, max_batched_tokens=100)
    pool = PythonKVAllocator(4, 4)

    def step(arrivals: list[NewSequence], finished: list[int]) -> StepPlan:
        plan = scheduler.schedule(arrivals, finished, pool.num_free_blocks)
        pool.step(plan.frees, plan.grow_seq_ids, plan.grow_num_blocks, plan.seq_ids)
        return plan

    plan = step([NewSequence(0, 7, 10), NewSequence(1, 7, 10)], [])
    assert batch(plan) == [(0, 7, 0, True), (1, 7, 0, True)] and pool.num_free_blocks == 0
    plan = step([NewSequence(2, 1, 2)], [])  # position 7 still fits both second blocks
    assert batch(plan) == [(0, 1, 7, True), (1, 1, 7, True)]
    plan = step([], [])  # position 8 needs a third block each: preempt 1 (the newest)
    assert plan.preempted.tolist() == [1] and plan.frees.tolist() == [1]
    assert batch(plan) == [(0, 1, 8, True)] and grows(plan) == [(0, 1)]
    assert scheduler.state(1).computed == 0 and scheduler.state(1).total == 9
    # 1 went back to the head of waiting, in front of 2: 2 is not admitted although it would fit.
    plan = step([], [])
    assert batch(plan) == [(0, 1, 9, True)] and scheduler.num_waiting == 2
    plan = step([], [0])
    # 0 finishes: 1 is recomputed (its 9 known tokens in one chunk, sampling the next), then 2.
    assert plan.frees.tolist() == [0] and batch(plan) == [(1, 9, 0, True), (2, 1, 0, True)]


def test_preemption_of_itself_when_the_newest_cannot_grow() -> None:
    scheduler = PythonScheduler(block_size=2, max_batch=4, max_batched_tokens=100)
    scheduler.schedule([NewSequence(0, 2, 10), NewSequence(1, 2, 10)], [], 2)
    plan = scheduler.schedule([], [], 0)
    # 0 needs a block: 1 is preempted for it (the newest); then nothing more runs this step.
    assert plan.preempted.tolist() == [1] and plan.seq_ids.tolist() == [0]
    scheduler = PythonScheduler(block_size=2, max_batch=4, max_batched_tokens=100)
    scheduler.schedule([NewSequence(0, 1, 10), NewSequence(1, 2, 10)], [], 2)
    plan = scheduler.schedule([], [], 0)
    # 0 (position 1) still fits its block; 1 (position 2) needs one, and is itself the newest.
    assert batch(plan) == [(0, 1, 1, True)] and plan.preempted.tolist() == [1] and plan.frees.tolist() == [1]


def test_priority_admission_order_and_preemption_victim() -> None:
    scheduler = PythonScheduler(block_size=4, max_batch=1, max_batched_tokens=100, policy="priority")
    plan = scheduler.schedule(
        [NewSequence(0, 2, 4, 5), NewSequence(1, 2, 4, 1), NewSequence(2, 2, 4, 3)], [], 10
    )
    assert plan.seq_ids.tolist() == [1]
    assert scheduler.schedule([NewSequence(3, 2, 4, 3)], [1], 9).seq_ids.tolist() == [
        2
    ]  # 3 ties 2: earlier arrival
    assert scheduler.schedule([], [2], 9).seq_ids.tolist() == [3]
    assert scheduler.schedule([], [3], 9).seq_ids.tolist() == [0]

    scheduler = PythonScheduler(block_size=2, max_batch=4, max_batched_tokens=100, policy="priority")
    arrivals = [NewSequence(0, 2, 9, 0), NewSequence(1, 2, 9, 9), NewSequence(2, 2, 9, 1)]
    scheduler.schedule(arrivals, [], 3)
    plan = scheduler.schedule([], [], 0)
    # 0 needs a block: the victim is the largest (priority, arrival) = 1, not the newest (2);
    # then 2 needs one and is the worst of the sequences from it onwards: it preempts itself.
    assert plan.preempted.tolist() == [1, 2] and plan.seq_ids.tolist() == [0]
    assert scheduler.num_waiting == 2


def test_priority_victim_is_never_a_sequence_already_scheduled_this_step() -> None:
    scheduler = PythonScheduler(block_size=4, max_batch=4, max_batched_tokens=100, policy="priority")
    scheduler.schedule([NewSequence(0, 5, 9, priority=9)], [], 2)
    assert scheduler.schedule([NewSequence(1, 4, 9, priority=0)], [], 1).seq_ids.tolist() == [0, 1]
    plan = scheduler.schedule([], [], 0)
    # 0 (the worse priority) fits and is scheduled first; 1 needs a block and only itself is a candidate.
    assert plan.seq_ids.tolist() == [0] and plan.preempted.tolist() == [1]


def test_frees_list_finished_then_preempted() -> None:
    scheduler = PythonScheduler(block_size=2, max_batch=4, max_batched_tokens=100)
    scheduler.schedule([NewSequence(i, 2, 9) for i in range(3)], [], 3)
    plan = scheduler.schedule([], [0], 0)
    # 0's block goes to 1; 2 (the newest) then needs one and preempts itself.
    assert plan.frees.tolist() == [0, 2] and plan.preempted.tolist() == [2] and plan.seq_ids.tolist() == [1]
    plan = scheduler.schedule([NewSequence(5, 2, 9)], [], 0)
    assert plan.seq_ids.tolist() == [1] and scheduler.num_waiting == 2  # 2 at the head blocks 5
    plan = scheduler.schedule([], [5], 1)
    assert plan.frees.tolist() == [] and plan.seq_ids.tolist() == [1]  # 5 was waiting: no blocks to give back


# -- properties over random workloads, with the real allocator ----------------------------------


def check_counts(plan: StepPlan, cached: dict[int, int], prompts: dict[int, int]) -> None:
    """The plan's counts against the engine's own bookkeeping of them (updates `cached`)."""
    for seq_id in plan.frees.tolist():
        cached.pop(seq_id, None)
    rows = batch(plan)
    assert all(seq_id in cached for seq_id, *_ in rows[: plan.first_admitted]), (
        "a running entry was not running"
    )
    assert not any(seq_id in cached for seq_id, *_ in rows[plan.first_admitted :]), "an admission was running"
    decode = sum(1 for seq_id, n, start, _ in rows if n == 1 and start >= prompts[seq_id])
    assert plan.decode_tokens == decode
    assert plan.prefill_tokens == sum(n for _, n, _, _ in rows) - decode
    for seq_id, n, start, _ in rows:
        cached[seq_id] = start + n
    assert plan.num_cached_tokens == sum(cached.values())


request = st.tuples(st.integers(0, 6), st.integers(1, 40), st.integers(1, 12), st.integers(0, 3))


@settings(max_examples=200, deadline=None)
@given(
    policy=st.sampled_from(["fcfs", "priority"]),
    block_size=st.sampled_from([1, 2, 4, 16]),
    num_blocks=st.integers(4, 40),
    max_batch=st.integers(1, 6),
    max_batched_tokens=st.integers(1, 48),
    requests=st.lists(request, min_size=1, max_size=25),
    finish_rolls=st.lists(st.integers(0, 9), min_size=8, max_size=8),
)
def test_random_workload_never_overallocates_respects_budgets_and_completes(
    policy: str,
    block_size: int,
    num_blocks: int,
    max_batch: int,
    max_batched_tokens: int,
    requests: list[tuple[int, int, int, int]],
    finish_rolls: list[int],
) -> None:
    capacity = num_blocks * block_size
    scheduler = PythonScheduler(block_size, max_batch, max_batched_tokens, policy)
    pool = PythonKVAllocator(num_blocks, block_size)
    # (arrival step, prompt, max_tokens, priority), trimmed so that each request fits the pool alone.
    pending = []
    for seq_id, (arrive, prompt, max_tokens, priority) in enumerate(requests):
        prompt = min(prompt, capacity - 1)
        pending.append((arrive, NewSequence(seq_id, prompt, min(max_tokens, capacity - prompt), priority)))
    generated = dict.fromkeys(range(len(pending)), 0)
    known = {}  # seq_id -> tokens known (prompt + generated)
    cached: dict[int, int] = {}  # seq_id -> tokens in the cache, for every sequence holding blocks
    done: set[int] = set()
    finished: list[int] = []
    for step in range(2000):
        arrivals = [new for arrive, new in pending if arrive == step]
        for new in arrivals:
            known[new.seq_id] = new.num_prompt_tokens
        plan = scheduler.schedule(arrivals, finished, pool.num_free_blocks)
        tables = pool.step(
            plan.frees, plan.grow_seq_ids, plan.grow_num_blocks, plan.seq_ids
        )  # raises if over
        finished = []
        check_counts(plan, cached, {new.seq_id: new.num_prompt_tokens for _, new in pending})
        assert (plan.num_waiting, plan.num_running) == (scheduler.num_waiting, scheduler.num_running)
        assert plan.num_batched_tokens <= max_batched_tokens
        assert len(plan) <= max_batch and scheduler.num_running <= max_batch
        assert len(set(plan.seq_ids)) == len(plan)
        assert not set(plan.seq_ids) & done
        for row, (seq_id, n, start, sample) in enumerate(batch(plan)):
            assert n >= 1 and start + n <= known[seq_id]
            assert sample == (start + n == known[seq_id])
            table = [b for b in tables[row].tolist() if b >= 0]
            assert len(table) * block_size >= start + n  # the cache can hold what is computed
            assert len(table) == -(-(start + n) // block_size)  # and not a block more
            if sample:
                generated[seq_id] += 1
                known[seq_id] += 1
                new = pending[seq_id][1]
                # Finish on max_tokens, or at random (an EOS) for some of them.
                if generated[seq_id] == new.max_tokens or finish_rolls[(seq_id + step) % 8] == 0:
                    finished.append(seq_id)
                    done.add(seq_id)
        for seq_id in plan.preempted:
            assert pool.block_table(seq_id) == []
            event("preempted")
        if len(done) == len(pending):
            break
    assert len(done) == len(pending), "some sequence never completed"
    scheduler.schedule([], finished, pool.num_free_blocks)
    pool.step(finished, [], [], [])
    assert pool.num_free_blocks == num_blocks
    assert scheduler.num_running == scheduler.num_waiting == 0
