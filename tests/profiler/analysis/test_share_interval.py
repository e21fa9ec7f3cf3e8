"""The built-in verdict's interval: the steps' noise and the kernel windows' spread both widen it, and one window leaves it open."""

from __future__ import annotations

import numpy as np
import pytest

from infer_prof.profiler.analysis.share_interval import (
    WIDEST_STEPS,
    WIDEST_UNRESOLVED,
    WIDEST_WINDOWS,
    interpreter_share_interval,
    running_share,
)


def steps(count: int = 200, seed: int = 0) -> list[dict[str, float]]:
    """Steps of 10 ms: a 5 ms model span and a 3 ms sampler span, with a little noise."""
    rng = np.random.default_rng(seed)
    rows = []
    for step in range(count):
        model, sampler = 5.0 + rng.normal(0, 0.3), 3.0 + rng.normal(0, 0.3)
        rows.append(
            {"step": step, "duration_ms": model + sampler + 2.0, "model_ms": model, "sampler_ms": sampler}
        )
    return rows


def window(rows: list[dict[str, float]], step: int, model: float, sampler: float) -> dict:
    """A one-step window at `step` that saw these kernel fractions of the spans (no fee, no runtime)."""
    row = rows[step]
    return {
        "first_step": step,
        "steps": 1,
        "by_span": {
            "model": {"aten_self_ns": model * row["model_ms"] * 1e6, "fee_ns": 0.0, "runtime_ns": 0.0},
            "sampler": {"aten_self_ns": sampler * row["sampler_ms"] * 1e6, "fee_ns": 0.0, "runtime_ns": 0.0},
        },
    }


def interval(rows, windows, **fractions):
    kernel = fractions or {"model": 0.8, "sampler": 0.3}
    point = 1.0 - sum(kernel[s] * sum(r[f"{s}_ms"] for r in rows) for s in kernel) / sum(
        r["duration_ms"] for r in rows
    )
    return interpreter_share_interval(
        rows, point=point, kernel_fractions=kernel, kernel_source="profiler windows", windows=windows
    )


def test_one_window_leaves_the_kernel_fraction_open_from_all_kernel_to_all_python() -> None:
    rows = steps()
    found = interval(rows, [window(rows, 5, 0.8, 0.3)])
    assert found is not None and found.widest == WIDEST_UNRESOLVED and found.windows == 1
    # model 50% and sampler 30% of step time: all kernel leaves 20% interpreter, all Python 100%
    assert found.low == pytest.approx(0.2, abs=0.03)
    assert found.high == 1.0


def test_windows_that_disagree_widen_the_interval_and_more_of_them_narrow_it() -> None:
    rows = steps()
    rng = np.random.default_rng(1)
    fractions = [(0.8 + rng.normal(0, 0.1), 0.3 + rng.normal(0, 0.2)) for _ in range(40)]
    few = interval(rows, [window(rows, 5 * i, *f) for i, f in enumerate(fractions[:4])])
    many = interval(rows, [window(rows, 5 * i, *f) for i, f in enumerate(fractions)])
    agreeing = interval(rows, [window(rows, 5 * i, 0.8, 0.3) for i in range(4)])
    assert few is not None and many is not None and agreeing is not None
    assert few.widest == WIDEST_WINDOWS and few.windows == 4
    assert many.high - many.low < (few.high - few.low) / 2
    assert agreeing.widest == WIDEST_STEPS  # windows that agree leave only the steps' noise
    assert agreeing.high - agreeing.low < many.high - many.low
    assert many.low < many.share < many.high


def test_the_interval_is_made_at_the_confidence_asked() -> None:
    rows = steps()
    windows = [window(rows, 5 * i, 0.8 + 0.05 * (i % 3), 0.3) for i in range(10)]
    point = 0.4
    common = {
        "point": point,
        "kernel_fractions": {"model": 0.8, "sampler": 0.3},
        "kernel_source": "profiler windows",
    }
    at95 = interpreter_share_interval(rows, windows=windows, **common)
    at999 = interpreter_share_interval(rows, windows=windows, confidence=0.999, **common)
    assert at95 is not None and at999 is not None
    assert at999.low < at95.low < point < at95.high < at999.high


def test_native_samples_and_an_assumed_fraction() -> None:
    rows = steps()
    common = {"point": 0.4, "kernel_fractions": {"model": 0.8}}
    sampled = interpreter_share_interval(rows, kernel_source="native samples", model_samples=400, **common)
    assert sampled is not None and sampled.low < 0.4 < sampled.high and sampled.widest != WIDEST_UNRESOLVED
    assumed = interpreter_share_interval(rows, kernel_source="assumed", **common)
    assert assumed is not None and assumed.widest == WIDEST_UNRESOLVED
    assert assumed.high > 0.85  # the model span's glue could be all of it


def test_too_few_steps_give_no_interval() -> None:
    rows = steps(5)
    assert interval(rows, []) is None
    assert running_share(rows, []) is None


def test_running_share_follows_the_windows_so_far() -> None:
    rows = steps()
    before = running_share(rows, [])
    assert before is not None and before.widest == WIDEST_UNRESOLVED
    windows = [window(rows, 5 * i, 0.8, 0.3) for i in range(8)]
    after = running_share(rows, windows)
    assert after is not None and after.windows == 8
    assert after.share == pytest.approx(1 - (0.8 * 5 + 0.3 * 3) / 10, abs=0.01)
    assert after.high - after.low < before.high - before.low
    record = after.record()
    assert (
        record["windows"] == 8
        and record["samples"] == len(rows)
        and "torch.profiler windows" in record["method"]
    )
