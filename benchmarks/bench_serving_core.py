"""Per-step cost of the Python scheduler, sampler and KV allocator (the baseline the native twins must beat), with evidence.

Run: python benchmarks/bench_serving_core.py [--threads 1] [--quick] [--json out.json]

Measured in one run, each as the median wall time of repeated calls after one warm-up call:
  * scheduler.schedule() per step with 32 and 256 running sequences (steady decode, and with churn:
    one request finishing and one 64-token prompt arriving every step);
  * PythonKVAllocator.step() per step, replaying the plans the scheduler made in those runs;
  * PythonSampler.sample() per step over a 49,152-token vocabulary, batch 32 and 256, for several
    parameter mixes (logits ~ N(0, 4^2): as peaked as a real LM's, so a 0.9 nucleus mostly fits the
    256 best tokens; "flat" rows, N(0, 1), force the full-vocabulary sort);
  * the allocator's O(1) evidence: ns per pop+release and per remove+release at 1k...1M blocks;
  * the no-op tracer: ns per `with tracer.span()` and per `with tracer.lock()` vs a bare loop.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from infer_prof.engine.kv_alloc import PythonKVAllocator
from infer_prof.engine.sampler import PythonSampler
from infer_prof.engine.scheduler import PythonScheduler
from infer_prof.engine.trace import NULL_TRACER
from infer_prof.engine.types import NewSequence, SamplingParams, StepPlan

VOCAB = 49_152
BLOCK_SIZE = 16
RESULTS: dict[str, float] = {}


def median_us(call: Callable[[], object], *, min_reps: int = 5, budget_s: float = 0.5) -> float:
    """Median µs of `call` over at least `min_reps` runs (more while under `budget_s`), warm-up excluded."""
    call()
    times: list[float] = []
    spent = 0.0
    while len(times) < min_reps or (spent < budget_s and len(times) < 2000):
        start = time.perf_counter()
        call()
        elapsed = time.perf_counter() - start
        times.append(elapsed * 1e6)
        spent += elapsed
    return statistics.median(times)


def report(key: str, value: float, unit: str, what: str) -> None:
    RESULTS[key] = value
    print(f"  {value:12.2f} {unit:<8} {what}")


# -- scheduler and allocator ---------------------------------------------------------------------


def scheduler_run(num_seqs: int, churn: bool, steps: int) -> tuple[list[float], list[StepPlan]]:
    """Drive a scheduler at `num_seqs` running sequences; time each schedule() call; keep the plans."""
    scheduler = PythonScheduler(BLOCK_SIZE, num_seqs, max_batched_tokens=num_seqs + 64)
    num_blocks = num_seqs * 64 + 64
    free = num_blocks
    held: dict[int, int] = {}
    next_id = num_seqs
    arrivals = [NewSequence(i, 64, 10_000) for i in range(num_seqs)]
    finished: list[int] = []
    times: list[float] = []
    plans: list[StepPlan] = []
    rng = random.Random(0)
    for step in range(steps):
        start = time.perf_counter()
        plan = scheduler.schedule(arrivals, finished, free)
        times.append((time.perf_counter() - start) * 1e6)
        plans.append(plan)
        # Block accounting of an allocator, without timing one.
        for seq_id in plan.frees:
            free += held.pop(seq_id, 0)
        for seq_id, count in zip(plan.grow_seq_ids, plan.grow_num_blocks):
            held[seq_id] = held.get(seq_id, 0) + count
            free -= count
        arrivals, finished = [], []
        if churn and step >= 8:
            finished = [rng.choice(plan.seq_ids)]
            arrivals = [NewSequence(next_id, 64, 10_000)]
            next_id += 1
    return times[8:], plans  # the first steps are prefills, not the steady state


def bench_scheduler_and_allocator(quick: bool) -> None:
    print("scheduler.schedule() and PythonKVAllocator.step() per engine step (block_size 16):")
    steps = 300 if quick else 1500
    for num_seqs in (32, 256):
        for churn in (False, True):
            label = "1 finish + 1 arrival per step" if churn else "steady decode"
            times, plans = scheduler_run(num_seqs, churn, steps)
            report(
                f"scheduler_us_{num_seqs}_{'churn' if churn else 'decode'}",
                statistics.median(times),
                "µs/step",
                f"PythonScheduler.schedule(), {num_seqs} running, {label}",
            )

            def replay(num_seqs: int = num_seqs, plans: list[StepPlan] = plans) -> None:
                pool = PythonKVAllocator(num_seqs * 64 + 64, BLOCK_SIZE)
                for plan in plans:
                    pool.step(plan.frees, plan.grow_seq_ids, plan.grow_num_blocks, plan.seq_ids)

            per_step = median_us(replay, min_reps=3, budget_s=1.0) / len(plans)
            report(
                f"allocator_us_{num_seqs}_{'churn' if churn else 'decode'}",
                per_step,
                "µs/step",
                f"PythonKVAllocator.step() incl. block tables, {num_seqs} running, {label} (replayed plans)",
            )


# -- sampler -------------------------------------------------------------------------------------

MIXES: dict[str, list[SamplingParams]] = {
    "greedy": [SamplingParams()],
    "top-k 50 + top-p 0.9": [SamplingParams(temperature=0.8, top_k=50, top_p=0.9)],
    "top-p 0.9 alone": [SamplingParams(temperature=0.8, top_p=0.9)],
    "penalties (rep 1.1, freq 0.2, pres 0.1; T 0.8)": [
        SamplingParams(temperature=0.8, repetition_penalty=1.1, frequency_penalty=0.2, presence_penalty=0.1)
    ],
    "mixed per request (the 4 above + min-p 0.05)": [
        SamplingParams(),
        SamplingParams(temperature=0.8, top_k=50, top_p=0.9),
        SamplingParams(temperature=0.8, top_p=0.9),
        SamplingParams(temperature=0.8, repetition_penalty=1.1, frequency_penalty=0.2, presence_penalty=0.1),
        SamplingParams(temperature=1.0, min_p=0.05),
    ],
}


def sampler_for(batch: int, mix: list[SamplingParams], rng: random.Random) -> PythonSampler:
    """A sampler with `batch` requests: 200-token prompts and 50 tokens of output history each."""
    sampler = PythonSampler()
    for seq_id in range(batch):
        base = mix[seq_id % len(mix)]
        params = replace(base, seed=seq_id)
        sampler.add(seq_id, params, [rng.randrange(VOCAB) for _ in range(200)])
    # 50 output tokens each, recorded directly (drawing them would only slow the benchmark down).
    sampler._apply_pending()
    for history in sampler._requests.values():
        for _ in range(50):
            history.record(rng.randrange(VOCAB))
    return sampler


def bench_sampler(quick: bool) -> None:
    print(f"PythonSampler.sample() per step, vocab {VOCAB}, float32 logits in, one token per row out:")
    rng = random.Random(0)
    for batch in (32, 256):
        peaked = torch.randn(batch, VOCAB, generator=torch.Generator().manual_seed(2)) * 4
        flat = torch.randn(batch, VOCAB, generator=torch.Generator().manual_seed(3))
        seq_ids = list(range(batch))
        for name, mix in MIXES.items():
            sampler = sampler_for(batch, mix, rng)
            us = median_us(
                partial(sampler.sample, peaked, seq_ids), min_reps=3, budget_s=0.3 if quick else 1.0
            )
            report(f"sampler_us_{batch}_{name}", us, "µs/step", f"batch {batch}: {name}")
        sampler = sampler_for(batch, MIXES["top-p 0.9 alone"], rng)
        us = median_us(partial(sampler.sample, flat, seq_ids), min_reps=3, budget_s=0.3 if quick else 1.0)
        report(
            f"sampler_us_{batch}_top-p flat",
            us,
            "µs/step",
            f"batch {batch}: top-p 0.9 alone, flat logits (full sort)",
        )


# -- allocator O(1) evidence ---------------------------------------------------------------------


def bench_allocator_scaling(quick: bool) -> None:
    print("PythonKVAllocator free-list operations vs pool size (half the pool held; flat = O(1)):")
    ops = 50_000 if quick else 200_000
    for num_blocks in (1_000, 10_000, 100_000, 1_000_000):
        pool = PythonKVAllocator(num_blocks, BLOCK_SIZE)
        pool.allocate(0, num_blocks // 2)
        middle = pool.free_block_ids()[len(pool.free_block_ids()) // 2]

        def pop_release(
            pop: Callable[[], int] = pool.pop, release: Callable[[int], None] = pool.release
        ) -> None:
            for _ in range(ops):
                release(pop())

        def remove_release(pool: PythonKVAllocator = pool, middle: int = middle) -> None:
            remove, release = pool.remove, pool.release
            for _ in range(ops):
                remove(middle)
                release(middle)

        ns_pop = median_us(pop_release, min_reps=3, budget_s=0.2) * 1e3 / ops
        ns_remove = median_us(remove_release, min_reps=3, budget_s=0.2) * 1e3 / ops
        report(
            f"allocator_ns_pop_release_{num_blocks}",
            ns_pop,
            "ns/pair",
            f"pop()+release(), {num_blocks:,} blocks",
        )
        report(
            f"allocator_ns_remove_release_{num_blocks}",
            ns_remove,
            "ns/pair",
            f"remove(mid-list block)+release(), {num_blocks:,} blocks",
        )
    print(
        f"  {RESULTS['allocator_ns_pop_release_1000000'] / RESULTS['allocator_ns_pop_release_1000']:12.2f} ratio    pop+release at 1M blocks / at 1k blocks"
    )


# -- tracer --------------------------------------------------------------------------------------


def bench_tracer(quick: bool) -> None:
    print("The no-op tracer (engine.trace.NULL_TRACER) vs a bare loop:")
    n = 200_000 if quick else 1_000_000
    tracer, lock = NULL_TRACER, threading.Lock()

    def bare() -> None:
        for _ in range(n):
            pass

    def spans() -> None:
        for _ in range(n):
            with tracer.span("sampler"):
                pass

    def plain_lock() -> None:
        for _ in range(n):
            with lock:
                pass

    def traced_lock() -> None:
        for _ in range(n):
            with tracer.lock(lock, "submit"):
                pass

    bare_ns = median_us(bare, min_reps=3, budget_s=0.2) * 1e3 / n
    span_ns = median_us(spans, min_reps=3, budget_s=0.2) * 1e3 / n
    lock_ns = median_us(plain_lock, min_reps=3, budget_s=0.2) * 1e3 / n
    traced_ns = median_us(traced_lock, min_reps=3, budget_s=0.2) * 1e3 / n
    report("tracer_ns_bare_loop", bare_ns, "ns/iter", "bare `for` loop iteration")
    report(
        "tracer_ns_span",
        span_ns - bare_ns,
        "ns/span",
        "added by `with NULL_TRACER.span(name):` (minus the bare loop)",
    )
    report("tracer_ns_lock_plain", lock_ns - bare_ns, "ns/lock", "`with lock:` (minus the bare loop)")
    report(
        "tracer_ns_lock_traced",
        traced_ns - lock_ns,
        "ns/lock",
        "added by `with NULL_TRACER.lock(lock, name):` over `with lock:`",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--threads", type=int, default=1, help="torch intra-op threads (default 1, as a C twin)"
    )
    parser.add_argument("--quick", action="store_true", help="fewer repetitions (a smoke run)")
    parser.add_argument("--json", type=Path, help="also write every number to this JSON file")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(
        f"python {sys.version.split()[0]}, torch {torch.__version__}, torch threads {torch.get_num_threads()}"
    )
    bench_scheduler_and_allocator(args.quick)
    bench_sampler(args.quick)
    bench_allocator_scaling(args.quick)
    bench_tracer(args.quick)
    if args.json:
        args.json.write_text(json.dumps(RESULTS, indent=2) + "\n")


if __name__ == "__main__":
    main()
