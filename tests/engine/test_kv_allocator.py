"""Tests of the KV block pool: the free-list order the twin spec fixes, step semantics, and invariants under random use."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infer_prof.engine.kv_alloc import PythonKVAllocator, blocks_for_tokens, num_blocks_for_memory
from infer_prof.engine.types import KVAllocator


def check_invariants(pool: PythonKVAllocator) -> None:
    owned = [b for seq_id in list(pool._tables) for b in pool.block_table(seq_id)]
    free = pool.free_block_ids()
    assert len(owned) == len(set(owned)), "a block is owned twice"
    assert not set(owned) & set(free), "a block is both owned and free"
    assert sorted(owned + free) == list(range(pool.num_blocks))
    assert len(free) == pool.num_free_blocks
    assert pool.num_free_blocks + pool.num_used_blocks == pool.num_blocks
    assert all(pool.ref_count(b) == 1 for b in owned)
    assert all(pool.ref_count(b) == 0 for b in free)


def test_satisfies_protocol_and_sizing_helpers() -> None:
    assert isinstance(PythonKVAllocator(4, 16), KVAllocator)
    assert num_blocks_for_memory(1000, 100) == 10
    assert num_blocks_for_memory(999, 100) == 9
    assert blocks_for_tokens(0, 16) == 0 and blocks_for_tokens(16, 16) == 1 and blocks_for_tokens(17, 16) == 2
    with pytest.raises(ValueError):
        num_blocks_for_memory(1000, 0)
    with pytest.raises(ValueError):
        PythonKVAllocator(0, 16)


def test_initial_order_pop_head_free_reverse_to_tail() -> None:
    pool = PythonKVAllocator(6, 4)
    assert pool.free_block_ids() == [0, 1, 2, 3, 4, 5]
    assert pool.allocate(7, 3) == [0, 1, 2]
    assert pool.allocate(8, 2) == [3, 4]
    assert pool.free_block_ids() == [5]
    pool.free(7)  # reverse order: 2, 1, 0 appended at the tail
    assert pool.free_block_ids() == [5, 2, 1, 0]
    assert pool.allocate(9, 2) == [5, 2]
    assert pool.block_table(9) == [5, 2]
    assert pool.utilization == pytest.approx(4 / 6)
    check_invariants(pool)


def test_remove_unlinks_a_specific_free_block() -> None:
    pool = PythonKVAllocator(4, 4)
    pool.remove(2)
    assert pool.free_block_ids() == [0, 1, 3]
    assert pool.num_free_blocks == 3
    with pytest.raises(RuntimeError):
        pool.remove(2)
    pool.release(2)
    assert pool.free_block_ids() == [0, 1, 3, 2]
    with pytest.raises(RuntimeError, match="freed twice"):
        pool.release(2)


def test_step_frees_then_grows_and_pads_tables() -> None:
    pool = PythonKVAllocator(8, 4)
    tables = pool.step([], [1, 2], [2, 1], [1, 2])
    assert tables.dtype == np.int32
    assert tables.tolist() == [[0, 1], [2, -1]]
    # Frees happen before grows, so sequence 3 reuses the blocks of 1 (freed in reverse order).
    tables = pool.step([1], [2, 3], [1, 6], [3, 2])
    assert pool.free_block_ids() == []
    assert tables.tolist() == [[4, 5, 6, 7, 1, 0], [2, 3, -1, -1, -1, -1]]
    assert pool.step([99], [], [], []).shape == (0, 0)  # unknown free is a no-op
    assert pool.step([], [], [], [42]).tolist() == [[]]
    check_invariants(pool)


def test_step_grow_beyond_free_raises_and_changes_no_table() -> None:
    pool = PythonKVAllocator(4, 4)
    pool.step([], [1], [3], [1])
    with pytest.raises(RuntimeError, match="exhausted"):
        pool.step([], [2, 3], [1, 1], [2, 3])
    assert pool.block_table(2) == [] and pool.block_table(3) == []
    check_invariants(pool)
    assert pool.pop() == 3
    with pytest.raises(RuntimeError, match="exhausted"):
        pool.pop()


ops = st.lists(
    st.tuples(st.sampled_from(["grow", "free", "step"]), st.integers(0, 7), st.integers(0, 5)),
    max_size=60,
)


@settings(max_examples=150, deadline=None)
@given(num_blocks=st.integers(1, 24), script=ops)
def test_random_allocate_grow_free_keeps_invariants(num_blocks: int, script: list) -> None:
    pool = PythonKVAllocator(num_blocks, 4)
    for op, seq_id, count in script:
        before = {s: pool.block_table(s) for s in range(8)}
        if op == "grow":
            if count <= pool.num_free_blocks:
                new = pool.allocate(seq_id, count)
                assert pool.block_table(seq_id) == before[seq_id] + new
            else:
                with pytest.raises(RuntimeError):
                    pool.allocate(seq_id, count)
                assert pool.block_table(seq_id) == before[seq_id]
        elif op == "free":
            pool.free(seq_id)
            assert pool.block_table(seq_id) == []
        else:
            frees = [seq_id]
            grows = [(seq_id + 1) % 8, (seq_id + 2) % 8]
            free_after = pool.num_free_blocks + len(before[seq_id])
            if 2 * count <= free_after:
                tables = pool.step(frees, grows, [count, count], grows)
                assert tables.shape[0] == 2
                for row, s in zip(tables.tolist(), grows):
                    assert [b for b in row if b >= 0] == pool.block_table(s)
            else:
                with pytest.raises(RuntimeError):
                    pool.step(frees, grows, [count, count], grows)
        check_invariants(pool)
    for seq_id in range(8):
        pool.free(seq_id)
    assert pool.num_free_blocks == num_blocks
    assert sorted(pool.free_block_ids()) == list(range(num_blocks))
    check_invariants(pool)
