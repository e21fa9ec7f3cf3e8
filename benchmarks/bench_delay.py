"""The slowdown delay's accuracy (requested against added time per call) and that it holds the GIL where time.sleep does not.

    python benchmarks/bench_delay.py            # 200 calls per size, sizes from 20 us to 10 ms

Part 1: a calibrated Spinner (profiler.checks.delay) asked for a delay, call after call, at sizes from a
kv_alloc call's fraction to a sampler call's; added / requested per call, its median, mean and 95th
percentile, and the share of calls within 5%. Part 2: another Python thread counts while the delay
runs, against the same while the delaying thread sleeps: the ratio of its counts says how much of the
interpreter the delay kept (sleep releases the GIL; the busy delay must not).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from infer_prof.profiler.checks.delay import Spinner

SIZES_NS = (20_000, 100_000, 1_000_000, 10_000_000)


def accuracy(spinner: Spinner, requested_ns: int, calls: int) -> list[float]:
    ratios = []
    for _ in range(calls):
        start = time.perf_counter_ns()
        ratios.append(spinner.spin(start, requested_ns) / requested_ns)
    return ratios


def counted_while(hold: bool, seconds: float) -> int:
    """How far another Python thread counts while this one busy-waits (hold) or sleeps for `seconds`."""
    spinner = Spinner()
    count = 0
    stop = threading.Event()

    def counter() -> None:
        nonlocal count
        while not stop.is_set():
            count += 1

    thread = threading.Thread(target=counter)
    thread.start()
    time.sleep(0.01)
    begin = count
    if hold:
        spinner.spin(time.perf_counter_ns(), int(seconds * 1e9))
    else:
        time.sleep(seconds)
    counted = count - begin
    stop.set()
    thread.join()
    return counted


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    spinner = Spinner()
    overshoot = spinner.calibrate()
    print(
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; calibrated overshoot {overshoot} ns"
    )
    print(f"{'requested':>10} {'calls':>6} {'median':>8} {'mean':>8} {'p95':>8} {'within 5%':>10}")
    for size in SIZES_NS:
        ratios = sorted(accuracy(spinner, size, args.calls))
        p95 = ratios[min(len(ratios) - 1, int(0.95 * len(ratios)))]
        within = sum(abs(ratio - 1.0) <= 0.05 for ratio in ratios) / len(ratios)
        print(
            f"{size / 1e6:>8.3f}ms {len(ratios):>6} {statistics.median(ratios):>8.4f} "
            f"{statistics.fmean(ratios):>8.4f} {p95:>8.4f} {within:>10.1%}"
        )
    rounds = [(counted_while(True, 0.2), counted_while(False, 0.2)) for _ in range(5)]
    held = statistics.median(busy / max(1, asleep) for busy, asleep in rounds)
    print(
        f"another thread's progress while the delay runs / while the thread sleeps: {held:.2f} "
        "(the delay holds the GIL: the other thread runs only at the interpreter's switch interval)"
    )


if __name__ == "__main__":
    main()
