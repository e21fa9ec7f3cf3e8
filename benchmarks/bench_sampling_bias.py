"""Checks deep-mode stack samples against direct timing: the share of a decode loop spent in its linears, by both.

Run: python benchmarks/bench_sampling_bias.py [--model synthetic:base] [--steps 300] [--priorities low,normal,realtime]
A thread named like the engine's decodes at batch 1 while every linear call is timed with
perf_counter (direct timing, the truth for "inside a linear"); py-spy --native samples the process
at the deep mode's rate, once per sampler priority (profiler.collectors.sampling.PRIORITIES). For
each priority (and once with no sampler) it prints the linears' share of the forward by timing and by samples (stacks under
the timing wrapper), the samples' 95% interval, and the difference in percentage points. On a
machine whose cores the decode keeps busy, a sampler that must wait for a core lands late, after
parallel kernels end, and under-counts the linears.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_model import decode_ms_per_step

from infer_prof.engine.engine import ENGINE_THREAD_NAME
from infer_prof.engine.loader import load_model
from infer_prof.engine.setup_thread import run_on_setup_thread
from infer_prof.profiler.collectors.registry import DEEP_RATE_HZ
from infer_prof.profiler.collectors.sampling import PRIORITIES, SamplingCollector


class TimedLinears:
    """Wraps the model's linear and forward so that their wall time is summed (ns)."""

    def __init__(self, model) -> None:
        self.linear_ns = self.forward_ns = 0
        self._linear, self._forward = model._linear, model.forward
        model._linear, model.forward = self.timed_linear, self.timed_forward

    def timed_linear(self, x, w):
        start = time.perf_counter_ns()
        try:
            return self._linear(x, w)
        finally:
            self.linear_ns += time.perf_counter_ns() - start

    def timed_forward(self, inp):
        start = time.perf_counter_ns()
        try:
            return self._forward(inp)
        finally:
            self.forward_ns += time.perf_counter_ns() - start


def measure(loaded, timer: TimedLinears, priority: str, steps: int) -> tuple[float, float, int, str | None]:
    """(linear share by timing, by samples, engine samples, scheduling) for one sampled decode run."""
    thread = threading.Thread(target=decode_ms_per_step, args=(loaded, 1, steps), name=ENGINE_THREAD_NAME)
    collector = SamplingCollector(
        pid=os.getpid(),
        rate=DEEP_RATE_HZ,
        native_stacks=True,
        priority=priority,
        engine_thread_id_getter=lambda: thread.native_id,
    )
    run_on_setup_thread(lambda: decode_ms_per_step(loaded, 1, 5))  # warm, leaving no OpenMP pool here
    timer.linear_ns = timer.forward_ns = 0
    thread.start()
    collector.start()
    thread.join()
    collector.stop()
    result = collector.result()
    if result["status"] != "ok":
        raise SystemExit(f"py-spy: {result['reason']}")
    from infer_prof.profiler.analysis.classify import parse_raw

    in_forward = in_linear = 0
    for stack in parse_raw(result["raw_text"]):
        if stack.thread_name != ENGINE_THREAD_NAME:
            continue
        names = {frame.function for frame in stack.frames if frame.python}
        if any(name.endswith("timed_forward") for name in names):
            in_forward += stack.count
            in_linear += stack.count * any(name.endswith("timed_linear") for name in names)
    return (
        timer.linear_ns / timer.forward_ns,
        in_linear / max(1, in_forward),
        in_forward,
        result["scheduling"],
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="synthetic:base")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--priorities", default=",".join(PRIORITIES))
    args = parser.parse_args()
    loaded = load_model(args.model)
    timer = TimedLinears(loaded.model)
    # On set-up threads, as the engine's own decode: an OpenMP pool left on this thread would slow the
    # measured thread's and change what the sampler sees (engine.setup_thread).
    run_on_setup_thread(lambda: decode_ms_per_step(loaded, 1, 5))  # warm
    timer.linear_ns = timer.forward_ns = 0
    run_on_setup_thread(lambda: decode_ms_per_step(loaded, 1, args.steps))
    print(f"unsampled: linears {timer.linear_ns / timer.forward_ns:.1%} of the forward by timing", flush=True)
    for priority in args.priorities.split(","):
        timed, sampled, count, scheduling = measure(loaded, timer, priority, args.steps)
        interval = 1.96 * math.sqrt(sampled * (1 - sampled) / max(1, count))
        print(
            f"{priority:8s} (got {scheduling:8s}): linears {timed:.1%} of the forward by timing, "
            f"{sampled:.1%} +-{interval:.1%} by {count} samples: {100 * (sampled - timed):+.1f} pp",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
