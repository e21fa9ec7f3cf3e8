"""A control path's share of step time over the run's steps, and the interval it gives a prediction."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from infer_prof.profiler.analysis.diagnose import diagnose
from infer_prof.profiler.analysis.step_shares import step_share_intervals
from tests.profiler.analysis.test_diagnose import ALL_OK, breakdown, split


def _steps(n: int, sampler_share: float, drift: float = 0.0, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    duration = rng.uniform(20.0, 60.0, n)
    share = sampler_share + drift * np.linspace(-1, 1, n) + rng.normal(0, 0.02, n)
    return pd.DataFrame(
        {"duration_ms": duration, "sampler_ms": duration * share, "scheduler_ms": duration * 0.01}
    )


def test_the_share_over_steps_has_an_interval_that_holds_it_and_widens_with_drift() -> None:
    steady = step_share_intervals(_steps(400, 0.2))["sampler"]
    assert steady["low"] < 0.2 < steady["high"] and steady["steps"] == 400
    drifting = step_share_intervals(_steps(400, 0.2, drift=0.1))["sampler"]
    assert drifting["high"] - drifting["low"] > 2 * (steady["high"] - steady["low"])
    assert step_share_intervals(_steps(5, 0.2)) == {}  # too few steps for blocks


def test_a_fast_twins_gain_takes_its_interval_from_the_share() -> None:
    # A 85x twin at Amdahl's limit: its replayed speedup's interval moves the gain by hundredths of a point,
    # so the share's own noise is what the prediction's interval must show.
    spans = split({"interpreter": 0.3, "kernel": 0.7}, {"sampler": 0.2, "model_kernels": 0.7})
    replayed = {"sampler": {"speedup": 85.0, "low": 80.0, "high": 90.0, "steps": 500}}
    narrow = diagnose(
        breakdown(spans), native_speedups=None, measured_gains=None, collectors=ALL_OK, replayed=replayed
    )["predictions"]["sampler"]
    assert narrow["predicted_gain_high"] - narrow["predicted_gain_low"] < 0.001
    intervals = {"sampler": {"share": 0.2, "low": 0.17, "high": 0.23, "steps": 300}}
    wide = diagnose(
        breakdown(spans, share_intervals=intervals),
        native_speedups=None,
        measured_gains=None,
        collectors=ALL_OK,
        replayed=replayed,
    )["predictions"]["sampler"]
    assert wide["predicted_gain"] == pytest.approx(narrow["predicted_gain"])
    assert wide["predicted_gain_low"] == pytest.approx(0.17 * (1 - 1 / 80.0))
    assert wide["predicted_gain_high"] == pytest.approx(0.23 * (1 - 1 / 90.0))
    # A microbenchmark's speedup with the share's interval: bounded by the share alone.
    bench = diagnose(
        breakdown(spans, share_intervals=intervals),
        native_speedups={"sampler": 10.0},
        measured_gains=None,
        collectors=ALL_OK,
    )["predictions"]["sampler"]
    assert bench["predicted_gain_low"] == pytest.approx(0.17 * 0.9) and bench[
        "predicted_gain_high"
    ] == pytest.approx(0.23 * 0.9)
