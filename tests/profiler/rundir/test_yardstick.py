"""The yardstick: the model span's time per processed token, unmoved by control-path changes."""

from __future__ import annotations

import pytest

from infer_prof.profiler.rundir.results import read_run
from infer_prof.profiler.rundir.yardstick import yardstick
from tests.support.run_dirs import make_run_dir


def test_is_model_time_over_every_processed_token(tmp_path):
    run = read_run(make_run_dir(tmp_path / "run", seed=1, n_requests=30, n_steps=60))
    figure = yardstick(run)
    tokens = (run.steps["prefill_tokens"] + run.steps["decode_tokens"]).sum()
    assert figure.value == pytest.approx(run.steps["model_ms"].sum() * 1000 / tokens)
    assert figure.unit == "us" and figure.tokens == tokens and figure.steps == len(run.steps)


def test_control_paths_getting_faster_leave_it_alone_and_a_slower_model_moves_it(tmp_path):
    run = read_run(make_run_dir(tmp_path / "run", seed=1, n_requests=30, n_steps=60))
    base = yardstick(run).value
    faster_control = run.steps.copy()
    for phase in ("scheduler_ms", "sampler_ms", "kv_alloc_ms"):
        faster_control[phase] /= 5
    run.steps = faster_control
    assert yardstick(run).value == pytest.approx(base)
    run.steps = faster_control.assign(model_ms=faster_control["model_ms"] * 1.2)  # the machine slowed
    assert yardstick(run).value == pytest.approx(base * 1.2)


def test_none_without_a_model_span_or_tokens(tmp_path):
    bare = read_run(make_run_dir(tmp_path / "bare", seed=2, n_requests=20, n_steps=30))
    bare.steps = bare.steps.drop(columns=["model_ms"])
    assert yardstick(bare) is None
    idle = read_run(make_run_dir(tmp_path / "idle", seed=2, n_requests=20, n_steps=30))
    idle.steps = idle.steps.assign(prefill_tokens=0, decode_tokens=0)
    assert yardstick(idle) is None


def test_drift_void_names_the_move_and_holds_within_its_limits() -> None:
    from infer_prof.profiler.rundir.yardstick import drift_void

    assert drift_void([100.0, 104.0], [98.0, 103.0]) is None  # a few percent: the machine held
    assert "1.50x" in (drift_void([100.0], [150.0]) or "")
    assert "differs by" in (drift_void([100.0, 140.0], [140.0, 100.0]) or "")  # same means, a run 40% off
    # Seen in CI: a slow-down part-way through six interleaved same-config runs, the sides' means 7% apart.
    assert "differs by 26%" in (drift_void([92.7, 116.4, 113.9], [94.4, 92.4, 115.7]) or "")
    assert drift_void([100.0, 112.0], [105.0, 108.0]) is None  # 12% between runs: still a quiet machine
    assert drift_void([], [100.0]) is None


def test_with_a_noise_floor_the_sides_may_differ_by_it_and_the_spread_limit_is_off() -> None:
    from infer_prof.profiler.rundir.yardstick import drift_void

    python, native = [100.0, 135.0], [102.0]  # the two Python runs already differ by 35%
    assert drift_void(python, native) is not None  # without the floor: the spread between runs voids it
    assert drift_void(python, native, noise=0.35) is None  # 0.87x of their mean: inside their own spread
    assert "moved" in (drift_void(python, [60.0], noise=0.35) or "")
