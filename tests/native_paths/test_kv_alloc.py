"""The C KV allocator against the Python one: same block ids, same free list, same errors."""

from __future__ import annotations

import gc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infer_prof.engine.kv_alloc import PythonKVAllocator
from infer_prof.engine.types import KVAllocator
from tests.native_paths.support import requires_native, twin_params


def make_native(num_blocks: int, block_size: int) -> KVAllocator:
    from infer_prof.native_paths.kv_alloc import NativeKVAllocator

    return NativeKVAllocator(num_blocks, block_size)


parametrize_allocator = pytest.mark.parametrize("make_allocator", twin_params(PythonKVAllocator, make_native))


def check_invariants(pool) -> None:  # type: ignore[no-untyped-def]
    free = pool.free_block_ids()
    assert len(free) == pool.num_free_blocks
    assert len(set(free)) == len(free)
    assert all(pool.ref_count(b) == 0 for b in free)
    assert sum(pool.ref_count(b) for b in range(pool.num_blocks)) == pool.num_blocks - len(free)


@parametrize_allocator
def test_step_frees_then_grows_and_pads_tables(make_allocator) -> None:  # type: ignore[no-untyped-def]
    pool = make_allocator(8, 4)
    assert isinstance(pool, KVAllocator)
    tables = pool.step([], [1, 2], [2, 1], [1, 2])
    assert tables.dtype == np.int32
    assert tables.tolist() == [[0, 1], [2, -1]]
    tables = pool.step([1], [2, 3], [1, 6], [3, 2])  # 1's blocks come back in reverse order
    assert pool.free_block_ids() == []
    assert tables.tolist() == [[4, 5, 6, 7, 1, 0], [2, 3, -1, -1, -1, -1]]
    assert pool.block_table(3) == [4, 5, 6, 7, 1, 0]
    assert pool.step([99], [], [], []).shape == (0, 0)  # unknown free is a no-op
    assert pool.step([], [], [], [42]).tolist() == [[]]  # unknown batch id: an empty row
    assert pool.block_table(42) == []
    check_invariants(pool)


@parametrize_allocator
def test_grow_beyond_free_raises_after_frees_and_grows_nothing(make_allocator) -> None:  # type: ignore[no-untyped-def]
    pool = make_allocator(4, 4)
    pool.step([], [1], [3], [1])
    with pytest.raises(RuntimeError, match="exhausted"):
        pool.step([1], [2, 3], [2, 3], [2, 3])
    assert pool.num_free_blocks == 4 and pool.block_table(2) == [] and pool.block_table(3) == []
    assert pool.free_block_ids() == [3, 2, 1, 0]
    check_invariants(pool)


@parametrize_allocator
def test_negative_grow_is_refused(make_allocator) -> None:  # type: ignore[no-untyped-def]
    pool = make_allocator(4, 4)
    with pytest.raises(ValueError):
        pool.step([], [1], [-1], [1])


@parametrize_allocator
def test_a_sequence_may_grow_twice_in_one_step(make_allocator) -> None:  # type: ignore[no-untyped-def]
    pool = make_allocator(6, 4)
    assert pool.step([], [5, 6, 5], [1, 2, 2], [5, 6]).tolist() == [[0, 3, 4], [1, 2, -1]]
    check_invariants(pool)


@requires_native
def test_adapter_rejects_bad_arguments_before_calling_c() -> None:
    pool = make_native(4, 4)
    with pytest.raises(ValueError, match="grow_num_blocks"):
        pool.step([], [1, 2], [1], [])
    with pytest.raises(ValueError, match="int64"):
        pool.step([2**70], [], [], [])
    with pytest.raises(ValueError, match="int64"):
        pool.step([], [1], [1.5], [])
    with pytest.raises(IndexError):
        pool.ref_count(4)
    with pytest.raises(ValueError):
        make_native(0, 4)
    assert pool.num_free_blocks == 4


@requires_native
def test_close_frees_all_native_memory() -> None:
    from infer_prof.native_paths.loader import require

    _, lib = require()
    gc.collect()
    before = lib.np_live_allocations()
    pool = make_native(64, 4)
    for step in range(200):
        pool.step([step - 3], [step], [1 + step % 3], [step, step - 1, step - 2])
    assert lib.np_live_allocations() > before
    pool.close()
    assert lib.np_live_allocations() == before
    other = make_native(8, 4)
    other.step([], [1], [2], [1])
    del other
    gc.collect()
    assert lib.np_live_allocations() == before


# A step is (frees, grows, batch), drawn from a small id space so that ids repeat, die and come back.
step_strategy = st.tuples(
    st.lists(st.integers(-2, 12), max_size=4),
    st.lists(st.tuples(st.integers(-2, 12), st.integers(0, 5)), max_size=5),
    st.lists(st.integers(-2, 12), max_size=6),
)


@requires_native
@settings(max_examples=150, deadline=None)
@given(num_blocks=st.integers(1, 24), steps=st.lists(step_strategy, max_size=25))
def test_twins_hand_out_identical_blocks(num_blocks: int, steps: list) -> None:  # type: ignore[type-arg]
    python_pool, native_pool = PythonKVAllocator(num_blocks, 4), make_native(num_blocks, 4)
    for frees, grows, batch in steps:
        grow_ids, grow_counts = [g[0] for g in grows], [g[1] for g in grows]
        outcomes = []
        for pool in (python_pool, native_pool):
            try:
                outcomes.append(pool.step(frees, grow_ids, grow_counts, batch).tolist())
            except RuntimeError as error:
                outcomes.append(type(error))
        assert outcomes[0] == outcomes[1]
        assert python_pool.free_block_ids() == native_pool.free_block_ids()
        assert python_pool.num_free_blocks == native_pool.num_free_blocks
        assert python_pool.num_sequences == native_pool.num_sequences
        for seq_id in range(-2, 13):
            assert python_pool.block_table(seq_id) == native_pool.block_table(seq_id)
    check_invariants(native_pool)


# Decode-like steps: the same batch again and again, a few rows growing by a block, now and then a
# sequence freed and grown again under the same id (its row must not keep the old blocks), rows
# reordered or dropped, and tables long enough to outgrow the output's row stride.
decode_step = st.tuples(
    st.lists(st.integers(0, 7), max_size=3),  # rows that grow a block
    st.lists(st.integers(0, 7), max_size=1),  # freed, then grown again in the same step
    st.sampled_from(["same", "same", "same", "reversed", "drop_first"]),
)


@requires_native
@settings(max_examples=100, deadline=None)
@given(batch=st.integers(1, 8), steps=st.lists(decode_step, min_size=1, max_size=40))
def test_twins_agree_on_tables_a_steady_batch_rewrites_in_place(batch: int, steps: list) -> None:  # type: ignore[type-arg]
    python_pool, native_pool = PythonKVAllocator(400, 2), make_native(400, 2)
    ids = list(range(batch))
    for pool in (python_pool, native_pool):
        pool.step([], ids, [1] * batch, ids)
    for grows, regrown, order in steps:
        grow_ids = [ids[g % len(ids)] for g in grows] if ids else []
        frees = [ids[r % len(ids)] for r in regrown] if ids else []
        grow_ids += frees
        batch_ids = {"same": ids, "reversed": ids[::-1], "drop_first": ids[1:]}[order]
        outcomes = [
            np.array(
                pool.step(
                    np.array(frees, dtype=np.int64),
                    np.array(grow_ids, dtype=np.int64),
                    np.ones(len(grow_ids), dtype=np.int64),
                    np.array(batch_ids, dtype=np.int64),
                )
            )
            for pool in (python_pool, native_pool)
        ]
        assert outcomes[0].tolist() == outcomes[1].tolist()
    assert python_pool.free_block_ids() == native_pool.free_block_ids()


@parametrize_allocator
def test_a_huge_grow_after_a_small_one_is_exhaustion_not_an_overflow(make_allocator) -> None:  # type: ignore[no-untyped-def]
    pool = make_allocator(10, 4)
    with pytest.raises(RuntimeError, match="exhausted"):
        pool.step([], [5, 0, 0], [6, 0, 2**63 - 1], [])  # 6 + (2**63 - 1) wraps around in int64
    assert pool.num_free_blocks == 10 and pool.block_table(5) == []
