"""The C scheduler against the Python one: identical StepPlans, step by step, for both policies."""

from __future__ import annotations

import gc
import random

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from infer_prof.engine.kv_alloc import PythonKVAllocator
from infer_prof.engine.scheduler import PythonScheduler
from infer_prof.engine.types import NewSequence, Scheduler, StepPlan
from tests.native_paths.support import requires_native, twin_params


def make_native(block_size: int, max_batch: int, max_batched_tokens: int, policy: str = "fcfs") -> Scheduler:
    from infer_prof.native_paths.scheduler import NativeScheduler

    return NativeScheduler(block_size, max_batch, max_batched_tokens, policy)


parametrize_scheduler = pytest.mark.parametrize("make_scheduler", twin_params(PythonScheduler, make_native))


def batch(plan: StepPlan) -> list[tuple[int, int, int, bool]]:
    return list(zip(plan.seq_ids, plan.num_tokens, plan.start_positions, plan.samples))


@parametrize_scheduler
def test_chunked_prefill_then_decode(make_scheduler) -> None:  # type: ignore[no-untyped-def]
    scheduler = make_scheduler(4, 4, 8)
    assert isinstance(scheduler, Scheduler)
    plan = scheduler.schedule([NewSequence(1, 20, 5)], [], 100)
    assert batch(plan) == [(1, 8, 0, False)] and plan.grow_num_blocks.tolist() == [2]
    assert batch(scheduler.schedule([], [], 98)) == [(1, 8, 8, False)]
    assert batch(scheduler.schedule([], [], 96)) == [(1, 4, 16, True)]
    plan = scheduler.schedule([], [], 95)
    assert batch(plan) == [(1, 1, 20, True)] and plan.grow_seq_ids.tolist() == [1]
    assert scheduler.num_running == 1 and scheduler.num_waiting == 0


@parametrize_scheduler
def test_preemption_frees_the_newest_which_then_waits_at_the_head(make_scheduler) -> None:  # type: ignore[no-untyped-def]
    scheduler, pool = make_scheduler(4, 4, 100), PythonKVAllocator(4, 4)

    def step(arrivals: list[NewSequence], finished: list[int]) -> StepPlan:
        plan = scheduler.schedule(arrivals, finished, pool.num_free_blocks)
        pool.step(plan.frees, plan.grow_seq_ids, plan.grow_num_blocks, plan.seq_ids)
        return plan

    step([NewSequence(0, 7, 10), NewSequence(1, 7, 10)], [])
    step([NewSequence(2, 1, 2)], [])
    plan = step([], [])
    assert plan.preempted.tolist() == [1] and plan.frees.tolist() == [1] and batch(plan) == [(0, 1, 8, True)]
    assert batch(step([], [])) == [(0, 1, 9, True)] and scheduler.num_waiting == 2
    plan = step([], [0])
    assert plan.frees.tolist() == [0] and batch(plan) == [(1, 9, 0, True), (2, 1, 0, True)]


@parametrize_scheduler
def test_priority_victim_comes_from_the_unscheduled_rest(make_scheduler) -> None:  # type: ignore[no-untyped-def]
    scheduler = make_scheduler(2, 4, 100, "priority")
    scheduler.schedule([NewSequence(0, 2, 9, 0), NewSequence(1, 2, 9, 9), NewSequence(2, 2, 9, 1)], [], 3)
    plan = scheduler.schedule([], [], 0)
    assert plan.preempted.tolist() == [1, 2] and plan.seq_ids.tolist() == [0] and scheduler.num_waiting == 2
    scheduler = make_scheduler(4, 4, 100, "priority")
    scheduler.schedule([NewSequence(0, 5, 9, priority=9)], [], 2)
    assert scheduler.schedule([NewSequence(1, 4, 9, priority=0)], [], 1).seq_ids.tolist() == [0, 1]
    plan = scheduler.schedule([], [], 0)
    assert plan.seq_ids.tolist() == [0] and plan.preempted.tolist() == [1]


@parametrize_scheduler
def test_duplicate_arrival_is_refused_like_python(make_scheduler) -> None:  # type: ignore[no-untyped-def]
    scheduler = make_scheduler(4, 4, 100)
    scheduler.schedule([NewSequence(3, 4, 4)], [], 10)
    with pytest.raises(ValueError, match="already scheduled"):
        scheduler.schedule([NewSequence(4, 4, 4), NewSequence(3, 4, 4)], [], 10)
    # The step stopped at the duplicate: 4 was admitted to waiting, as in Python.
    assert scheduler.num_waiting == 1 and scheduler.num_running == 1
    assert scheduler.schedule([], [], 10).seq_ids.tolist() == [3, 4]


@requires_native
def test_adapter_refuses_bad_arguments() -> None:
    with pytest.raises(ValueError, match="policy"):
        make_native(4, 4, 100, "lifo")
    with pytest.raises(ValueError, match="max_batch"):
        make_native(4, 0, 100)
    scheduler = make_native(4, 1, 100)
    scheduler.schedule([NewSequence(7, 3, 4), NewSequence(8, 3, 4)], [], 10)
    with pytest.raises(ValueError, match="num_prompt_tokens"):
        scheduler.schedule([NewSequence(1, -3, 4)], [], 10)
    with pytest.raises(ValueError, match="int64"):
        scheduler.schedule([], [2**64], 10)
    assert scheduler.num_waiting == 1 and scheduler.num_running == 1  # refused calls changed nothing


@requires_native
def test_native_memory_is_freed() -> None:
    from infer_prof.native_paths.loader import require

    _, lib = require()
    gc.collect()
    baseline = lib.np_live_allocations()
    scheduler = make_native(4, 8, 64, "priority")
    for step in range(50):
        scheduler.schedule([NewSequence(step, 5, 4, step % 3)], [step - 4], 20)
    scheduler.close()
    assert lib.np_live_allocations() == baseline


def drive(
    scheduler: Scheduler,
    pool: PythonKVAllocator,
    rng: random.Random,
    steps: int,
    id_space: int,
    max_prompt: int = 30,
    finish_chance: float = 0.08,
) -> list[tuple[StepPlan, int, int]]:
    """A random workload: arrivals (ids reused after they finish), finishes of running, waiting and
    unknown ids, with the real allocator giving the free blocks (so that preemption happens)."""
    trace: list[tuple[StepPlan, int, int]] = []
    live: set[int] = set()
    finished: list[int] = []
    for _ in range(steps):
        arrivals = []
        for _ in range(rng.choice([0, 0, 1, 1, 2, 4])):
            free_ids = [i for i in range(id_space) if i not in live]
            if free_ids:
                seq_id = rng.choice(free_ids)
                live.add(seq_id)
                arrivals.append(NewSequence(seq_id, rng.randint(0, max_prompt), 8, rng.randint(-2, 3)))
        plan = scheduler.schedule(arrivals, finished, pool.num_free_blocks)
        pool.step(plan.frees, plan.grow_seq_ids, plan.grow_num_blocks, plan.seq_ids)
        trace.append((plan.copy(), scheduler.num_waiting, scheduler.num_running))  # a native plan is reused
        finished = [seq_id for seq_id in sorted(live) if rng.random() < finish_chance] + [
            rng.randrange(-3, id_space + 3)
        ]
        live -= set(finished)
    return trace


@requires_native
@settings(max_examples=120, deadline=None)
@given(
    policy=st.sampled_from(["fcfs", "priority"]),
    block_size=st.sampled_from([1, 2, 3, 4, 16]),
    num_blocks=st.integers(2, 40),
    max_batch=st.integers(1, 8),
    max_batched_tokens=st.integers(1, 64),
    seed=st.integers(0, 2**32),
)
def test_twins_plan_identical_steps(
    policy: str, block_size: int, num_blocks: int, max_batch: int, max_batched_tokens: int, seed: int
) -> None:
    python = drive(
        PythonScheduler(block_size, max_batch, max_batched_tokens, policy),
        PythonKVAllocator(num_blocks, block_size),
        random.Random(seed),
        60,
        24,
    )
    native = drive(
        make_native(block_size, max_batch, max_batched_tokens, policy),
        PythonKVAllocator(num_blocks, block_size),
        random.Random(seed),
        60,
        24,
    )
    for step, (expected, got) in enumerate(zip(python, native)):
        assert got == expected, f"step {step} differs"
    if any(len(plan.preempted) for plan, _, _ in python):
        event("preemption")


@requires_native
@pytest.mark.parametrize("policy", ["fcfs", "priority"])
def test_twins_agree_under_heavy_preemption(policy: str) -> None:
    """A pool far too small for the load: many preemptions per step (the random test may see few)."""
    python = drive(
        PythonScheduler(2, 16, 48, policy), PythonKVAllocator(12, 2), random.Random(7), 300, 40, 6, 0.03
    )
    native = drive(
        make_native(2, 16, 48, policy), PythonKVAllocator(12, 2), random.Random(7), 300, 40, 6, 0.03
    )
    assert sum(len(plan.preempted) for plan, _, _ in python) > 30
    assert native == python


@parametrize_scheduler
def test_a_free_count_near_int64_max_does_not_wrap(make_scheduler) -> None:  # type: ignore[no-untyped-def]
    # Found by the libFuzzer target (tests/native_paths/fuzz/): C added a finished sequence's blocks to
    # a free count of 2**63 - 1, wrapped negative and preempted sequence 2; Python grew it a block.
    scheduler = make_scheduler(4, 3, 16)
    scheduler.schedule([NewSequence(1, 4, 4), NewSequence(2, 4, 4)], [], 10)
    plan = scheduler.schedule([], [1], 2**63 - 1)
    assert batch(plan) == [(2, 1, 4, True)] and plan.preempted.tolist() == []
    assert plan.grow_seq_ids.tolist() == [2] and plan.grow_num_blocks.tolist() == [1]


@parametrize_scheduler
@pytest.mark.parametrize("bad", [0, 2**62 + 1, 1.5])
def test_both_twins_refuse_the_same_config_with_the_same_words(make_scheduler, bad) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match=r"must all be >= 1 \(block_size is not\)"):
        make_scheduler(bad, 4, 100)
    with pytest.raises(ValueError, match="unknown scheduling policy 'lifo': use one of fcfs, priority"):
        make_scheduler(4, 4, 100, "lifo")


def test_the_c_policy_table_names_every_policy() -> None:
    from infer_prof.engine.types import SCHEDULING_POLICIES
    from infer_prof.native_paths.scheduler import POLICIES

    assert tuple(POLICIES) == SCHEDULING_POLICIES
