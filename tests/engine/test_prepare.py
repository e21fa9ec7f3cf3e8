"""Tests of the Python input preparation: the token store, the step's flat input, the order pending work is applied in."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from infer_prof.engine.model_runner import build_model_input
from infer_prof.engine.prepare import PythonPrepare
from infer_prof.engine.types import ModelInput, Prepare, StepPlan


def plan_of(rows: list[tuple[int, int, int, bool]]) -> StepPlan:
    """A plan with just the batch: (seq_id, num_tokens, start, sample) per row."""
    columns = list(zip(*rows)) if rows else [(), (), (), ()]
    return StepPlan(
        seq_ids=np.array(columns[0], dtype=np.int64),
        num_tokens=np.array(columns[1], dtype=np.int64),
        start_positions=np.array(columns[2], dtype=np.int64),
        samples=np.array(columns[3], dtype=np.bool_),
    )


TABLES = np.array([[3, 4, -1], [0, 1, 2]], dtype=np.int32)


def test_is_a_prepare_and_builds_what_build_model_input_builds() -> None:
    prepare = PythonPrepare(4)
    assert isinstance(prepare, Prepare)
    prepare.add(7, [11, 12, 13, 14, 15])
    prepare.add(9, list(range(20, 30)))
    inp = prepare.prepare(plan_of([(7, 5, 0, True), (9, 3, 7, False)]), TABLES)
    expected = build_model_input([[11, 12, 13, 14, 15], [27, 28, 29]], [0, 7], [True, False], TABLES, 4)
    assert isinstance(inp, ModelInput) and inp.same_as(expected)
    assert inp.slot_mapping.tolist() == [12, 13, 14, 15, 16, 7, 8, 9]
    assert inp.query_lens == [5, 3] and inp.context_lens == [5, 10] and inp.sample_indices.tolist() == [4]
    assert inp.token_ids.dtype == torch.int64 and inp.block_tables.dtype == torch.int32


def test_sampled_tokens_are_appended_to_the_last_inputs_sampled_rows_before_removals() -> None:
    prepare = PythonPrepare(4)
    prepare.add(1, [5, 6])
    prepare.add(2, [7])
    prepare.prepare(plan_of([(1, 2, 0, True), (2, 1, 0, True)]), TABLES)
    prepare.append_sampled([40, 41])
    prepare.remove(2)  # finished on its sampled token: appended, then forgotten
    inp = prepare.prepare(plan_of([(1, 1, 2, True)]), TABLES[:1])
    assert inp.token_ids.tolist() == [40] and inp.positions.tolist() == [2]
    assert prepare.tokens(1) == [5, 6, 40] and prepare.tokens(2) == [] and prepare.num_sequences == 1


def test_pending_work_waits_for_the_next_prepare_and_a_remove_cancels_a_pending_add() -> None:
    prepare = PythonPrepare(4)
    prepare.add(1, [5])
    assert prepare.num_sequences == 0  # registrations take effect at the next prepare()
    prepare.remove(1)
    prepare.add(3, [8])
    prepare.remove(3)
    prepare.add(3, [9, 9])  # re-registered after the remove: the new prompt counts
    prepare.prepare(plan_of([]), np.empty((0, 0), dtype=np.int32))
    assert prepare.tokens(1) == [] and prepare.tokens(3) == [9, 9]


def test_refusals_name_the_sequence_and_the_input() -> None:
    prepare = PythonPrepare(4)
    with pytest.raises(ValueError, match="prompt token ids"):
        prepare.add(1, [3, -1])
    with pytest.raises(ValueError, match="block_size"):
        PythonPrepare(0)
    prepare.add(1, [5, 6, 7])
    with pytest.raises(KeyError, match="sequence 4 was never added"):
        prepare.prepare(plan_of([(4, 1, 0, True)]), TABLES[:1])
    with pytest.raises(ValueError, match=r"tokens \[2, 4\) asked for, 3 known"):
        prepare.prepare(plan_of([(1, 2, 2, True)]), TABLES[:1])
    with pytest.raises(ValueError, match="padding"):
        prepare.prepare(plan_of([(1, 3, 0, True)]), np.array([[-1]], dtype=np.int32))
    with pytest.raises(ValueError, match="past"):
        prepare.prepare(plan_of([(1, 3, 0, True)]), np.empty((1, 0), dtype=np.int32))
    with pytest.raises(ValueError, match="2 block tables for a batch of 1"):
        prepare.prepare(plan_of([(1, 3, 0, True)]), TABLES)
    with pytest.raises(ValueError, match="1 sampled tokens for the 0 sampled rows"):
        prepare.append_sampled([3])


def test_a_failed_prepare_drops_the_sampled_rows_but_keeps_what_it_applied() -> None:
    prepare = PythonPrepare(4)
    prepare.add(1, [5, 6])
    prepare.prepare(plan_of([(1, 2, 0, True)]), TABLES[:1])
    prepare.append_sampled([2**31])  # out of range: refused before anything is applied
    prepare.add(2, [1])
    with pytest.raises(ValueError, match="sampled token ids"):
        prepare.prepare(plan_of([(1, 1, 1, True)]), TABLES[:1])
    assert (
        prepare.tokens(1) == [5, 6] and prepare.num_sequences == 1
    )  # nothing applied, the add still pending
    with pytest.raises(ValueError, match="0 sampled rows"):
        prepare.append_sampled([4])
    inp = prepare.prepare(plan_of([(2, 1, 0, True)]), TABLES[:1])
    assert inp.token_ids.tolist() == [1] and prepare.num_sequences == 2
