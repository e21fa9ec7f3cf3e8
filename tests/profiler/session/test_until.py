"""`run --until resolved`: the options checked up front, and the stopper's decision after each round (fake clock, fake data)."""

from __future__ import annotations

import numpy as np
import pytest

from infer_prof.errors import OptionError
from infer_prof.profiler.session.until import Stopper, checked_until, steps_judge
from infer_prof.profiler.stats import spent_confidence
from infer_prof.scenarios.loadgen import LoadRecord, LoadResult, RequestSpec


@pytest.mark.parametrize(
    ("until", "max_time", "message"),
    [
        ("resolved", None, "needs --max-time"),
        (None, 60.0, "--max-time caps"),
        ("forever", 60.0, "the one condition"),
        ("resolved", 0.0, "above 0"),
        ("resolved", -5.0, "above 0"),
        ("resolved", float("nan"), "above 0"),
        ("resolved", 1e9, "at most a week"),
    ],
)
def test_bad_until_options_are_refused_in_one_line(until, max_time, message) -> None:
    with pytest.raises(OptionError, match=message) as caught:
        checked_until(until, max_time)
    assert "\n" not in str(caught.value)


def test_good_until_options() -> None:
    assert checked_until(None, None) is None
    assert checked_until("resolved", 90) == 90


def steps(interpreter: float, count: int, seed: int = 0) -> list[dict[str, float]]:
    """Steps of 10 ms whose model span is all kernel but `interpreter` of the step; a 0.1 ms scheduler."""
    rng = np.random.default_rng(seed)
    rows = []
    for step in range(count):
        model = 10.0 * (1 - interpreter) + rng.normal(0, 0.2)
        rows.append({"step": step, "duration_ms": 10.0, "model_ms": model, "scheduler_ms": 0.1})
    return rows


def windows(count: int) -> list[dict]:
    """`count` one-step windows, each seeing the model span all kernel."""
    return [
        {
            "first_step": 5 * i,
            "steps": 1,
            "by_span": {"model": {"aten_self_ns": 1e12, "fee_ns": 0, "runtime_ns": 0}},
        }
        for i in range(count)
    ]


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_run_far_from_the_thresholds_stops_at_its_first_look() -> None:
    clock = FakeClock()
    stopper = Stopper(600.0, steps_judge(lambda: (steps(0.15, 200), windows(10))), clock=clock)
    stopper.start()
    clock.now = 20.0
    assert stopper(1) is False
    assert stopper.stopped_by == "resolved"
    record = stopper.record()
    assert record["looks"] == 1 and record["held_by"] == [] and record["confidence"] == spent_confidence(1)


def test_a_run_with_one_window_goes_on_and_stops_at_the_time_cap_saying_why() -> None:
    clock = FakeClock()
    seen = []
    stopper = Stopper(
        100.0, steps_judge(lambda: (steps(0.15, 200), windows(1))), clock=clock, on_look=seen.append
    )
    stopper.start()
    clock.now = 30.0
    assert stopper(1) is True  # 30 s a round: another ends at 60 s, within the cap
    clock.now = 60.0
    assert stopper(2) is True
    clock.now = 90.0
    assert stopper(3) is False  # a fourth would end at 120 s
    assert stopper.stopped_by == "time cap"
    assert [look.look for look in seen] == [1, 2, 3]
    assert "the interpreter share" in stopper.record()["held_by"][0]
    assert "kernel windows (too few)" in seen[-1].progress_text()
    assert stopper.confidence == spent_confidence(3)


def test_a_wide_prediction_holds_the_run_up() -> None:
    rng = np.random.default_rng(3)
    rows = steps(0.5, 40)
    for row in rows:  # a sampler that takes 0 or 4 ms a step: a share of 20% +- a lot over 40 steps
        row["sampler_ms"] = float(rng.choice([0.0, 4.0]))
    stopper = Stopper(1000.0, steps_judge(lambda: (rows, windows(10))), clock=FakeClock())
    assert stopper(1) is True
    assert any("sampler prediction" in phrase for phrase in stopper.looks[-1].held_by)


def test_rounds_join_into_one_load() -> None:
    def spec(index: int) -> RequestSpec:
        return RequestSpec(index, 0.0, 8, None, 4, {})

    first = LoadResult([LoadRecord(spec(0))], "closed-loop", 10, 20, 5, False, 3, 0)
    second = LoadResult([LoadRecord(spec(1))], "closed-loop", 25, 40, 0, False, 4, 0)
    joined = first.joined(second)
    assert [record.request.index for record in joined.records] == [0, 1]
    assert (joined.start_ns, joined.end_ns, joined.peak_in_flight, joined.stopped_early) == (10, 40, 4, False)
