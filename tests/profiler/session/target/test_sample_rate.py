"""py-spy's rate for another engine's server: the rule from fake costs (the samples the verdict needs, the CPU budget,
what py-spy delivered, the floor), and the calibration with a real py-spy on a busy loop and on the fake server."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from infer_prof.profiler.collectors.registry import DEEP_RATE_HZ, DEFAULT_RATE_HZ
from infer_prof.profiler.collectors.sampling import find_py_spy
from infer_prof.profiler.session.target.sample_rate import (
    BUDGET,
    DELIVERED,
    FIXED,
    FLOOR,
    NEEDED,
    Calibration,
    Need,
    budget_per_process,
    calibrate,
    choose_rate,
    cost_line,
    decide_rate,
    in_run_cost,
    samples_to_resolve,
    tightest_need,
)
from infer_prof.profiler.stats import wilson_interval
from tests.profiler.session.target.conftest import FakeServer

NO_PY_SPY = pytest.mark.skipif(find_py_spy() is None, reason="py-spy is not installed")


def measured(cost_ms: float, *, asked_hz: int = 97, delivered_hz: float = 97.0) -> Calibration:
    """A calibration of one second whose samples cost `cost_ms` of CPU each."""
    samples = round(delivered_hz)
    return Calibration(123, "native", asked_hz, 1.0, samples, 0, samples * cost_ms / 1e3)


@pytest.mark.parametrize(("share", "threshold"), [(0.005, 0.01), (0.02, 0.01), (0.15, 0.30), (0.6, 0.30)])
def test_the_samples_to_resolve_are_the_fewest_whose_interval_leaves_the_threshold_out(
    share: float, threshold: float
) -> None:
    needed = samples_to_resolve(share, threshold)

    def clears(samples: int) -> bool:
        interval = wilson_interval(share * samples, samples)
        return not interval.low <= threshold <= interval.high

    assert clears(needed) and not clears(needed - 1)


def test_a_share_on_its_threshold_cannot_be_resolved() -> None:
    with pytest.raises(ValueError):
        samples_to_resolve(0.01, 0.01)


def test_the_tightest_case_is_half_the_one_percent_threshold_unless_a_share_is_known() -> None:
    tightest = tightest_need()
    assert (tightest.share, tightest.threshold) == (0.005, 0.01)
    assert tightest.samples == max(
        samples_to_resolve(share, threshold)
        for share, threshold in ((0.005, 0.01), (0.02, 0.01), (0.6, 0.3), (0.15, 0.3))
    )
    known = tightest_need(prior_share=0.2)  # a previous look: nearest 30%, far from it in samples
    assert known.threshold == 0.30 and known.samples < tightest.samples / 10
    assert tightest.hz == pytest.approx(tightest.samples / (60 * 0.5))


def test_a_cheap_sample_gets_the_rate_the_question_needs() -> None:
    need = tightest_need()
    choice = choose_rate(need, measured(0.1), processes=2, cores=2)
    assert choice.bound == NEEDED and choice.rate_hz % 2 == 1
    assert need.hz <= choice.rate_hz <= need.hz + 2
    assert choice.rate_hz * 0.1e-3 <= budget_per_process(2, 2)  # within its budget
    assert "busy samples resolve a 0.5% share against 1%" in choice.reason


def test_a_costly_sample_is_held_to_the_cpu_budget() -> None:
    need = tightest_need()
    choice = choose_rate(need, measured(5.0), processes=1, cores=2)
    assert choice.bound == BUDGET and choice.budget_cores == 0.05
    assert choice.budget_hz == pytest.approx(10.0)
    assert choice.rate_hz == 9  # odd, and under the budget's 10 Hz
    assert "held to 10.0 Hz" in choice.reason and "5.00 ms of CPU a sample" in choice.reason
    assert choice.section()["resolve_s"] == pytest.approx(need.samples / (9 * 0.5))


def test_many_processes_share_the_machines_budget() -> None:
    assert budget_per_process(8, 2) == pytest.approx(0.025)
    assert budget_per_process(8, 64) == 0.05
    choice = choose_rate(tightest_need(), measured(5.0), processes=8, cores=2)
    assert (choice.bound, choice.rate_hz) == (BUDGET, 5)


def test_py_spy_that_fell_behind_caps_the_rate_at_what_it_delivered() -> None:
    choice = choose_rate(tightest_need(), measured(0.1, delivered_hz=20.0), processes=1, cores=2)
    assert (choice.bound, choice.rate_hz) == (DELIVERED, 19)


def test_the_old_rate_is_the_floor_even_over_budget() -> None:
    choice = choose_rate(tightest_need(), measured(50.0), processes=1, cores=2)
    assert (choice.bound, choice.rate_hz) == (FLOOR, DEFAULT_RATE_HZ)
    assert f"below the {DEFAULT_RATE_HZ} Hz floor" in choice.reason


def test_an_odd_rate_under_the_need_says_the_cap_bound_it() -> None:
    need = Need(samples=300, share=0.005, threshold=0.01)  # 10 Hz needed
    choice = choose_rate(need, measured(5.0), processes=1, cores=2)  # 10 Hz allowed: 11 would be over
    assert (choice.bound, choice.rate_hz) == (BUDGET, 9)
    met = choose_rate(Need(samples=270, share=0.005, threshold=0.01), measured(5.0), processes=1, cores=2)
    assert (met.bound, met.rate_hz) == (NEEDED, 9)  # 9 Hz needed, 9 allowed


def test_fixed_rates_for_deep_our_own_server_and_no_process() -> None:
    assert (decide_rate(1, foreign=True, profile="deep").rate_hz, FIXED) == (DEEP_RATE_HZ, FIXED)
    ours = decide_rate(1, foreign=False, profile="default")
    assert (ours.rate_hz, ours.bound) == (DEFAULT_RATE_HZ, FIXED) and "spans" in ours.reason
    assert decide_rate(None, foreign=True, profile="default").calibration is None


def test_the_in_run_cost_sums_the_samplers_that_ran() -> None:
    def sampled(threads: dict[str, tuple[int, int]], errors: int, cpu_s: float) -> dict[str, object]:
        """A sampler's result: py-spy counts a stack a thread; {name: (samples, thread ids)}."""
        table = {name: {"samples": n, "thread_ids": list(range(ids))} for name, (n, ids) in threads.items()}
        stacks = sum(n for n, _ in threads.values())
        return {
            "status": "ok",
            "samples": stacks,
            "errors": errors,
            "threads": table,
            "overhead": {"py_spy_cpu_s": cpu_s},
        }

    results = {
        # 90 samples of the process: its main thread in each, a helper that started late, two pool threads of one name
        1: sampled({"MainThread": (90, 1), "late": (30, 1), "pool": (180, 2)}, 10, 0.2),
        2: sampled({"MainThread": (100, 1)}, 0, 0.3),
        3: {"status": "skipped", "samples": 0, "overhead": {}},
    }
    cost = in_run_cost(results, wall_s=10.0)
    assert cost == {"processes": 2, "samples": 200, "cpu_s": 0.5, "cost_ms": 2.5, "cores": 0.05}
    assert in_run_cost({}, 10.0) is None


@pytest.fixture
def busy_loop() -> Iterator[int]:
    process = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield process.pid
    finally:
        process.kill()
        process.wait()


@NO_PY_SPY
def test_a_real_calibration_counts_samples_and_their_cpu(busy_loop: int) -> None:
    found = calibrate(busy_loop, native_stacks=False, rate_hz=51, seconds=1.0)
    assert isinstance(found, Calibration), found
    assert found.pid == busy_loop and found.mode == "nonblocking" and found.asked_hz == 51
    assert 0 < found.samples <= 51 * found.wall_s * 1.5
    assert found.cpu_s > 0 and found.cost_s > 0 and 0 < found.delivered_hz


@pytest.fixture
def threads_spinning() -> Iterator[int]:
    code = "import threading, time\nfor _ in range(3): threading.Thread(target=time.sleep, args=(60,)).start()\nwhile True: pass"
    process = subprocess.Popen([sys.executable, "-c", code])
    try:
        yield process.pid
    finally:
        process.kill()
        process.wait()


@NO_PY_SPY
def test_a_sample_of_a_process_counts_once_whatever_its_threads(threads_spinning: int) -> None:
    time.sleep(0.3)  # its threads started
    found = calibrate(threads_spinning, native_stacks=False, rate_hz=51, seconds=1.0)
    assert isinstance(found, Calibration), found
    # py-spy counts a stack a thread: four threads, four stacks a sample of the process
    assert found.stacks >= 3 * found.samples and found.section()["threads"] == pytest.approx(4, abs=0.5)
    assert found.samples <= 51 * found.wall_s * 1.5


@NO_PY_SPY
def test_a_calibration_of_no_process_says_why() -> None:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()  # its pid is free now
    found = calibrate(process.pid, native_stacks=False, seconds=0.2)
    assert isinstance(found, str) and "did not attach" in found


@NO_PY_SPY
def test_another_engines_tree_is_calibrated_in_native_mode() -> None:
    server = FakeServer()
    try:
        choice = decide_rate(server.pid, foreign=True, profile="default")
    finally:
        server.stop()
    assert choice.bound != FIXED, choice.reason
    assert choice.calibration is not None and choice.calibration.mode == "native"
    assert choice.processes == 2  # the API server and its engine core
    assert choice.rate_hz >= DEFAULT_RATE_HZ and choice.rate_hz % 2 == 1
    section = choice.section()
    assert section["calibration"] and section["calibration"]["cost_ms"] > 0 and section["in_run"] is None


def test_the_closing_line_puts_the_runs_cost_against_the_budget_and_the_calibration() -> None:
    choice = choose_rate(tightest_need(), measured(1.0), processes=2, cores=2)  # 0.05 core: 50 Hz allowed
    results = {
        pid: {
            "status": "ok",
            "samples": 1000,
            "errors": 0,
            "threads": {"MainThread": {"samples": 500, "thread_ids": [pid]}},
            "overhead": {"py_spy_cpu_s": 2.0},
        }
        for pid in (1, 2)
    }
    line = cost_line(choice.section(results, 10.0), 10.0)
    assert line is not None and "py-spy took 40.0% of a core over 2 processes" in line
    assert "4.00 ms of CPU a sample" in line and "50 samples a second of load at 49 Hz asked" in line
    assert "over its budget of 5.0% a process" in line and "4.0x the calibration's" in line
    assert cost_line(choice.section({}, 10.0), 10.0) is None
