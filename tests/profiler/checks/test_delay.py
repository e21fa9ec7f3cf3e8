"""The slowdown's delay: busy CPU time that lands on its request, on a fake clock exactly and on the real one within 5%,
with the GIL held throughout or released for a share of it (the C wait; its twin holds it)."""

from __future__ import annotations

import shutil
import statistics
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from infer_prof.profiler.checks import delay
from infer_prof.profiler.checks.delay import Spinner, _released_spinner, gil_release, spin_until

needs_c = pytest.mark.skipif(_released_spinner() is None, reason="the C busy wait (_spin) is not built")


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


@pytest.mark.parametrize("released", [0.0, 0.5, 1.0])
def test_a_delay_that_releases_the_gil_for_a_share_still_adds_its_request(released: float) -> None:
    spinner = Spinner()
    spinner.calibrate()
    ratios = []
    for requested in (200_000, 1_000_000, 3_000_000) * 10:
        start = time.perf_counter_ns()
        ratios.append(spinner.spin(start, requested, released) / requested)
    assert statistics.median(ratios) == pytest.approx(1.0, abs=0.05)
    assert min(ratios) >= 0.95


def test_the_twin_on_a_fake_clock_holds_the_gil_and_spins_to_the_same_end() -> None:
    clock = FakeClock(tick=300)
    spinner = Spinner(clock)
    # No C wait on a clock it cannot read: the released share is spun holding the GIL, to the same deadline.
    assert [spinner.spin(clock(), 5_000, released) for released in (0.0, 0.5)] == [5_100, 5_100]


class Counter:
    """A Python thread counting as fast as it can: it advances only while it holds the GIL."""

    def __init__(self) -> None:
        self.count = 0
        self._stop = False
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop:
            self.count += 1

    @classmethod
    @contextmanager
    def running(cls) -> Iterator[Counter]:
        counter = cls()
        counter._thread.start()
        try:
            yield counter
        finally:
            counter._stop = True
            counter._thread.join()


@pytest.fixture
def long_switch_interval() -> Iterator[None]:
    # Half a second: a thread that holds the GIL keeps it for a whole 20 ms delay, so "held" means no other Python.
    before = sys.getswitchinterval()
    sys.setswitchinterval(0.5)
    try:
        yield
    finally:
        sys.setswitchinterval(before)


@needs_c
@pytest.mark.usefixtures("long_switch_interval")
@pytest.mark.parametrize(("released", "others_ran"), [(0.0, False), (1.0, True)])
def test_another_thread_runs_python_through_a_released_delay_and_not_through_a_held_one(
    released: float, others_ran: bool
) -> None:
    assert gil_release() == "released"
    spinner = Spinner()
    with Counter.running() as counter:
        time.sleep(
            0.01
        )  # the counter has the GIL; taking it back costs this thread up to the switch interval
        before = counter.count
        spinner.spin(time.perf_counter_ns(), 20_000_000, released)
        after = counter.count
        assert (after > before) is others_ran


def test_a_build_named_by_the_path_variable_is_the_one_loaded_and_a_missing_one_leaves_the_twin(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    package_build = sys.modules[delay.MODULE_NAME].__file__ if _released_spinner() is not None else None
    monkeypatch.delitem(sys.modules, delay.MODULE_NAME, raising=False)  # given back after the test
    monkeypatch.setenv(delay.LIBRARY_PATH_VARIABLE, str(tmp_path / "no-such-build.so"))
    assert _released_spinner() is None and gil_release().startswith("held")
    if package_build is None:
        return
    other = tmp_path / Path(package_build).name  # as .ci/sanitize's build stands in a folder of its own
    shutil.copy(package_build, other)
    monkeypatch.setenv(delay.LIBRARY_PATH_VARIABLE, str(other))
    assert _released_spinner() is not None and sys.modules[delay.MODULE_NAME].__file__ == str(other)
