"""What recording a run's control work for the replay costs the engine thread, as a share of its step time.

    python benchmarks/bench_recorder.py              # synthetic:tiny, concurrency-30, 60 requests

A whole-run A/B cannot resolve a cost this small here (two identical runs differ by several percent on
a shared machine), so the recorder's work is priced directly, in one process: the engine's calls
through the recording proxies against the same calls made on the bare components (interleaved, the
median of many), times how often the engine makes them, over the same run's measured step time.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from infer_prof.profiler.replay import recorder
from infer_prof.profiler.replay.recorder import RecordingSampler, RecordingScheduler, WorkloadLog


class _Bare:
    """Stands for a component: the proxies' cost is what they add in front of the real call (the members it
    never times are there so that it stands for a Scheduler and a Sampler)."""

    block_size = 16
    num_waiting = num_running = 0

    def schedule(self, arrivals, finished, free):
        return None

    def add(self, seq_id, params, prompt_token_ids):
        pass

    def remove(self, seq_id):
        pass

    def sample(self, logits, seq_ids):
        return seq_ids


def _per_call_ns(call, calls: int = 20_000, rounds: int = 15) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter_ns()
        for _ in range(calls):
            call()
        times.append((time.perf_counter_ns() - start) / calls)
    return statistics.median(times)


def main() -> None:
    from infer_prof.profiler.session.builder import load_for_options
    from infer_prof.profiler.session.options import EngineOptions
    from infer_prof.profiler.session.session import run_session
    from infer_prof.scenarios.spec import load_scenario

    options = EngineOptions(model="synthetic:tiny", device="cpu")
    spec = load_scenario("concurrency-30").with_overrides(num_requests=60)
    outcome = run_session(
        options, spec, Path("/tmp/bench-recorder"), loaded=load_for_options(options), write=False
    )
    steps = outcome.steps
    step_ns = float(steps["duration_ms"].mean()) * 1e6
    batch = int(round(float(steps["batch_size"].mean())))

    bare = _Bare()
    # Two logs, both open: the scheduler's is one short of full, the sampler's is at its step's record.
    schedule_log, sample_log = WorkloadLog(), WorkloadLog()
    schedule_log.schedules = [None] * (recorder.MAX_STEPS - 1)  # type: ignore[list-item]
    sample_log.schedules, sample_log.steps_seen = [None] * 10, 10  # type: ignore[list-item]
    scheduler, sampler = RecordingScheduler(bare, schedule_log), RecordingSampler(bare, sample_log)
    ids, logits = list(range(batch)), torch.randn(batch, outcome.extras["built"].engine.vocab_size)
    spare = [None] * 400_000  # the bare side pays the same bookkeeping pop as the proxied side

    def schedule() -> None:
        scheduler.schedule([], [], 0)
        schedule_log.schedules.pop()  # stay open and bounded

    def sample() -> None:
        sampler.sample(logits, ids)
        # Start afresh before the captures first thin out: they stay 1 call in CAPTURE_EVERY, the dearest
        # rate a run has (its first calls).
        if len(sample_log.samples) >= (recorder.MAX_CAPTURES - 1) * recorder.CAPTURE_EVERY:
            sample_log.samples.clear()
            sample_log.logits_rows.clear()
            sample_log.capture_threads.clear()

    added = {
        "schedule()": _per_call_ns(schedule) - _per_call_ns(lambda: (bare.schedule([], [], 0), spare.pop())),
        f"sample(), 1 call in {recorder.CAPTURE_EVERY} capturing": _per_call_ns(sample)
        - _per_call_ns(lambda: bare.sample(logits, ids)),
        "attribute reads (x2)": 2
        * (_per_call_ns(lambda: scheduler.num_waiting) - _per_call_ns(lambda: bare.num_waiting)),
    }
    total = sum(added.values())
    print(f"run: {len(steps)} steps, mean batch {batch}, mean step {step_ns / 1e3:,.1f} us")
    for name, ns in added.items():
        print(f"  {name:34s} +{ns:8.1f} ns per step")
    print(f"recording adds {total:,.0f} ns per step = {total / step_ns:.3%} of the step")


if __name__ == "__main__":
    main()
