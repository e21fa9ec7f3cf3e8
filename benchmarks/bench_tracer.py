"""What the always-on collectors cost: RecordingTracer vs the no-op tracer per span, and py-spy on a torch loop (A/B).

Run: python benchmarks/bench_tracer.py [--pairs 5] [--seconds 1.0] [--rate 59] [--native] [--against REV]
Every number states what it measured: per-span costs are the best of 5 timed loops of nested spans
shaped like an engine step (1 step span holding 6 phase spans and 1 lock use), net of the empty loop;
the py-spy ratio is the median over ABBA-interleaved pairs of (throughput with py-spy attached) /
(throughput without), for a loop of 256x256 float32 matmuls plus a little Python per iteration.
--against REV times this tree's RecordingTracer against the one of git revision REV, in interleaved rounds
of one process, and prints their per-event costs and the ratio (this / REV) per round.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

from infer_prof.engine.trace import NULL_TRACER
from infer_prof.profiler.collectors.sampling import SamplingCollector
from infer_prof.profiler.collectors.spans import RecordingTracer
from infer_prof.profiler.overhead.costs import interleave_ab, slowdown

PHASES = ("queue", "scheduler", "kv_alloc", "model", "sampler", "detokenizer")
EVENTS_PER_STEP = 1 + len(PHASES) + 1  # step span, phase spans, one lock use


def time_steps(tracer: Any, steps: int) -> int:
    lock = threading.Lock()
    clock = time.perf_counter_ns
    start = clock()
    for _ in range(steps):
        with tracer.span("step"):
            with tracer.lock(lock, "queue"):
                pass
            for phase in PHASES:
                with tracer.span(phase):
                    pass
    return clock() - start


def time_empty(steps: int) -> int:
    lock = threading.Lock()
    clock = time.perf_counter_ns
    start = clock()
    for _ in range(steps):
        with lock:
            pass
        for _phase in PHASES:
            pass
    return clock() - start


def per_event_ns(make_tracer: Callable[[], Any], steps: int = 20_000, repeats: int = 5) -> float:
    empty = min(time_empty(steps) for _ in range(repeats))
    best = min(time_steps(make_tracer(), steps) for _ in range(repeats))  # a fresh tracer: no growing lists
    return (best - empty) / (steps * EVENTS_PER_STEP)


def bench_tracer() -> None:
    null = per_event_ns(lambda: NULL_TRACER)
    wall_only = per_event_ns(lambda: RecordingTracer(cpu_clock=None))
    with_cpu = per_event_ns(lambda: RecordingTracer())
    print(f"per span/lock use, net of the bare loop ({EVENTS_PER_STEP} events per step-shaped block):")
    print(f"  NullTracer                         {null:8.0f} ns")
    print(f"  RecordingTracer (wall clock only)  {wall_only:8.0f} ns   x{wall_only / null:.1f} the no-op")
    print(f"  RecordingTracer (+thread CPU time) {with_cpu:8.0f} ns   x{with_cpu / null:.1f} the no-op")
    print(
        f"  => a 20 ms engine step with {EVENTS_PER_STEP} events pays {with_cpu * EVENTS_PER_STEP / 20e6:.3%} "
        "with CPU time on"
    )


def tracer_of_revision(revision: str) -> Any:
    """RecordingTracer as profiler/collectors/spans.py was at `revision` (its imports are this tree's)."""
    root = Path(__file__).resolve().parents[1]
    source = subprocess.run(
        ["git", "show", f"{revision}:profiler/collectors/spans.py"], cwd=root, capture_output=True, text=True
    )
    if source.returncode != 0:
        sys.exit(
            f"bench_tracer: cannot read profiler/collectors/spans.py at {revision}: {source.stderr.strip()}"
        )
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as handle:
        handle.write(source.stdout)
    try:
        spec = importlib.util.spec_from_file_location("spans_at_revision", handle.name)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        Path(handle.name).unlink()  # loaded: the module needs its file no more
    return module.RecordingTracer


def bench_against(revision: str, rounds: int = 9) -> None:
    """This tree's tracer against `revision`'s, wall clock only (as the default profile records)."""
    makers = {"this tree": lambda: RecordingTracer(cpu_clock=None)}
    old = tracer_of_revision(revision)
    makers[revision] = lambda: old(cpu_clock=None)
    costs: dict[str, list[float]] = {name: [] for name in makers}
    ratios = []
    for round_ in range(rounds):
        order = list(makers.items()) if round_ % 2 == 0 else list(makers.items())[::-1]
        got = {name: per_event_ns(make) for name, make in order}
        for name, value in got.items():
            costs[name].append(value)
        ratios.append(got["this tree"] / got[revision])
    print(f"per span/lock use, {rounds} interleaved rounds (median, range):")
    for name, values in costs.items():
        print(f"  {name:12s} {statistics.median(values):6.0f} ns  ({min(values):.0f}-{max(values):.0f})")
    print(
        f"  this tree / {revision}: median {statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f})"
    )


def matmul_throughput(seconds: float) -> float:
    """Iterations per second of a small torch + Python loop, over `seconds`."""
    weights = torch.randn(256, 256)
    hidden = torch.randn(8, 256)
    done = 0
    start = time.perf_counter()
    deadline = start + seconds
    while time.perf_counter() < deadline:
        for _ in range(8):
            hidden = torch.tanh(hidden @ weights)
        sorted(range(500))
        done += 1
    return done / (time.perf_counter() - start)


def bench_py_spy(pairs: int, seconds: float, rate: int, native: bool) -> None:
    probe = SamplingCollector(rate=rate, native_stacks=native)
    probe.start()
    if probe.status != "ok":
        print(f"py-spy A/B skipped: {probe.reason}")
        return
    probe.stop()

    def with_py_spy() -> float:
        collector = SamplingCollector(rate=rate, native_stacks=native)
        collector.start()  # returns once py-spy has attached: the timed loop is all sampled
        try:
            return matmul_throughput(seconds)
        finally:
            collector.stop()

    result = interleave_ab(lambda: matmul_throughput(seconds), with_py_spy, pairs=pairs, warmup=1)
    mode = "--native" if native else "--nonblocking"
    ratio = result.ratio or float("nan")
    print(f"py-spy {mode} at {rate} Hz on a torch matmul loop, {pairs} ABBA pairs of {seconds:.1f} s each:")
    print(
        f"  throughput ratio (with / without) median {ratio:.3f} = x{slowdown(ratio):.2f} slowdown; "
        f"pair ratios {', '.join(f'{value:.3f}' for value in result.pair_ratios)}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--rate", type=int, default=59)
    parser.add_argument(
        "--native", action="store_true", help="py-spy --native (blocking) instead of --nonblocking"
    )
    parser.add_argument("--against", metavar="REV", help="time this tree's tracer against git revision REV's")
    args = parser.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, python {sys.version.split()[0]}")
    if args.against:
        bench_against(args.against)
        return
    bench_tracer()
    bench_py_spy(args.pairs, args.seconds, args.rate, args.native)


if __name__ == "__main__":
    main()
