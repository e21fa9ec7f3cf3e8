"""The fabricated run directory is a faithful instance of the result schema."""

from __future__ import annotations

import numpy as np

from infer_prof.profiler.rundir.results import CATEGORIES, COMPONENTS, REQUEST_COLUMNS, STEP_COLUMNS, read_run
from tests.support.run_dirs import make_run_dir


def test_tables_have_schema_columns_and_requested_sizes(tmp_path):
    run = read_run(make_run_dir(tmp_path / "run", seed=1, n_requests=60, n_steps=200))
    assert set(REQUEST_COLUMNS) <= set(run.requests.columns)
    assert set(STEP_COLUMNS) <= set(run.steps.columns)
    assert {
        f"{p}_ms" for p in ("scheduler", "kv_alloc", "prepare", "model", "sampler", "detokenizer", "queue")
    } <= set(run.steps.columns)
    assert len(run.steps) == 200 and len(run.requests) == 60
    assert (run.steps["batch_size"] > 0).all(), "an engine never steps with an empty batch"
    assert (run.steps["start_ns"].diff().dropna() > 0).all()
    phases = run.steps[[c for c in run.steps.columns if c.endswith("_ms") and c != "duration_ms"]].sum(axis=1)
    assert (phases <= run.steps["duration_ms"] + 1e-9).all(), "phases fit inside their step"


def test_sections_agree_with_the_tables(tmp_path):
    run = read_run(make_run_dir(tmp_path / "run", seed=2, n_requests=60, n_steps=200))
    result = run.result
    measured = run.requests[run.requests["ok"] & ~run.requests["warmup"]]
    assert result.metrics["completed"] == len(measured)
    assert np.isclose(result.metrics["ttft_ms"]["p50"], np.percentile(measured["ttft_ms"], 50))
    assert result.engine["steps"] == 200
    spans = result.breakdown["methods"]["spans"]
    assert set(spans["categories"]) == set(CATEGORIES) and set(spans["components"]) == set(COMPONENTS)
    assert np.isclose(sum(spans["categories"].values()), 1.0)
    assert set(result.verdict["predictions"]) == {"scheduler", "sampler", "kv_alloc", "prepare"}
    assert (tmp_path / "run" / "samples.txt").exists()


def test_scale_speeds_up_steps_and_seed_is_reproducible(tmp_path):
    base = read_run(make_run_dir(tmp_path / "a", seed=3, n_requests=40, n_steps=100))
    again = read_run(make_run_dir(tmp_path / "b", seed=3, n_requests=40, n_steps=100))
    fast = read_run(make_run_dir(tmp_path / "c", seed=3, n_requests=40, n_steps=100, throughput_scale=2.0))
    assert base.steps["duration_ms"].equals(again.steps["duration_ms"])
    assert np.isclose(base.steps["duration_ms"].sum() / fast.steps["duration_ms"].sum(), 2.0, rtol=0.01)


def test_profile_off_has_no_breakdown(tmp_path):
    path = make_run_dir(
        tmp_path / "run", seed=4, n_requests=20, n_steps=50, with_breakdown=False, with_samples=False
    )
    result = read_run(path).result
    assert result.breakdown is None and result.verdict is None
    assert result.collectors["spans"]["status"] == "skipped"
    assert not (path / "samples.txt").exists()
