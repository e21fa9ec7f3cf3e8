"""The golden command: twins agree on a seeded workload, a planted logic error is caught and explained."""

from __future__ import annotations

import numpy as np
import pytest

from engine.types import SamplingParams
from profiler.checks.golden_explain import explain

native = pytest.importorskip("native_paths.loader")
if native.extension() is None:  # pragma: no cover - the suite builds the extension
    pytest.skip("native extension not built", allow_module_level=True)


@pytest.fixture(scope="module")
def tiny():
    from engine.models import load_model

    return load_model("synthetic:tiny")


def test_twins_agree_on_a_workload_with_preemption(tiny):
    from profiler.checks.golden import run_golden

    report = run_golden(tiny, requests=24, max_tokens=16, max_batch=16)
    assert report.preemptions > 0, "the default pool must be small enough to force preemption"
    assert report.logic_errors == [] and report.unexplained_end_to_end == []
    assert report.tokens == 24 * 16
    assert report.exit_code == 0


def test_a_planted_sampler_bug_is_a_logic_error(tiny, monkeypatch):
    from native_paths.sampler import NativeSampler
    from profiler.checks import golden

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
    from native_paths.scheduler import NativeScheduler
    from profiler.checks import golden

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
    from engine.sampler import splitmix64_uniform

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
    # probabilities 0.5, 0.25, 0.25: with top_p = 0.75 the third token sits exactly on the cut.
    row = np.log(np.array([0.5, 0.25, 0.25], dtype=np.float64)).astype(np.float32)
    params = SamplingParams(temperature=1.0, top_p=0.75, seed=1)
    result = explain(row, params, [], [], 0, 1, 2)
    assert result.kind == "near-tie" and result.stage == "top-p"


@pytest.mark.slow  # 18 engine runs
def test_every_native_combination_serves_the_python_tokens(tiny):
    from native_paths.toggles import every_combination
    from profiler.checks.golden import run_golden

    combinations = [",".join(sorted(selection)) for selection in every_combination()]
    report = run_golden(tiny, requests=8, max_tokens=16, max_batch=8, kv_blocks=14, combinations=combinations)
    assert set(report.combinations) == set(combinations) and len(combinations) == 17
    assert report.preemptions > 0 and report.logic_errors == [] and report.exit_code == 0


def test_a_planted_preparation_bug_is_reported_for_the_twin_and_end_to_end(tiny, monkeypatch):
    from native_paths.prepare import NativePrepare
    from profiler.checks import golden

    real = NativePrepare.prepare

    def wrong_token(self, plan, tables):
        inp = real(self, plan, tables)
        inp.token_ids = inp.token_ids.flip(0)  # tokens handed to the wrong rows (a shifted position would not
        return inp                             # show end to end: rotary embeddings see only relative positions)

    monkeypatch.setattr(NativePrepare, "prepare", wrong_token)
    report = golden.run_golden(tiny, requests=4, max_tokens=3, max_batch=4, combinations=["prepare"])
    assert {d.component for d in report.logic_errors} == {"prepare"}
    assert report.combinations["prepare"] and report.exit_code == 1


def test_a_planted_core_bug_is_reported(tiny, monkeypatch):
    from native_paths.core import CoreKVAllocator
    from profiler.checks import golden

    real = CoreKVAllocator.step

    def shifted(self, *args):
        return real(self, *args) + 1

    monkeypatch.setattr(CoreKVAllocator, "step", shifted)
    report = golden.run_golden(tiny, requests=4, max_tokens=3, max_batch=4, combinations=["all"])
    assert [d.component for d in report.logic_errors] == ["core"]  # reported once: the core then stops shadowing
    assert report.exit_code == 1
