"""The golden command: twins agree on a seeded workload, a planted logic error is caught and explained."""

from __future__ import annotations

import numpy as np
import pytest

from infer_prof.engine.types import SamplingParams
from infer_prof.profiler.checks.golden_explain import explain

native = pytest.importorskip("infer_prof.native_paths.loader")
if native.extension() is None:  # pragma: no cover - the suite builds the extension
    pytest.skip("native extension not built", allow_module_level=True)


@pytest.fixture(scope="module")
def tiny():
    from infer_prof.engine.loader import load_model

    return load_model("synthetic:tiny")


def test_twins_agree_on_a_workload_with_preemption(tiny):
    from infer_prof.profiler.checks.golden import run_golden

    report = run_golden(tiny, requests=24, max_tokens=16, max_batch=16)
    assert report.preemptions > 0, "the default pool must be small enough to force preemption"
    assert report.logic_errors == [] and report.unexplained_end_to_end == []
    assert report.tokens == 24 * 16
    assert report.exit_code == 0


def test_a_planted_sampler_bug_is_a_logic_error(tiny, monkeypatch):
    from infer_prof.native_paths.sampler import NativeSampler
    from infer_prof.profiler.checks import golden

    real = NativeSampler.sample

    def off_by_one(self, logits, seq_ids):  # the kind of bug golden exists to catch
        return [(token + 1) % logits.shape[1] for token in real(self, logits, seq_ids)]

    monkeypatch.setattr(NativeSampler, "sample", off_by_one)
    report = golden.run_golden(tiny, requests=6, max_tokens=4, max_batch=8)
    assert report.exit_code == 1
    first = report.divergences[0]
    assert first.component == "sampler" and first.kind == "logic error"
    assert first.native == (first.python + 1) % tiny.config.vocab_size


def test_a_planted_scheduler_bug_is_reported(tiny, monkeypatch):
    from infer_prof.native_paths.scheduler import NativeScheduler
    from infer_prof.profiler.checks import golden

    real = NativeScheduler.schedule

    def no_chunking(self, arrivals, finished, free):
        plan = real(self, arrivals, finished, free)
        plan.samples = ~plan.samples
        return plan

    monkeypatch.setattr(NativeScheduler, "schedule", no_chunking)
    report = golden.run_golden(tiny, requests=4, max_tokens=3, max_batch=4)
    assert any(d.component == "scheduler" for d in report.logic_errors)
    assert report.exit_code == 1


def test_explain_draw_boundary_is_a_near_tie():
    # Two tokens with equal probability and a draw exactly at the boundary between them.
    row = np.full(8, -50.0, dtype=np.float32)
    row[2] = row[5] = 1.0
    params = SamplingParams(temperature=1.0, seed=123)
    from infer_prof.engine.sampler import splitmix64_uniform

    u = splitmix64_uniform(123, 0)
    result = explain(row, params, [], [], 0, 2, 5)
    target = u * 1.0
    # The running sum crosses 0.5 at token 2: it is a near-tie only if the draw sits at that edge.
    assert result.stage == "draw"
    assert (result.kind == "near-tie") == (abs(target - 0.5) <= 1e-9)


def test_explain_clear_greedy_difference_is_a_logic_error():
    row = np.array([0.0, 3.0, 1.0], dtype=np.float32)
    result = explain(row, SamplingParams(), [], [], 0, 1, 2)
    assert result.kind == "logic error" and result.stage == "greedy"


def test_explain_exact_greedy_tie_wants_the_lower_id():
    row = np.array([0.0, 3.0, 3.0], dtype=np.float32)
    result = explain(row, SamplingParams(), [], [], 0, 1, 2)
    assert result.kind == "logic error" and "lower id 1" in result.detail


def test_explain_top_p_cut_within_rounding_is_a_near_tie():
    # probabilities 0.5, 0.25, 0.25: with top_p = 0.75 the third token sits exactly on the cut. Seed 0
    # draws u = 0.88: over {0, 1} the spec picks 1, over {0, 1, 2} (the cut the other way) 2.
    row = np.log(np.array([0.5, 0.25, 0.25], dtype=np.float64)).astype(np.float32)
    params = SamplingParams(temperature=1.0, top_p=0.75, seed=0)
    result = explain(row, params, [], [], 0, 1, 2)
    assert result.kind == "near-tie" and result.stage == "top-p"


def test_explain_a_cut_within_rounding_does_not_excuse_a_pair_that_parts_elsewhere():
    # Same cut within rounding, but the twins picked 0 and 1: no side of the cut at token 2 leads to 0.
    row = np.log(np.array([0.5, 0.25, 0.25], dtype=np.float64)).astype(np.float32)
    params = SamplingParams(temperature=1.0, top_p=0.75, seed=0)
    assert explain(row, params, [], [], 0, 1, 0).kind == "logic error"


def _tight_top_k_row() -> np.ndarray:
    """Token 0 (weight 1), then tokens 1 and 2 tied within rounding at the top-2 cut (weight 0.5 each)."""
    row = np.full(16, -60.0)
    row[0], row[1] = 0.0, np.log(0.5)
    row[2] = row[1] * (1 + 1e-12)  # within NEAR_TIE_RELATIVE of token 1, yet ranked after it
    return row


def _draws(row: np.ndarray, params: SamplingParams) -> int:
    import torch

    from infer_prof.engine.sampler import PythonSampler

    sampler = PythonSampler()
    sampler.add(0, params, [])
    return sampler.sample(torch.tensor(row).unsqueeze(0), [0])[0]


def test_an_off_by_one_top_k_next_to_a_tight_cut_is_a_logic_error():
    # The planted bug: a sampler that keeps k + 1 tokens. Seed 1 draws u = 0.57: over {0, 1} (total 1.5)
    # the target 0.85 picks 0; the buggy {0, 1, 2} (total 2.0) has target 1.13 and picks 1. Rounding
    # could only swap 1 and 2 at the cut ({0, 2}: still 0), so this is not a near-tie although a cut in
    # the row lies within rounding.
    from infer_prof.profiler.checks.golden_explain import _close

    row = _tight_top_k_row()
    params = SamplingParams(temperature=1.0, top_k=2, seed=1)
    python_token = _draws(row, params)
    buggy_token = _draws(row, SamplingParams(temperature=1.0, top_k=3, seed=1))
    assert (python_token, buggy_token) == (0, 1)
    assert _close(row[1], row[2]), "the planted bug must sit next to a cut within rounding"
    result = explain(row, params, [], [], 0, python_token, buggy_token)
    assert result.kind == "logic error" and result.stage == "draw"


def test_a_genuine_tie_at_the_top_k_cut_is_a_near_tie():
    # Seed 0 draws u = 0.88: over {0, 1} the target 1.32 picks 1; with 1 and 2 swapped at the cut
    # ({0, 2}, the tie resolved the other way) it picks 2.
    row = _tight_top_k_row()
    params = SamplingParams(temperature=1.0, top_k=2, seed=0)
    assert _draws(row, params) == 1
    result = explain(row, params, [], [], 0, 1, 2)
    assert result.kind == "near-tie" and result.stage == "top-k"


def test_a_token_outside_a_clear_top_k_cut_is_a_logic_error():
    row = np.array([2.0, 1.0, 0.0, -1.0])
    params = SamplingParams(temperature=1.0, top_k=2, seed=0)
    result = explain(row, params, [], [], 0, _draws(row, params), 2)
    assert result.kind == "logic error" and result.stage == "top-k"


@pytest.mark.slow  # 18 engine runs
def test_every_native_combination_serves_the_python_tokens(tiny):
    from infer_prof.native_paths.toggles import every_combination
    from infer_prof.profiler.checks.golden import run_golden

    combinations = [",".join(sorted(selection)) for selection in every_combination()]
    report = run_golden(tiny, requests=8, max_tokens=16, max_batch=8, kv_blocks=14, combinations=combinations)
    assert set(report.combinations) == set(combinations) and len(combinations) == 17
    assert report.preemptions > 0 and report.logic_errors == [] and report.exit_code == 0


def test_a_planted_preparation_bug_is_reported_for_the_twin_and_end_to_end(tiny, monkeypatch):
    from infer_prof.native_paths.prepare import NativePrepare
    from infer_prof.profiler.checks import golden

    real = NativePrepare.prepare

    def wrong_token(self, plan, tables):
        inp = real(self, plan, tables)
        inp.token_ids = inp.token_ids.flip(0)  # tokens handed to the wrong rows (a shifted position would not
        return inp  # show end to end: rotary embeddings see only relative positions)

    monkeypatch.setattr(NativePrepare, "prepare", wrong_token)
    report = golden.run_golden(tiny, requests=4, max_tokens=3, max_batch=4, combinations=["prepare"])
    assert {d.component for d in report.logic_errors} == {"prepare"}
    assert report.combinations["prepare"] and report.exit_code == 1


def test_a_planted_core_bug_is_reported(tiny, monkeypatch):
    from infer_prof.native_paths.core import CoreKVAllocator
    from infer_prof.profiler.checks import golden

    real = CoreKVAllocator.step

    def shifted(self, *args):
        return real(self, *args) + 1

    monkeypatch.setattr(CoreKVAllocator, "step", shifted)
    report = golden.run_golden(tiny, requests=4, max_tokens=3, max_batch=4, combinations=["all"])
    assert [d.component for d in report.logic_errors] == [
        "core"
    ]  # reported once: the core then stops shadowing
    assert report.exit_code == 1


def test_an_end_to_end_mismatch_is_unexplained_unless_a_near_tie_accounts_for_it():
    from types import SimpleNamespace

    from infer_prof.profiler.checks.golden import GoldenReport, _compare_end_to_end

    def outputs(*tokens):
        return [SimpleNamespace(request_id=index, token_ids=list(ids)) for index, ids in enumerate(tokens)]

    report = GoldenReport(requests=3, tokens=6, steps=2, preemptions=0)
    python = outputs([1, 2], [3, 4], [5, 6])
    _compare_end_to_end(report, "sampler", python, outputs([1, 2], [3, 9], [5, 7]), explained={1})
    assert report.end_to_end_mismatches == [1, 2]
    assert report.combinations == {"sampler": [2]} and report.unexplained_end_to_end == [2]
    _compare_end_to_end(report, "all", python, outputs([1, 2], [3, 9], [5, 6]), explained=set())
    assert report.end_to_end_mismatches == [1, 2]  # each request once over every combination
    assert report.combinations == {"sampler": [2], "all": [1]} and report.unexplained_end_to_end == [2, 1]
    assert report.exit_code == 1


def test_the_default_pool_holds_a_third_of_the_batch_at_full_length():
    from infer_prof.engine.kv_alloc import blocks_for_tokens
    from infer_prof.profiler.checks.golden import _preempting_pool

    per_request = blocks_for_tokens(120 + 64, 16)
    assert _preempting_pool(64, 16, 16) == 16 * per_request // 3
    assert _preempting_pool(64, 1, 16) == per_request + 1  # never less than one request at full length
