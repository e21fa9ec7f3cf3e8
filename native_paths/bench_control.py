"""Times input preparation and the fused core against their Python twins on an engine-like control loop.

The loop is an engine's steady decode load without a model: `batch` sequences running (prompts of
100-1000 tokens, chunked prefill for newcomers, each finishing with probability 1/200 per step and
replaced), every step schedule -> kv_alloc.step -> prepare, then one token per sampled row handed
back. Rows:

    prepare  one prepare() call (what the engine's `prepare` span times; registrations are made at
             admission, in the `queue` span, and the sampled tokens are handed over inside this call),
             the plans from the C scheduler and the tables from the C allocator feeding both twins
             (reused views, as they reach input preparation in the engine with --native all)
    core     one step's schedule(), kv_alloc.step() and prepare() (the engine's three spans): the
             Python twins, the three C twins separately (three foreign calls, `separate_us`) and the
             fused core (one call)

Both twins get the very same inputs; the model inputs they build are compared step by step (a CRC
of every tensor). Each repeat replays the same seeded steps, and each step counts its least time over
the repeats: on a shared machine, another process's time slice lands on single steps.
"""

from __future__ import annotations

import gc
import random
import statistics
import time
import zlib
from collections.abc import Callable

import numpy as np

from ..engine.kv_alloc import PythonKVAllocator
from ..engine.prepare import PythonPrepare
from ..engine.scheduler import PythonScheduler
from ..engine.types import KVAllocator, ModelInput, NewSequence, Prepare, Scheduler
from .bench_rows import BenchRow, bench_row

BLOCK_SIZE = 16
FINISH_CHANCE = 1 / 200


def digest(inp: ModelInput) -> int:
    """A CRC over every field of a model input: equal inputs, equal digests."""
    crc = 0
    for tensor in (inp.token_ids, inp.positions, inp.slot_mapping, inp.sample_indices):
        crc = zlib.crc32(tensor.numpy().tobytes(), crc)
    crc = zlib.crc32(np.ascontiguousarray(inp.block_tables.numpy()).tobytes(), crc)
    return zlib.crc32(repr((inp.query_lens, inp.context_lens)).encode(), crc)


class ControlLoop:
    """Drives scheduler, allocator and preparation like the engine, with seeded arrivals and finishes;
    `timed(phase)` says which parts of each step count ("schedule", "kv_alloc", "prepare")."""

    def __init__(
        self, scheduler: Scheduler, kv_alloc: KVAllocator, prepare: Prepare, batch: int, seed: int
    ) -> None:
        self.scheduler, self.kv_alloc, self.prepare = scheduler, kv_alloc, prepare
        self.batch = batch
        self.rng = random.Random(seed)
        self.next_id = 0
        self.finished: list[int] = []
        self.sampled: list[int] = []

    def run(self, steps: int, timed: frozenset[str]) -> tuple[list[float], list[int]]:
        """Fill `batch` running sequences (untimed), then `steps` timed steps: (seconds, input digests)."""
        times: list[float] = []
        digests: list[int] = []
        gc.collect()
        gc.disable()  # a collection inside a timed call would land on whichever twin it hits
        try:
            self._run(steps, timed, times, digests)
        finally:
            gc.enable()
        return times, digests

    def _run(self, steps: int, timed: frozenset[str], times: list[float], digests: list[int]) -> None:
        for warm in range(steps + 20_000):
            counting = self.scheduler.num_running >= self.batch or warm >= 20_000
            if counting and len(times) >= steps:
                break
            elapsed, inp = self._step(timed)
            if counting:
                times.append(elapsed)
                digests.append(digest(inp) if inp is not None else 0)

    def _step(self, timed: frozenset[str]) -> tuple[float, ModelInput | None]:
        rng, prepare = self.rng, self.prepare
        missing = self.batch - self.scheduler.num_running - self.scheduler.num_waiting + len(self.finished)
        arrivals = []
        prompts = []
        for _ in range(max(0, min(missing, 64))):
            length = rng.randint(100, 1000)
            arrivals.append(NewSequence(self.next_id, length, 256))
            prompts.append([rng.randrange(49152) for _ in range(length)])
            self.next_id += 1
        for new, prompt in zip(arrivals, prompts):
            prepare.add(new.seq_id, prompt)
        for seq_id in self.finished:
            prepare.remove(seq_id)
        if self.sampled:
            prepare.append_sampled(self.sampled)
        clock = time.perf_counter
        elapsed = 0.0
        start = clock()
        plan = self.scheduler.schedule(arrivals, self.finished, self.kv_alloc.num_free_blocks)
        if "schedule" in timed:
            elapsed += clock() - start
        start = clock()
        tables = self.kv_alloc.step(plan.frees, plan.grow_seq_ids, plan.grow_num_blocks, plan.seq_ids)
        if "kv_alloc" in timed:
            elapsed += clock() - start
        inp = None
        if len(plan.seq_ids):
            start = clock()
            inp = prepare.prepare(plan, tables)
            if "prepare" in timed:
                elapsed += clock() - start
        sampled_ids = plan.seq_ids[plan.samples].tolist()
        self.sampled = [(seq_id * 7919 + self.next_id) % 49152 for seq_id in sampled_ids]
        self.finished = [seq_id for seq_id in sampled_ids if rng.random() < FINISH_CHANCE]
        return elapsed, inp


ControlTwins = tuple[Scheduler, KVAllocator, Prepare]  # what ControlLoop drives


def pool_blocks(batch: int) -> int:
    """Room for the load without preemption: a sequence averages ~750 tokens (47 blocks) over its life."""
    return batch * 100 + 200


def python_twins(batch: int) -> ControlTwins:
    return (
        PythonScheduler(BLOCK_SIZE, batch, max(2048, 2 * batch)),
        PythonKVAllocator(pool_blocks(batch), BLOCK_SIZE),
        PythonPrepare(BLOCK_SIZE),
    )


def native_twins(batch: int) -> ControlTwins:
    from .kv_alloc import NativeKVAllocator
    from .prepare import NativePrepare
    from .scheduler import NativeScheduler

    return (
        NativeScheduler(BLOCK_SIZE, batch, max(2048, 2 * batch)),
        NativeKVAllocator(pool_blocks(batch), BLOCK_SIZE),
        NativePrepare(BLOCK_SIZE),
    )


def core_twins(batch: int) -> ControlTwins:
    from .core import core_components

    return core_components(pool_blocks(batch), BLOCK_SIZE, batch, max(2048, 2 * batch))


def _interleaved(
    runs: list[Callable[[], tuple[list[float], list[int]]]], repeats: int
) -> tuple[list[float], list[list[int]]]:
    """Per-step seconds of each run: every repeat replays the same seeded steps (the runs take turns,
    the order rotating each round), each step counts its least time over the repeats (what the
    machine's other work did not inflate), averaged over the steps; and the digests of each run."""
    times: list[list[list[float]]] = [[] for _ in runs]
    digests: list[list[int]] = [[] for _ in runs]
    for round_index in range(repeats):
        order = list(range(len(runs)))
        shift = round_index % len(runs)
        for which in order[shift:] + order[:shift]:
            step_times, digests[which] = runs[which]()
            times[which].append(step_times)
    return [statistics.mean(map(min, zip(*rounds))) for rounds in times], digests


def bench_prepare(batch: int, repeats: int, seed: int, steps: int = 200) -> BenchRow:
    from .kv_alloc import NativeKVAllocator
    from .prepare import NativePrepare
    from .scheduler import NativeScheduler

    def run(prepare_class: Callable[[int], Prepare]) -> Callable[[], tuple[list[float], list[int]]]:
        def go() -> tuple[list[float], list[int]]:
            scheduler = NativeScheduler(BLOCK_SIZE, batch, max(2048, 2 * batch))
            loop = ControlLoop(
                scheduler,
                NativeKVAllocator(pool_blocks(batch), BLOCK_SIZE),
                prepare_class(BLOCK_SIZE),
                batch,
                seed,
            )
            return loop.run(steps, frozenset({"prepare"}))

        return go

    (python_s, native_s), digests = _interleaved([run(PythonPrepare), run(NativePrepare)], repeats)
    return bench_row("prepare", batch, "decode", python_s, native_s, inputs_match=digests[0] == digests[1])


def bench_core(batch: int, repeats: int, seed: int, steps: int = 200) -> BenchRow:
    everything = frozenset({"schedule", "kv_alloc", "prepare"})

    def run(make: Callable[[int], ControlTwins]) -> Callable[[], tuple[list[float], list[int]]]:
        def go() -> tuple[list[float], list[int]]:
            return ControlLoop(*make(batch), batch, seed).run(steps, everything)

        return go

    (python_s, separate_s, core_s), digests = _interleaved(
        [run(python_twins), run(native_twins), run(core_twins)], repeats
    )
    return bench_row(
        "core",
        batch,
        "control step",
        python_s,
        core_s,
        separate_us=round(separate_s * 1e6, 1),
        one_call_gain=round(separate_s / core_s, 2) if core_s > 0 else float("inf"),
        inputs_match=digests[0] == digests[1] == digests[2],
    )
