"""The C input preparation against the Python one: the same ModelInput step by step, the same refusals."""

from __future__ import annotations

import gc
import random

import numpy as np
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from infer_prof.engine.kv_alloc import PythonKVAllocator
from infer_prof.engine.prepare import PythonPrepare
from infer_prof.engine.scheduler import PythonScheduler
from infer_prof.engine.types import NewSequence, Prepare
from tests.engine.test_prepare import TABLES, plan_of
from tests.native_paths.support import requires_native, twin_params


def make_native(block_size: int) -> Prepare:
    from infer_prof.native_paths.prepare import NativePrepare

    return NativePrepare(block_size)


parametrize_prepare = pytest.mark.parametrize("make_prepare", twin_params(PythonPrepare, make_native))


@parametrize_prepare
def test_tokens_positions_slots_and_sampled_rows(make_prepare) -> None:  # type: ignore[no-untyped-def]
    prepare = make_prepare(4)
    assert isinstance(prepare, Prepare)
    prepare.add(7, [11, 12, 13, 14, 15])
    prepare.add(9, list(range(20, 30)))
    inp = prepare.prepare(plan_of([(7, 5, 0, True), (9, 3, 7, False)]), TABLES)
    assert inp.token_ids.tolist() == [11, 12, 13, 14, 15, 27, 28, 29]
    assert inp.positions.tolist() == [0, 1, 2, 3, 4, 7, 8, 9]
    assert inp.slot_mapping.tolist() == [12, 13, 14, 15, 16, 7, 8, 9]
    assert inp.query_lens == [5, 3] and inp.context_lens == [5, 10] and inp.sample_indices.tolist() == [4]
    assert inp.block_tables.tolist() == TABLES.tolist()
    prepare.append_sampled([99])
    prepare.remove(9)
    inp = prepare.prepare(plan_of([(7, 1, 5, True)]), TABLES[:1])
    assert inp.token_ids.tolist() == [99] and inp.slot_mapping.tolist() == [17]
    assert (
        prepare.tokens(7) == [11, 12, 13, 14, 15, 99]
        and prepare.tokens(9) == []
        and prepare.num_sequences == 1
    )


@parametrize_prepare
def test_refusals_are_the_same(make_prepare) -> None:  # type: ignore[no-untyped-def]
    prepare = make_prepare(4)
    with pytest.raises(ValueError, match="prompt token ids"):
        prepare.add(1, [3, -1])
    with pytest.raises(ValueError, match="prompt token ids"):
        prepare.add(1, [2**31])
    prepare.add(1, [5, 6, 7])
    with pytest.raises(KeyError, match="sequence 4 was never added"):
        prepare.prepare(plan_of([(1, 1, 0, False), (4, 1, 0, True)]), TABLES)
    with pytest.raises(ValueError, match="sequence 1: tokens"):
        prepare.prepare(plan_of([(1, 2, 2, True)]), TABLES[:1])
    with pytest.raises(ValueError, match="padding"):
        prepare.prepare(plan_of([(1, 3, 0, True)]), np.array([[-1]], dtype=np.int32))
    with pytest.raises(ValueError, match="past"):
        prepare.prepare(plan_of([(1, 3, 0, True)]), np.empty((1, 0), dtype=np.int32))
    with pytest.raises(ValueError, match="2 block tables for a batch of 1"):
        prepare.prepare(plan_of([(1, 3, 0, True)]), TABLES)
    plan = plan_of([(1, 3, 0, True)])
    plan.samples = np.array([True, False])
    with pytest.raises(ValueError, match="batch mismatch"):
        prepare.prepare(plan, TABLES[:1])
    prepare.prepare(plan_of([(1, 3, 0, True)]), TABLES[:1])
    with pytest.raises(ValueError, match="2 sampled tokens for the 1 sampled rows"):
        prepare.append_sampled([3, 4])
    prepare.append_sampled([-3])
    prepare.add(2, [8])
    with pytest.raises(ValueError, match="sampled token ids"):
        prepare.prepare(plan_of([(1, 1, 2, True)]), TABLES[:1])
    assert prepare.tokens(1) == [5, 6, 7] and prepare.tokens(2) == []  # refused before anything was applied
    assert prepare.prepare(plan_of([(2, 1, 0, True)]), TABLES[:1]).token_ids.tolist() == [8]


@parametrize_prepare
def test_strided_tables_from_a_reused_buffer(make_prepare) -> None:  # type: ignore[no-untyped-def]
    buffer = np.full((4, 8), -1, dtype=np.int32)
    buffer[0, :2], buffer[1, :3] = [5, 6], [1, 2, 3]
    prepare = make_prepare(2)
    prepare.add(1, [10, 11, 12])
    prepare.add(2, [20, 21, 22, 23, 24])
    inp = prepare.prepare(plan_of([(1, 3, 0, True), (2, 5, 0, True)]), buffer[:2, :3])
    assert inp.slot_mapping.tolist() == [10, 11, 12, 2, 3, 4, 5, 6]
    assert inp.block_tables.tolist() == [[5, 6, -1], [1, 2, 3]]


@requires_native
def test_native_memory_is_freed_and_views_survive_growth() -> None:
    from infer_prof.native_paths.loader import require

    _, lib = require()
    gc.collect()
    baseline = lib.np_live_allocations()
    prepare = make_native(4)
    tables = np.arange(4000, dtype=np.int32).reshape(40, 100)
    first = None
    for size in (1, 5, 40):
        for seq_id in range(size):
            prepare.add(1000 * size + seq_id, list(range(200)))
        inp = prepare.prepare(plan_of([(1000 * size + s, 200, 0, False) for s in range(size)]), tables[:size])
        first = inp if first is None else first
        assert inp.token_ids.tolist() == list(range(200)) * size
    assert first.token_ids.shape == (200,)  # an older input's memory stays valid when the buffers grow
    prepare.close()
    assert lib.np_live_allocations() == baseline


def drive(prepare: Prepare, seed: int, steps: int, block_size: int, num_blocks: int) -> list[object]:
    """A random workload through the Python scheduler and allocator; every step's input (or the error
    it raised) as plain lists, with re-registrations, removals of unknown ids and stray sampled tokens."""
    rng = random.Random(seed)
    scheduler, pool = PythonScheduler(block_size, 6, 24), PythonKVAllocator(num_blocks, block_size)
    trace: list[object] = []
    next_id, finished, live = 0, [], set()
    for _ in range(steps):
        arrivals = []
        for _ in range(rng.choice([0, 0, 1, 2])):
            length = rng.randint(1, 3 * block_size)
            arrivals.append(NewSequence(next_id, length, 8))
            prepare.add(next_id, [rng.randrange(2**31) for _ in range(length)])
            live.add(next_id)
            next_id += 1
        if rng.random() < 0.1:
            prepare.remove(
                rng.randrange(-3, next_id + 3)
            )  # mostly unknown, sometimes a live one (its rows fail)
        plan = scheduler.schedule(arrivals, finished, pool.num_free_blocks)
        tables = pool.step(plan.frees, plan.grow_seq_ids, plan.grow_num_blocks, plan.seq_ids)
        finished = []
        if not len(plan.seq_ids):
            continue
        try:
            trace.append(prepare.prepare(plan, tables).as_lists())
        except (KeyError, ValueError) as error:
            trace.append(type(error).__name__)
            event("a refused step")
            continue
        sampled = plan.seq_ids[plan.samples].tolist()
        if sampled:
            prepare.append_sampled([rng.randrange(50_000) for _ in sampled])
        finished = [seq_id for seq_id in sampled if rng.random() < 0.15]
        for seq_id in finished:
            prepare.remove(seq_id)
        trace.append(sorted((seq_id, prepare.tokens(seq_id)[-3:]) for seq_id in live))
    return trace


@requires_native
@settings(max_examples=80, deadline=None)
@given(seed=st.integers(0, 2**32), block_size=st.sampled_from([1, 3, 4, 16]), num_blocks=st.integers(8, 60))
def test_twins_prepare_identical_inputs(seed: int, block_size: int, num_blocks: int) -> None:
    python = drive(PythonPrepare(block_size), seed, 60, block_size, num_blocks)
    native = drive(make_native(block_size), seed, 60, block_size, num_blocks)
    assert native == python


@parametrize_prepare
def test_a_sequence_sampled_in_two_rows_gets_both_tokens(make_prepare) -> None:  # type: ignore[no-untyped-def]
    # Found by the libFuzzer target: C reserved room for one sampled token per sequence and wrote the
    # second past its buffer; Python appends both, and so must C (no scheduler plans this, a caller may).
    prepare = make_prepare(4)
    prepare.add(7, list(range(16)))
    tables = np.array([[0, 1, 2, 3, 4], [0, 1, 2, 3, 4]], dtype=np.int32)
    prepare.prepare(plan_of([(7, 16, 0, True), (7, 1, 15, True)]), tables)
    prepare.append_sampled([40, 41])
    inp = prepare.prepare(plan_of([(7, 1, 17, True)]), tables[:1])  # pending tokens are applied here
    assert prepare.tokens(7) == [*range(16), 40, 41] and inp.token_ids.tolist() == [41]
