"""What the load generator itself costs in CPU per request, so that it is never the bottleneck the profiler finds.

Run: python benchmarks/bench_loadgen.py [--requests N]

With a no-op submit (the ticket is already finished), every CPU nanosecond spent is the load
generator's: thread handoff, bookkeeping, sleeping. It measures process CPU time (all threads,
time.process_time_ns) and the calling thread's CPU time (time.thread_time_ns: the open-loop
dispatcher), and compares them with a plain loop that calls submit() and wait() inline, and with
one ~30 ms SmolLM2 decode step on a CPU. Each loop runs with client threads and with a notifying
submit (`notifies=True`: the calling thread drives, as a run does).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from infer_prof.scenarios.loadgen import LoadResult, RequestSpec, generate_requests, prompt_text_for, run_load
from infer_prof.scenarios.spec import load_scenario

DECODE_STEP_US = 30_000  # SmolLM2-135M on a 2-core CPU, small batch: the engine's unit of work


class DoneTicket:
    __slots__ = ()

    def wait(self, timeout: float | None = None) -> bool:
        return True


DONE = DoneTicket()


def noop_submit(request: RequestSpec) -> DoneTicket:
    return DONE


def noop_notifying_submit(request: RequestSpec, done: Callable[[], None]) -> DoneTicket:
    done()  # finished at once, as the engine's on_finish would say later
    return DONE


def measure(label: str, count: int, action: Callable[[], object]) -> float:
    """Run `action`, print CPU µs per request (process and calling thread) and wall time; return process µs."""
    wall, process, thread = time.perf_counter_ns(), time.process_time_ns(), time.thread_time_ns()
    action()
    wall = time.perf_counter_ns() - wall
    process = time.process_time_ns() - process
    thread = time.thread_time_ns() - thread
    per_request = process / count / 1e3
    print(
        f"{label:44s} {per_request:8.1f} µs CPU/request (calling thread {thread / count / 1e3:6.1f} µs)"
        f"   wall {wall / 1e9:6.2f} s for {count} requests"
    )
    return per_request


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=10_000)
    count = parser.parse_args().requests

    chat = load_scenario("chat")
    chat_rate = chat.rate
    if chat_rate is None:
        raise SystemExit("the chat scenario has no request rate: this benchmark reads it as an open loop")
    print(f"load generator CPU cost, {count} requests per case, no-op submit (process CPU = all threads)\n")
    spec = chat.with_overrides(num_requests=count)
    requests: list[RequestSpec] = []
    measure("generate_requests (chat)", count, lambda: requests.extend(generate_requests(spec, 8192)))
    sample = requests[: min(count, 2_000)]
    measure(
        "prompt_text_for (synthetic, ~60 tokens)", len(sample), lambda: [prompt_text_for(r) for r in sample]
    )
    measured = [dataclasses.replace(r, warmup=False) for r in requests]

    def inline() -> None:
        for request in measured:
            noop_submit(request).wait()

    baseline = measure("baseline: submit + wait inline, no threads", count, inline)
    closed = measure(
        "run_load closed loop, 8 clients",
        count,
        lambda: run_load(measured, noop_submit, mode="closed-loop", clients=8),
    )
    notified = measure(
        "run_load closed loop, 8 slots, notifying",
        count,
        lambda: run_load(measured, noop_notifying_submit, mode="closed-loop", clients=8, notifies=True),
    )
    burst = measure(
        "run_load open loop, rate inf (all at once)",
        count,
        lambda: run_load(
            [dataclasses.replace(r, arrival_s=0.0) for r in measured], noop_submit, mode="open-loop"
        ),
    )
    rate = 2_000.0
    paced = [dataclasses.replace(r, arrival_s=r.index / rate) for r in measured]
    results: list[LoadResult] = []
    open_loop = measure(
        f"run_load open loop, {rate:.0f} req/s (sleeps)",
        count,
        lambda: results.append(run_load(paced, noop_submit, mode="open-loop")),
    )
    open_notified = measure(
        f"run_load open loop, {rate:.0f} req/s, notifying",
        count,
        lambda: results.append(run_load(paced, noop_notifying_submit, mode="open-loop", notifies=True)),
    )
    lag = results[0].schedule_lag_ms()
    lag_notified = results[1].schedule_lag_ms()

    worst = max(closed, burst, open_loop, notified, open_notified)
    print()
    for label, lags in (("client threads", lag), ("notifying", lag_notified)):
        print(
            f"schedule lag at {rate:.0f} req/s, {label}: mean {lags['mean']:.3f} ms, p99 {lags['p99']:.3f} ms, "
            f"max {lags['max']:.3f} ms"
        )
    print(f"closed loop, client threads / notifying: {closed / notified:.2f}x the CPU per request")
    print(
        f"the load generator adds at most {worst - baseline:.1f} µs CPU per request over the inline baseline "
        f"({baseline:.2f} µs)"
    )
    print(
        f"worst case {worst:.0f} µs per request = {worst / DECODE_STEP_US:.2%} of ONE {DECODE_STEP_US / 1e3:.0f} ms "
        f"decode step (a 64-token reply takes ~64 steps); at chat's {chat_rate:g} req/s the load generator "
        f"uses {worst * chat_rate / 1e6:.4%} of one core"
    )


if __name__ == "__main__":
    main()
