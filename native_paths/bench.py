"""Times each C twin against its Python twin in one run (interleaved repeats, medians) and reports the ratios.

Every row says what was timed: one `sample()` call for a whole batch (sampler), one allocator
`step()` of a decode workload given the plan's arrays (kv_alloc), one `schedule()` call with `batch`
sequences running (scheduler); input preparation and the fused core are timed on an engine-like
control loop (native_paths/bench_control.py). Both twins get the very same calls, in alternating
order within each repeat, so that drift on a shared machine hits both; the twins' outputs are
compared along the way.
"""

from __future__ import annotations

import gc
import random
import statistics
import time
from collections.abc import Callable, Sequence

import numpy as np
import torch

from ..engine.kv_alloc import PythonKVAllocator
from ..engine.sampler import PythonSampler
from ..engine.scheduler import PythonScheduler
from ..engine.types import NewSequence, SamplingParams, Scheduler, StepPlan
from .bench_rows import BenchRow, bench_row

COMPONENTS = ("sampler", "kv_alloc", "scheduler", "prepare", "core")
SAMPLER_MIX_BATCH = 32  # the batch at which every sampler mix is timed (others: the mixed step only)
BLOCK_SIZE = 16


def _median_pair(
    python_call: Callable[[], object],
    native_call: Callable[[], object],
    repeats: int,
    prepare: Callable[[], object] = lambda: None,
) -> tuple[float, float]:
    """Median seconds of each call over `repeats` rounds, alternating which goes first; `prepare`
    runs untimed right before each call (e.g. to bring the logits into cache, as a model leaves them)."""
    python_times: list[float] = []
    native_times: list[float] = []
    for round_index in range(repeats):
        order = [(python_call, python_times), (native_call, native_times)]
        for call, times in order if round_index % 2 == 0 else order[::-1]:
            times.append(_timed(call, prepare))
    return statistics.median(python_times), statistics.median(native_times)


def _timed(call: Callable[[], object], prepare: Callable[[], object] = lambda: None) -> float:
    gc.collect()
    # torch's OpenMP workers spin for a while after a parallel region: let them go idle, so that
    # they do not steal the cores from whichever twin runs next.
    time.sleep(0.01)
    prepare()
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


# -- sampler ------------------------------------------------------------------------------------


def model_like_logits(rows: int, vocab: int, rng: np.random.Generator) -> np.ndarray:
    """float32 rows shaped like a language model's: a broad Gaussian tail (std 2) under a few strong
    candidates (8 tokens at 10..18), so that top-p 0.9 keeps a handful of tokens."""
    logits = rng.standard_normal((rows, vocab), dtype=np.float32) * 2.0
    spikes = rng.integers(0, vocab, size=(rows, 8))
    np.put_along_axis(logits, spikes, rng.uniform(10, 18, size=(rows, 8)).astype(np.float32), axis=1)
    return logits


def sampler_params(mix: str, index: int) -> SamplingParams:
    """The parameters of request `index` under a mix; "mixed" gives every request its own."""
    seed = 1_000 + index
    if mix == "greedy":
        return SamplingParams(seed=seed)
    if mix == "top_k50_top_p0.9":
        return SamplingParams(temperature=0.8, top_k=50, top_p=0.9, seed=seed)
    if mix == "top_p0.9":
        return SamplingParams(temperature=1.0, top_p=0.9, seed=seed)
    if mix == "penalties":
        return SamplingParams(
            temperature=0.8,
            top_k=50,
            top_p=0.9,
            repetition_penalty=1.2,
            frequency_penalty=0.3,
            presence_penalty=0.2,
            seed=seed,
        )
    kind, step = index % 6, index // 6
    if kind == 0:
        return SamplingParams(seed=seed, repetition_penalty=1.0 + 0.05 * (step % 3))
    if kind == 1:
        return SamplingParams(temperature=0.6 + 0.05 * (step % 8), top_k=20 + step % 60, seed=seed)
    if kind == 2:
        return SamplingParams(temperature=1.0, top_p=0.8 + 0.01 * (step % 19), seed=seed)
    if kind == 3:
        return SamplingParams(temperature=0.9, top_k=40 + step % 20, top_p=0.95, min_p=0.05, seed=seed)
    if kind == 4:
        return SamplingParams(
            temperature=0.7 + 0.02 * (step % 10),
            min_p=0.02 + 0.01 * (step % 5),
            seed=seed,
            frequency_penalty=0.2,
            presence_penalty=0.1,
        )
    return SamplingParams(temperature=0.8, top_k=50 + step % 50, top_p=0.9, repetition_penalty=1.1, seed=seed)


# Untimed sums of the logits before a timed sampler call: after the pause between rounds the first sums
# run slow until the caches are warm again, and three reached the steady time. (A longer ramp does not suit
# 1 row: the first C call after it ran slow, its own code gone cold, so the row would time the ramp, not
# the sampler.) docs/measurements.md, "Figures that stood in code comments".
RAMP_SUMS = 3

SAMPLER_MIXES = ("greedy", "top_k50_top_p0.9", "top_p0.9", "penalties", "mixed")


def bench_sampler(batch: int, vocab: int, mix: str, repeats: int, seed: int) -> BenchRow:
    from .sampler import NativeSampler, pass_f_variant

    rng = np.random.default_rng(seed)
    logits = torch.from_numpy(model_like_logits(batch, vocab, rng))
    seq_ids = list(range(batch))
    twins = (PythonSampler(), NativeSampler())
    for seq_id in seq_ids:
        prompt = rng.integers(0, vocab, size=200).tolist()
        for sampler in twins:
            sampler.add(seq_id, sampler_params(mix, seq_id), prompt)
    results: list[list[list[int]]] = [[], []]
    timings: list[list[float]] = [[], []]
    flat = logits.numpy()

    def warm() -> None:  # the logits in cache, as the model leaves them
        float(flat.sum())

    floor_times: list[float] = []

    def call(which: int) -> Callable[[], None]:
        def run() -> None:
            # An untimed call first (same for both twins) brings code and buffers back into cache
            # after the pause that _timed makes, and RAMP_SUMS sums bring the core out of its idle
            # state; then the timed one, at about the steady speed the floor is measured at.
            results[which].append(twins[which].sample(logits, seq_ids))
            for _ in range(RAMP_SUMS):
                warm()
            start = time.perf_counter()
            results[which].append(twins[which].sample(logits, seq_ids))
            timings[which].append(time.perf_counter() - start)
            if which == 1:
                # The floor in the same round as the C call it is set against, so that both see the
                # same machine (measured once after all rounds, it moved between mixes: docs/measurements.md).
                warm()
                start = time.perf_counter()
                warm()
                floor_times.append(time.perf_counter() - start)

        return run

    call(0)(), call(1)()  # warm-up: first registrations, buffers, caches
    for times in (*timings, floor_times):
        times.clear()
    _median_pair(call(0), call(1), repeats)
    python_s, native_s = statistics.median(timings[0]), statistics.median(timings[1])
    floor_s = statistics.median(floor_times)
    return bench_row(
        "sampler",
        batch,
        mix,
        python_s,
        native_s,
        floor_us=round(floor_s * 1e6, 1),
        native_floor_ratio=round(native_s / floor_s, 2),
        tokens_match=results[0] == results[1],
        pass_f=pass_f_variant(),
    )


# -- KV allocator -------------------------------------------------------------------------------


def decode_workload(batch: int, steps: int, rng: random.Random) -> tuple[int, list[tuple[np.ndarray, ...]]]:
    """(num_blocks, steps): `batch` sequences decoding one token per step, each finishing with
    probability 1/200 per step and replaced by a new one with a 100-1000-token prompt; each step's
    frees, grows and batch as int64 arrays, as a plan hands them over."""
    lengths = {seq_id: rng.randint(100, 1000) for seq_id in range(batch)}
    next_id = batch
    plan: list[tuple[list[int], list[int], list[int], list[int]]] = [
        ([], list(lengths), [-(-n // BLOCK_SIZE) for n in lengths.values()], list(lengths))
    ]
    for _ in range(steps):
        frees: list[int] = []
        grow_ids: list[int] = []
        grow_counts: list[int] = []
        for seq_id in list(lengths):
            if rng.random() < 1 / 200:
                frees.append(seq_id)
                del lengths[seq_id]
                lengths[next_id] = rng.randint(100, 1000)
                grow_ids.append(next_id)
                grow_counts.append(-(-lengths[next_id] // BLOCK_SIZE))
                next_id += 1
            else:
                lengths[seq_id] += 1
                if lengths[seq_id] % BLOCK_SIZE == 1:  # the new token opens a block
                    grow_ids.append(seq_id)
                    grow_counts.append(1)
        plan.append((frees, grow_ids, grow_counts, list(lengths)))
    num_blocks = batch * (-(-(1000 + steps) // BLOCK_SIZE) + 1)
    return num_blocks, [tuple(np.array(part, dtype=np.int64) for part in step) for step in plan]


def bench_kv(batch: int, repeats: int, seed: int, steps: int = 200) -> BenchRow:
    from .kv_alloc import NativeKVAllocator

    num_blocks, plan = decode_workload(batch, steps, random.Random(seed))
    outputs: list[list[np.ndarray]] = [[], []]

    def replay(which: int) -> Callable[[], None]:
        def run() -> None:
            pool = (PythonKVAllocator, NativeKVAllocator)[which](num_blocks, BLOCK_SIZE)
            pool.step(*plan[0])  # the initial prompts: not a decode step
            start = time.perf_counter()
            last = None
            for step in plan[1:]:
                last = pool.step(*step)
            timings[which].append((time.perf_counter() - start) / steps)
            outputs[which].append(np.array(last))  # a copy: the C twin's tables are a view

        return run

    timings: list[list[float]] = [[], []]
    _median_pair(replay(0), replay(1), repeats)
    same = all(np.array_equal(a, b) for a, b in zip(*outputs))
    return bench_row(
        "kv_alloc",
        batch,
        "decode",
        statistics.median(timings[0]),
        statistics.median(timings[1]),
        tables_match=same,
    )


# -- scheduler ----------------------------------------------------------------------------------


def drive_scheduler(
    scheduler: Scheduler, batch: int, steps: int, rng: random.Random
) -> tuple[list[float], list[StepPlan]]:
    """Fill `batch` running sequences, then time `steps` schedule() calls of a steady decode load
    (1/200 finish per step, replaced by arrivals whose prompts take chunked prefill)."""
    free = batch * 200
    held: dict[int, int] = {}
    next_id = 0
    finished: list[int] = []
    times: list[float] = []
    plans: list[StepPlan] = []
    arrivals: list[NewSequence] = []
    for warm in range(steps + 10_000):
        timed = scheduler.num_running >= batch or warm >= 10_000
        if timed and len(times) >= steps:
            break
        start = time.perf_counter()
        plan = scheduler.schedule(arrivals, finished, free)
        elapsed = time.perf_counter() - start
        if timed:
            times.append(elapsed)
            plans.append(plan.copy())  # the C twin's plan is one reused object
        for seq_id in plan.frees.tolist():
            free += held.pop(seq_id, 0)
        for seq_id, count in zip(plan.grow_seq_ids.tolist(), plan.grow_num_blocks.tolist()):
            held[seq_id] = held.get(seq_id, 0) + count
            free -= count
        finished = [s for s in plan.seq_ids[plan.samples].tolist() if rng.random() < 1 / 200]
        arrivals = []
        missing = batch - scheduler.num_running - scheduler.num_waiting + len(finished)
        for _ in range(max(0, min(missing, 64))):
            arrivals.append(NewSequence(next_id, rng.randint(100, 1000), 256))
            next_id += 1
    return times, plans


def bench_scheduler(batch: int, repeats: int, seed: int, steps: int = 200) -> BenchRow:
    from .scheduler import NativeScheduler

    timings: list[list[float]] = [[], []]
    plans: list[list[StepPlan]] = [[], []]

    def run(which: int) -> Callable[[], None]:
        def go() -> None:
            scheduler = (PythonScheduler, NativeScheduler)[which](BLOCK_SIZE, batch, max(2048, 2 * batch))
            times, made = drive_scheduler(scheduler, batch, steps, random.Random(seed))
            timings[which].append(statistics.mean(times))
            plans[which] = made

        return go

    _median_pair(run(0), run(1), repeats)
    return bench_row(
        "scheduler",
        batch,
        "decode",
        statistics.median(timings[0]),
        statistics.median(timings[1]),
        plans_match=plans[0] == plans[1],
    )


# -- all of it ----------------------------------------------------------------------------------


def run_native_bench(
    batches: Sequence[int] = (1, 32, 256),
    vocab: int = 49152,
    repeats: int = 7,
    seed: int = 0,
    components: Sequence[str] = COMPONENTS,
) -> list[BenchRow]:
    """One row per (component, batch, mix): python_us, native_us (medians), speedup, and checks that the
    twins agreed; sampler rows add floor_us (numpy summing the same logits once: the memory floor),
    native_floor_ratio and pass_f (the build of the fast softmax sum that ran: AVX-512+FMA, AVX2+FMA
    or portable); core rows add separate_us (the three C twins called separately) and
    one_call_gain (separate over fused). Needs the extension (native_paths.loader.require raises if
    it is missing)."""
    from .bench_control import bench_core, bench_prepare
    from .loader import require

    require()
    rows: list[BenchRow] = []
    for batch in batches:
        if "sampler" in components:
            mixes = SAMPLER_MIXES if batch == SAMPLER_MIX_BATCH else ("mixed",)
            rows.extend(bench_sampler(batch, vocab, mix, repeats, seed) for mix in mixes)
        if "kv_alloc" in components:
            rows.append(bench_kv(batch, repeats, seed))
        if "scheduler" in components:
            rows.append(bench_scheduler(batch, repeats, seed))
        if "prepare" in components:
            rows.append(bench_prepare(batch, repeats, seed))
        if "core" in components:
            rows.append(bench_core(batch, repeats, seed))
    return rows
