"""The fused core (scheduler + kv_alloc + prepare in one C call) against the three Python twins: identical steps."""

from __future__ import annotations

import gc
import random
from typing import Any

import numpy as np
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from infer_prof.engine.kv_alloc import PythonKVAllocator
from infer_prof.engine.prepare import PythonPrepare
from infer_prof.engine.scheduler import PythonScheduler
from infer_prof.engine.types import KVAllocator, NewSequence, Prepare, Scheduler
from tests.native_paths.support import requires_native

pytestmark = requires_native


def make_core(
    num_blocks: int, block_size: int, max_batch: int, max_batched_tokens: int, policy: str = "fcfs"
) -> tuple[Any, Any, Any]:
    from infer_prof.native_paths.core import core_components

    return core_components(num_blocks, block_size, max_batch, max_batched_tokens, policy)


def make_python(
    num_blocks: int, block_size: int, max_batch: int, max_batched_tokens: int, policy: str = "fcfs"
) -> tuple[Any, Any, Any]:
    return (
        PythonScheduler(block_size, max_batch, max_batched_tokens, policy),
        PythonKVAllocator(num_blocks, block_size),
        PythonPrepare(block_size),
    )


def drive(parts: tuple[Any, Any, Any], seed: int, steps: int, policy_priorities: bool) -> list[object]:
    """The engine's order of calls on a random workload: every step's plan, tables and input as lists."""
    scheduler, pool, prepare = parts
    rng = random.Random(seed)
    trace: list[object] = []
    next_id, finished, generated = 0, [], {}
    for _ in range(steps):
        arrivals = []
        for _ in range(rng.choice([0, 0, 1, 1, 3])):
            length = rng.randint(0, 30) or 1
            arrivals.append(NewSequence(next_id, length, 8, rng.randint(-2, 3) if policy_priorities else 0))
            prepare.add(next_id, [rng.randrange(1000) for _ in range(length)])
            generated[next_id] = 0
            next_id += 1
        plan = scheduler.schedule(arrivals, finished, pool.num_free_blocks)
        tables = pool.step(plan.frees, plan.grow_seq_ids, plan.grow_num_blocks, plan.seq_ids)
        trace.append((plan.as_lists(), tables.tolist(), pool.num_free_blocks, scheduler.num_waiting))
        finished = []
        if not len(plan.seq_ids):
            continue
        inp = prepare.prepare(plan, tables)
        trace.append(inp.as_lists())
        sampled = plan.seq_ids[plan.samples].tolist()
        if sampled:
            prepare.append_sampled([(7 * seq_id + len(trace)) % 1000 for seq_id in sampled])
        for seq_id in sampled:
            generated[seq_id] += 1
            if generated[seq_id] >= 8 or rng.random() < 0.05:
                finished.append(seq_id)
                prepare.remove(seq_id)
        if len(plan.preempted):
            event("preemption")
    return trace


@settings(max_examples=60, deadline=None)
@given(
    policy=st.sampled_from(["fcfs", "priority"]),
    block_size=st.sampled_from([1, 2, 4, 16]),
    num_blocks=st.integers(40, 80),
    max_batch=st.integers(1, 8),
    max_batched_tokens=st.integers(1, 64),
    seed=st.integers(0, 2**32),
)
def test_core_steps_like_the_python_twins(
    policy: str, block_size: int, num_blocks: int, max_batch: int, max_batched_tokens: int, seed: int
) -> None:
    sizes = (num_blocks, block_size, max_batch, max_batched_tokens, policy)
    python = drive(make_python(*sizes), seed, 70, policy == "priority")
    native = drive(make_core(*sizes), seed, 70, policy == "priority")
    assert native == python


def test_faces_satisfy_the_protocols_and_refuse_misuse() -> None:
    scheduler, pool, prepare = make_core(16, 4, 4, 32)
    assert isinstance(scheduler, Scheduler) and isinstance(pool, KVAllocator) and isinstance(prepare, Prepare)
    with pytest.raises(RuntimeError, match="schedule"):
        pool.step([], [], [], [])
    prepare.add(1, [3, 4, 5])
    plan = scheduler.schedule([NewSequence(1, 3, 4)], [], pool.num_free_blocks)
    tables = pool.step(plan.frees, plan.grow_seq_ids, plan.grow_num_blocks, plan.seq_ids)
    with pytest.raises(RuntimeError, match="plan it returned"):
        prepare.prepare(plan.copy(), tables)
    assert prepare.prepare(plan, tables).token_ids.tolist() == [3, 4, 5]
    with pytest.raises(RuntimeError, match="once per step"):
        prepare.prepare(plan, tables)
    with pytest.raises(ValueError, match="already scheduled"):
        scheduler.schedule([NewSequence(1, 3, 4)], [], pool.num_free_blocks)


def test_a_preparation_failure_fails_at_prepare_and_the_plan_stands() -> None:
    scheduler, pool, prepare = make_core(16, 4, 4, 32)
    plan = scheduler.schedule([NewSequence(5, 2, 4)], [], 16)  # never added to the preparation
    assert plan.seq_ids.tolist() == [5] and scheduler.num_running == 1
    tables = pool.step(plan.frees, plan.grow_seq_ids, plan.grow_num_blocks, plan.seq_ids)
    assert tables.tolist() == [[0]] and pool.num_free_blocks == 15
    with pytest.raises(KeyError, match="sequence 5 was never added"):
        prepare.prepare(plan, tables)


def test_core_memory_is_freed() -> None:
    from infer_prof.native_paths.core import NativeCore
    from infer_prof.native_paths.loader import require

    _, lib = require()
    gc.collect()
    baseline = lib.np_live_allocations()
    core = NativeCore(64, 4, 8, 64)
    trace = drive((core.scheduler, core.kv_alloc, core.prepare), 3, 80, False)
    assert trace and lib.np_live_allocations() > baseline
    core.close()
    assert lib.np_live_allocations() == baseline
    del core
    gc.collect()
    assert lib.np_live_allocations() == baseline


def test_tables_of_a_steady_batch_are_one_reused_view() -> None:
    scheduler, pool, prepare = make_core(64, 4, 4, 32)
    for seq_id in range(3):
        prepare.add(seq_id, [1, 2, 3])
    views, inputs = [], []
    arrivals = [NewSequence(seq_id, 3, 50) for seq_id in range(3)]
    for step in range(6):
        plan = scheduler.schedule(arrivals if step == 0 else [], [], pool.num_free_blocks)
        tables = pool.step(plan.frees, plan.grow_seq_ids, plan.grow_num_blocks, plan.seq_ids)
        views.append(tables)
        inputs.append(prepare.prepare(plan, tables).block_tables)
        prepare.append_sampled([9, 9, 9])
    # Steps 2-5 decode positions 4..7 (block 1 of 4 tokens): the same shape, the same array object.
    assert views[2] is views[3] is views[4] is views[5] and inputs[3] is inputs[4]
    assert np.array_equal(views[5], [[0, 3], [1, 4], [2, 5]])
