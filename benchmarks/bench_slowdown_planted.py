"""A planted serial and a planted overlapped component: share-based Amdahl against the slowdown's prediction, and the gain measured by making each one faster.

    python benchmarks/bench_slowdown_planted.py            # 400 steps a slowdown run, 6 rounds of the A/B

A loop of steps stands for the engine: each step runs `sampler` inline (busy CPU work holding the GIL),
then waits on a "device" (a sleep, which frees the GIL) while a helper thread runs `detokenizer` beside
it. Both cost the same CPU time, so both have the same share of the step, and share-based Amdahl
promises the same gain for each. The slowdown run (profiler.checks.slowdown through a recording
tracer, as `run --what-if` does) measures each one's sensitivity; then each component is made twice as
fast in turns with the plain loop (ABBA rounds) and the step's gain is measured: the truth the two
predictions are judged by.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from infer_prof.profiler.analysis.sensitivity import predicted_gain
from infer_prof.profiler.checks.delay import spin_until
from infer_prof.profiler.checks.slowdown import SlowdownExperiment, analyse, label_steps
from infer_prof.profiler.collectors.spans import RecordingTracer

WORK_MS = 0.6  # each component's own CPU time a step
DEVICE_MS = 3.0  # the device wait, which the overlapped component's work (and its delay) fits beside


class _Engine:
    def __init__(self, tracer: RecordingTracer) -> None:
        self.tracer = tracer


def busy(ms: float) -> None:
    spin_until(time.perf_counter_ns() + int(ms * 1e6))


def run_loop(tracer: RecordingTracer, steps: int, sampler_ms: float, detokenizer_ms: float) -> list[float]:
    """`steps` steps; returns each one's ms."""
    go, done, stop = threading.Event(), threading.Event(), threading.Event()

    def helper() -> None:
        while go.wait() and not stop.is_set():
            go.clear()
            with tracer.span("detokenizer"):
                busy(detokenizer_ms)
            done.set()

    thread = threading.Thread(target=helper, daemon=True)
    thread.start()
    durations = []
    try:
        for _ in range(steps):
            with tracer.span("step"):
                start = time.perf_counter_ns()
                with tracer.span("sampler"):
                    busy(sampler_ms)
                go.set()
                time.sleep(DEVICE_MS / 1e3)
                done.wait()
                done.clear()
                durations.append((time.perf_counter_ns() - start) / 1e6)
    finally:
        stop.set()
        go.set()
        thread.join(timeout=5)
    return durations


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    tracer = RecordingTracer()
    experiment = SlowdownExperiment(["sampler", "detokenizer"], block_steps=1)
    experiment.install(_Engine(tracer))  # type: ignore[arg-type]
    experiment.start()
    durations = run_loop(tracer, args.steps, WORK_MS, WORK_MS)
    labelled = label_steps(
        experiment.labels(), pd.DataFrame({"step": range(len(durations)), "duration_ms": durations})
    )
    found = {item.component: item for item in analyse(labelled, ["sampler", "detokenizer"])}

    plain = RecordingTracer()
    baseline: list[float] = []
    faster: dict[str, list[float]] = {"sampler": [], "detokenizer": []}
    for round_ in range(args.rounds):  # ABBA: plain, faster sampler, faster detokenizer, plain, ...
        order = (
            ["plain", "sampler", "detokenizer"] if round_ % 2 == 0 else ["detokenizer", "sampler", "plain"]
        )
        for what in order:
            sampler_ms = WORK_MS / 2 if what == "sampler" else WORK_MS
            detokenizer_ms = WORK_MS / 2 if what == "detokenizer" else WORK_MS
            steps = run_loop(plain, args.steps // 4, sampler_ms, detokenizer_ms)
            (baseline if what == "plain" else faster[what]).append(statistics.median(steps))
    step_ms = statistics.median(baseline)
    print(f"step {step_ms:.2f} ms (median), each component {WORK_MS} ms of CPU a step; made 2x faster below")
    print(
        f"{'component':<12} {'share':>6} {'Amdahl':>8} {'sensitivity':>22} {'slowdown':>22} {'measured':>9}"
    )
    for name, item in found.items():
        share = WORK_MS / step_ms
        amdahl = share * (1 - 1 / 2)
        measured = 1 - statistics.median(faster[name]) / step_ms
        sensitivity = item.sensitivity
        if sensitivity is None:
            print(f"{name:<12} {share:>6.1%} {amdahl:>8.1%} no sensitivity: {item.void}")
            continue
        gain = predicted_gain(sensitivity, share, 2.0)
        interval = f"[{sensitivity.low:.2f}, {sensitivity.high:.2f}]" if sensitivity.low is not None else ""
        gain_interval = f"[{gain.low:.1%}, {gain.high:.1%}]" if gain.low is not None else ""
        print(
            f"{name:<12} {share:>6.1%} {amdahl:>8.1%} {sensitivity.value:>8.2f} {interval:>13} "
            f"{gain.gain:>8.1%} {gain_interval:>13} {measured:>9.1%}"
        )
    print(
        "delay accuracy (added / requested over the run):",
        {name: round(item.accuracy or 0, 3) for name, item in found.items()},
    )


if __name__ == "__main__":
    main()
