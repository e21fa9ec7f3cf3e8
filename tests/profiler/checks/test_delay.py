"""The slowdown's delay: busy CPU time that lands on its request, on a fake clock exactly and on the real one within 5%."""

from __future__ import annotations

import statistics
import time

import pytest

from infer_prof.profiler.checks.delay import Spinner, spin_until


class FakeClock:
    def __init__(self, tick: int) -> None:
        self.now = 0
        self.tick = tick

    def __call__(self) -> int:
        self.now += self.tick
        return self.now


def test_a_spin_ends_at_the_first_reading_past_its_deadline() -> None:
    clock = FakeClock(tick=7)
    assert spin_until(100, clock) == 105  # 7, 14, ... 98, 105
    assert spin_until(0, clock) == 112  # a deadline already past costs one reading


def test_calibration_takes_the_overshoot_out_of_the_request() -> None:
    clock = FakeClock(tick=300)
    spinner = Spinner(clock)
    uncorrected = spinner.spin(clock(), 1_000)
    assert uncorrected >= 1_000
    overshoot = spinner.calibrate(calls=20, requested_ns=2_000)
    assert overshoot == 100  # 2,000 requested, 2,100 reached at 300 ns a reading
    assert [spinner.spin(clock(), requested) for requested in (1_000, 5_000)] == [
        900,
        5_100,
    ]  # each within one reading of its request
    assert spinner.spin(clock(), 0) == 0 and spinner.spin(clock(), -5) == 0


def test_on_the_real_clock_the_median_call_adds_its_request_within_five_percent() -> None:
    spinner = Spinner()
    spinner.calibrate()
    ratios = []
    for requested in (50_000, 200_000, 1_000_000) * 20:
        start = time.perf_counter_ns()
        ratios.append(spinner.spin(start, requested) / requested)
    # The median, since a busy machine may preempt a few calls past their deadline (which the caller measures).
    assert statistics.median(ratios) == pytest.approx(1.0, abs=0.05)
    assert min(ratios) >= 0.95
