"""Time each control component's C twin against its Python twin on the run's own recorded work.

The speedup a prediction needs is the one on this run's work: its batch sizes, its mix of sampling
parameters, its KV events, its logits. A fixed microbenchmark measures another workload (one batch
size, one parameter mix, synthetic logits), and its speedup for the same sampler moved by an order of
magnitude with the mix (docs/measurements.md, "The sampler's replayed speedup against the bench"). So the
run's recorded work (profiler.replay.recorder) is played again through both twins:

    scheduler  every recorded schedule() call, with the run's arrivals, finishes and free counts
    kv_alloc   every step's frees and grows from those plans (the run's KV events)
    prepare    every step's prepare() with the plan, the block tables and the tokens the run drew
    sampler    up to SAMPLER_STEPS of the run's sample() calls whose logits rows the recorder
               captured, spread over the run, each with the run's sequences, their parameters,
               prompts and tokens drawn so far, on the rows the run's model produced at that call

First the Python twins replay the schedule untimed and must reproduce the run (the free-block count
the engine passed at each step); a run they do not reproduce gets no replay. Then the twins take
turns, `repeats` rounds with the order alternating (ABBA), and each step keeps its median time. The
speedup is sum(Python) / sum(C) of those medians, the Amdahl factor for this run's work, with a
bootstrap interval over steps (blocks of neighbouring steps for the time-ordered control replays).
The sampler's Python side is the exception where the run's sampler was the Python twin on the host:
the recorder timed its calls in the run, so the speedup is the run's time a row over the C twin's
replayed time a row. The replay comes after the load, where the machine may differ (a busy neighbour, another
torch thread count, a warm cache): its Python twin ran slower per row than the run's own on synthetic:tiny,
most under a busy neighbour. So does the C twin's wall time, which a neighbour that arrives or leaves between
the load and the replay moves by itself; there the C twin is timed by its thread's CPU time (one thread: all
of its work) and put on the run's clock by the share of a core the engine thread got while it was runnable in
the run (health's core_share): the conditions are the run's, not the replay's (docs/measurements.md).
Each timed sampler call finds the caches as a run's call finds them after the forward (CacheEvictor).

What the replay cannot reproduce: a sequence's earlier tokens reach the sampler as part of its prompt,
so frequency and presence penalties see fewer tokens than they did in the run (the repetition penalty
sees the same set); a call's rows are the CAPTURE_ROWS rows captured at it, cycled over a wider batch.
The engine's own cost around each call (spans, the step loop) is not in either twin.
"""

from __future__ import annotations

import functools
import gc
import math
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from functools import partial
from typing import TYPE_CHECKING, TypedDict, TypeVar

import numpy as np

from ..rundir.schema import Replay, ReplayComponent
from ..stats import block_length, bootstrap, rate_statistic, ratio_of
from .recorder import WorkloadLog, captured_call

if TYPE_CHECKING:
    import torch

    from ...engine.types import KVAllocator, Prepare, Sampler, SamplingParams, Scheduler, StepPlan

REPLAYED = ("scheduler", "kv_alloc", "prepare", "sampler")
REPEATS = 3
SAMPLER_STEPS = 24
# Many times a core's private caches, yet a read of it before each timed sampler call adds little to a replay
# (its cost and its effect: docs/measurements.md, "The replay's caches").
EVICT_BYTES = 64 * 2**20
Clock = Callable[[], int]


@dataclass(frozen=True)
class PoolShape:
    """The engine configuration the twins are built with: the run's own."""

    num_blocks: int
    block_size: int
    max_batch: int
    max_batched_tokens: int
    policy: str = "fcfs"


@dataclass
class Derived:
    """What the Python twins made of the recorded schedule: owned copies of every plan and table."""

    plans: list[StepPlan]
    tables: list[np.ndarray]
    drawn: dict[int, list[int]]  # step -> the tokens the run drew in it


class ReplayMismatch(Exception):
    """The Python twins, fed the recorded inputs, did not reproduce the run."""


T = TypeVar("T")
TwinMakers = tuple[Callable[[], T], Callable[[], T]]  # (make the Python twin, make the C twin)


class Twins(TypedDict, total=False):
    """The twins a replay plays, per component: a fresh Python twin and a fresh C twin on each call."""

    scheduler: TwinMakers[Scheduler]
    kv_alloc: TwinMakers[KVAllocator]
    prepare: TwinMakers[Prepare]
    sampler: TwinMakers[Sampler]


def default_twins(shape: PoolShape, names: Sequence[str]) -> Twins:
    """name -> (make Python twin, make C twin) for each name whose C twin is loadable."""
    from ...native_paths import loader
    from ...native_paths.toggles import make_twin

    status, sizes = loader.available(), asdict(shape)
    twins: Twins = {}
    for name in names:
        if status.get(name) is not True:
            continue
        # One branch per name: make_twin's overloads give each component its own protocol (partial() would
        # take the first overload's).
        if name == "scheduler":
            twins["scheduler"] = (
                lambda: make_twin("scheduler", False, **sizes),
                lambda: make_twin("scheduler", True, **sizes),
            )
        elif name == "kv_alloc":
            twins["kv_alloc"] = (
                lambda: make_twin("kv_alloc", False, **sizes),
                lambda: make_twin("kv_alloc", True, **sizes),
            )
        elif name == "prepare":
            twins["prepare"] = (
                lambda: make_twin("prepare", False, **sizes),
                lambda: make_twin("prepare", True, **sizes),
            )
        elif name == "sampler":
            twins["sampler"] = (
                lambda: make_twin("sampler", False, **sizes),
                lambda: make_twin("sampler", True, **sizes),
            )
    return twins


def derive(log: WorkloadLog, shape: PoolShape) -> Derived:
    """Replay the recorded schedule through the Python scheduler and allocator (untimed), checking at every
    step that the allocator has the free blocks the run's engine reported; ReplayMismatch if not."""
    from ...native_paths.toggles import make_twin

    sizes = asdict(shape)
    scheduler, pool = make_twin("scheduler", False, **sizes), make_twin("kv_alloc", False, **sizes)
    plans: list[StepPlan] = []
    tables: list[np.ndarray] = []
    for step, (arrivals, finished, free) in enumerate(log.schedules):
        if pool.num_free_blocks != free:
            raise ReplayMismatch(
                f"step {step}: the replay has {pool.num_free_blocks} free KV blocks, the run had {free}"
            )
        plan = scheduler.schedule(arrivals, finished, free).copy()
        tables.append(np.array(pool.step(plan.frees, plan.grow_seq_ids, plan.grow_num_blocks, plan.seq_ids)))
        plans.append(plan)
    return Derived(plans, tables, {step: tokens for step, _, tokens in log.samples})


# -- one twin's pass over the work: per-step ns ---------------------------------------------------


def time_scheduler(
    make: Callable[[], Scheduler], log: WorkloadLog, clock: Clock
) -> tuple[list[int], list[StepPlan]]:
    scheduler = make()
    times: list[int] = []
    plans: list[StepPlan] = []
    for arrivals, finished, free in log.schedules:
        start = clock()
        plan = scheduler.schedule(arrivals, finished, free)
        times.append(clock() - start)
        plans.append(plan.copy())
    return times, plans


def time_kv(
    make: Callable[[], KVAllocator], derived: Derived, clock: Clock
) -> tuple[list[int], list[np.ndarray]]:
    pool = make()
    times: list[int] = []
    tables: list[np.ndarray] = []
    for plan in derived.plans:
        start = clock()
        table = pool.step(plan.frees, plan.grow_seq_ids, plan.grow_num_blocks, plan.seq_ids)
        times.append(clock() - start)
        tables.append(np.array(table))
    return times, tables


def time_prepare(
    make: Callable[[], Prepare], log: WorkloadLog, derived: Derived, clock: Clock
) -> tuple[list[int], list[int]]:
    """prepare() per step, in the engine's order: the step's finished sequences removed, its arrivals
    added, prepare(plan, tables) timed (the engine's `prepare` span), then the tokens it drew handed over."""
    from ...native_paths.bench_control import digest

    prepare, drawn = make(), derived.drawn
    times: list[int] = []
    digests: list[int] = []
    for step, ((arrivals, finished, _), plan, tables) in enumerate(
        zip(log.schedules, derived.plans, derived.tables)
    ):
        for seq_id in finished:
            prepare.remove(seq_id)
        for new in arrivals:
            prepare.add(new.seq_id, log.sequences[new.seq_id][1])
        if not len(plan.seq_ids):
            continue
        start = clock()
        model_input = prepare.prepare(plan, tables)
        times.append(clock() - start)
        digests.append(digest(model_input))
        if step in drawn:
            prepare.append_sampled(drawn[step])
    return times, digests


@dataclass
class SamplerCase:
    """One recorded sample() call, ready to play: the sequences with what they had seen, and logits rows."""

    seq_ids: list[int]
    registrations: list[
        tuple[int, SamplingParams, list[int]]
    ]  # (seq_id, params, prompt + tokens drawn before)
    logits: torch.Tensor
    threads: int | None = None  # torch's thread count on the engine thread at the call (None: not recorded)


def sampler_cases(log: WorkloadLog, limit: int = SAMPLER_STEPS) -> list[SamplerCase]:
    """Up to `limit` of the run's sample() calls whose logits rows were captured, evenly spread, each with
    its sequences' history at that call and its own captured rows (cycled over a batch wider than the
    capture). No two cases share a row, so the interval over cases holds the spread between the run's
    rows: a flat row costs the C sampler several times what a peaked one does (docs/measurements.md)."""
    import torch

    if not log.samples or not log.logits_rows:
        return []
    snapshots = len(log.logits_rows)
    picks = np.linspace(0, snapshots - 1, min(limit, snapshots)).round().astype(int).tolist()
    chosen = {captured_call(log, j): j for j in picks}
    last = max(chosen)
    drawn: dict[int, list[int]] = {}
    cases: list[SamplerCase] = []
    for index, (_, seq_ids, tokens) in enumerate(log.samples):
        snapshot = chosen.get(index)
        if snapshot is not None:
            captured = log.logits_rows[snapshot]
            rows = torch.arange(len(seq_ids)) % len(captured)
            registrations = [
                (seq_id, log.sequences[seq_id][0], [*log.sequences[seq_id][1], *drawn.get(seq_id, ())])
                for seq_id in seq_ids
            ]
            threads = log.capture_threads[snapshot] if snapshot < len(log.capture_threads) else None
            cases.append(SamplerCase(list(seq_ids), registrations, captured.index_select(0, rows), threads))
        if index == last:
            break
        for seq_id, token in zip(seq_ids, tokens):
            drawn.setdefault(seq_id, []).append(token)
    return cases


@functools.cache
def _evict_buffer(floats: int) -> np.ndarray:
    # Kept for the process: its first touch faults every page in, which a sweep's runs, replayed one after
    # another in one process, then pay once.
    return np.ones(floats, dtype=np.float32)


class CacheEvictor:
    """Puts the caches where a run's sample() call finds them: just after the model's forward, which streams
    the weights through every cache and writes the logits last. A replayed call right after its warm-up
    call instead finds its code, its state and the rows hot: the C twin, whose work is small, read faster
    than in the run, the more so the smaller its work (docs/measurements.md, "The replay's caches")."""

    def __init__(self, nbytes: int = EVICT_BYTES) -> None:
        self._buffer = _evict_buffer(max(1, nbytes // 4))

    def __call__(self, logits: torch.Tensor) -> None:
        # Read through: afterwards the core's own caches hold none of the sampler's lines.
        float(self._buffer.sum())
        if getattr(logits, "device", None) is not None and logits.device.type == "cpu":
            float(logits.sum())  # the rows back in, as the output head leaves them


def time_sampler_case(
    make: Callable[[], Sampler],
    case: SamplerCase,
    clock: Clock,
    logits: torch.Tensor | None = None,
    evict: Callable[[torch.Tensor], None] | None = None,
) -> tuple[int, list[int]]:
    """One sample() call on a fresh twin holding the case's sequences, after an untimed call that warms it
    and `evict` (CacheEvictor: the caches as a run leaves them); `logits`: the case's rows where this twin
    met them in the run (the Python twin on the run's device)."""
    logits = case.logits if logits is None else logits
    sampler = make()
    for seq_id, params, history in case.registrations:
        sampler.add(seq_id, params, history)
    tokens = sampler.sample(logits, case.seq_ids)
    if evict is not None:
        evict(logits)
    start = clock()
    sampler.sample(logits, case.seq_ids)  # returns a list: a device's work is done when it returns
    return clock() - start, tokens


# -- taking turns -----------------------------------------------------------------------------------


def interleaved(
    passes: tuple[Callable[[], tuple[list[int], T]], Callable[[], tuple[list[int], T]]], repeats: int
) -> tuple[list[list[int]], list[T]]:
    """Each pass `repeats` times (at least once), taking turns with the order alternating (P N N P P N ...); per
    pass the per-step median over its rounds, and the outputs of its last round (for the twins' agreement)."""
    if repeats < 1:
        raise ValueError(f"repeats={repeats}: each pass must run at least once")
    rounds: list[list[list[int]]] = [[], []]
    outputs: dict[int, T] = {}
    for round_index in range(repeats):
        for which in (0, 1) if round_index % 2 == 0 else (1, 0):
            times, outputs[which] = passes[which]()
            rounds[which].append(times)
    medians = [[int(statistics.median(step)) for step in zip(*per_round)] for per_round in rounds]
    return medians, [outputs[0], outputs[1]]


def speedup_of(python_ns: Sequence[int], native_ns: Sequence[int], *, time_ordered: bool) -> ReplayComponent:
    """sum(Python) / sum(C) over the replayed steps, with a 95% bootstrap interval over steps."""
    pairs = np.column_stack([np.asarray(python_ns, dtype=float), np.asarray(native_ns, dtype=float)])
    block = block_length(len(pairs)) if time_ordered else 1
    interval = bootstrap([pairs], rate_statistic, block=block) if len(pairs) > 1 else None
    point = float(pairs[:, 0].sum() / pairs[:, 1].sum()) if pairs[:, 1].sum() > 0 else None
    return {
        "speedup": point,
        "low": interval.low if interval and math.isfinite(interval.low) else None,
        "high": interval.high if interval and math.isfinite(interval.high) else None,
        "steps": len(pairs),
        "python_us_per_step": float(pairs[:, 0].mean() / 1e3),
        "native_us_per_step": float(pairs[:, 1].mean() / 1e3),
    }


def replay_speedups(
    log: WorkloadLog,
    shape: PoolShape,
    *,
    names: Sequence[str] = REPLAYED,
    repeats: int = REPEATS,
    twins: Twins | None = None,
    clock: Clock = time.perf_counter_ns,
    native_clock: Clock | None = time.thread_time_ns,
    core_share: float | None = None,
) -> Replay:
    """The result's `replay` section: per component {speedup, low, high, steps, python/native µs per step,
    twins_agree}, plus what was replayed and what was not (with why). `native_clock` times the C sampler where
    the run prices its Python twin (None: `clock`), `core_share` the engine thread's in the run (health)."""
    twins = default_twins(shape, names) if twins is None else twins
    section: Replay = {
        "steps_recorded": len(log.schedules),
        "steps_in_run": log.steps_seen,
        "repeats": repeats,
        "components": {},
        "skipped": {},
    }
    if not log.schedules:
        section["skipped"] = dict.fromkeys(names, "no step was recorded")
        return section
    section["skipped"] = {
        name: "its C twin is not built (python native_paths/build.py)" for name in names if name not in twins
    }
    if not twins:
        return section
    try:
        derived = derive(log, shape)
    except ReplayMismatch as exc:
        section["skipped"] = dict.fromkeys(names, f"the replay did not reproduce the run ({exc})")
        return section
    with _collector_paused():
        _replay_all(section, names, twins, log, derived, repeats, (clock, native_clock, core_share))
    return section


@contextmanager
def _collector_paused() -> Iterator[None]:
    """One collection first, then none until the replay ends: a collection inside a timed call would land
    on whichever twin it hits (and one per round costs more than the replay, with a run's results in memory)."""
    gc.collect()
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _replay_all(
    section: Replay,
    names: Sequence[str],
    twins: Twins,
    log: WorkloadLog,
    derived: Derived,
    repeats: int,
    clocks: tuple[Clock, Clock | None, float | None],
) -> None:
    for name in names:
        if name not in twins:
            continue
        try:
            entry = _replay_one(name, twins, log, derived, repeats, clocks)
        except Exception as exc:  # e.g. a C twin refusing a recorded request: the run stands
            section["skipped"][name] = f"its replay failed: {type(exc).__name__}: {exc}"
            continue
        if entry is None:
            section["skipped"][name] = "no recorded call to replay"
        else:
            section["components"][name] = entry


def _replay_one(
    name: str,
    twins: Twins,
    log: WorkloadLog,
    derived: Derived,
    repeats: int,
    clocks: tuple[Clock, Clock | None, float | None],
) -> ReplayComponent | None:
    """One component's replay through both twins: its speedup entry, or None when the run gave it nothing to do."""
    clock, native_clock, core_share = clocks
    if name == "scheduler":
        return _replay_scheduler(twins["scheduler"], log, repeats, clock)
    if name == "kv_alloc":
        return _replay_kv(twins["kv_alloc"], derived, repeats, clock)
    if name == "prepare":
        return _replay_prepare(twins["prepare"], log, derived, repeats, clock)
    cases = sampler_cases(log)
    run = log.sampler_chunks if log.python_sampler else None
    if not cases:
        return None
    return _replay_sampler(
        twins["sampler"],
        cases,
        repeats,
        clock,
        log.logits_device,
        run,
        native_clock=native_clock,
        core_share=core_share,
    )


def _replay_scheduler(
    pair: TwinMakers[Scheduler], log: WorkloadLog, repeats: int, clock: Clock
) -> ReplayComponent:
    """Every recorded schedule() call through both twins; they agree when every plan is equal."""
    py, c = pair
    times, plans = interleaved(
        (partial(time_scheduler, py, log, clock), partial(time_scheduler, c, log, clock)), repeats
    )
    entry: ReplayComponent = {**speedup_of(*times, time_ordered=True), "twins_agree": plans[0] == plans[1]}
    return entry


def _replay_kv(
    pair: TwinMakers[KVAllocator], derived: Derived, repeats: int, clock: Clock
) -> ReplayComponent:
    """Every step's frees and grows through both allocators; they agree when every block table is equal."""
    py, c = pair
    times, tables = interleaved(
        (partial(time_kv, py, derived, clock), partial(time_kv, c, derived, clock)), repeats
    )
    agree = all(np.array_equal(a, b) for a, b in zip(*tables, strict=True))
    entry: ReplayComponent = {**speedup_of(*times, time_ordered=True), "twins_agree": agree}
    return entry


def _replay_prepare(
    pair: TwinMakers[Prepare], log: WorkloadLog, derived: Derived, repeats: int, clock: Clock
) -> ReplayComponent | None:
    """Every step's prepare() through both twins (None when no step had a batch); they agree when every
    model input's digest is equal."""
    py, c = pair
    times, digests = interleaved(
        (partial(time_prepare, py, log, derived, clock), partial(time_prepare, c, log, derived, clock)),
        repeats,
    )
    if not times[0]:
        return None
    entry: ReplayComponent = {
        **speedup_of(*times, time_ordered=True),
        "twins_agree": digests[0] == digests[1],
    }
    return entry


def _replay_sampler(
    pair: TwinMakers[Sampler],
    cases: list[SamplerCase],
    repeats: int,
    clock: Clock,
    device: str = "cpu",
    run: Sequence[Sequence[int]] | None = None,
    evictor: Callable[[torch.Tensor], None] | None = None,
    native_clock: Clock | None = None,
    core_share: float | None = None,
) -> ReplayComponent:
    """Each case played by both twins in turn, each timed call after a CacheEvictor (or `evictor`); a case's
    time is its median over the rounds. The Python twin
    gets the rows on the run's device, as it did in the run; the C twin on the host (the copy there is
    the prediction's added cost, profiler.session.transfer). Both play at the torch thread count the
    engine thread had at the call. Where the run's own sampler was the Python twin on the host (`run`: its
    (ns, rows, calls) per chunk of calls, recorder.WorkloadLog.sampler_chunks), the
    speedup is the run's Python time a row over the C twin's replayed time a row (`python_priced` "run"),
    with an interval over the run's chunks of calls and the cases; the replayed Python time stays beside it
    (`replayed_python_over_run`).
    Why a row, over all the run's calls: under a busy neighbour single in-run calls have a heavy tail (a
    call at two torch threads waiting at OpenMP barriers), which 24 cases catch or miss by chance; the
    run's total has them at their real frequency, and the C twin's time a row has no such tail.

    Why the C twin's CPU time, where the run prices the Python twin (`native_clock`, the thread's CPU clock):
    its wall time in the replay is the replay's conditions: on one recording, busy neighbours that came after the
    load moved it by themselves while its CPU time held (docs/measurements.md, "Slowdown-predicted against
    twin-measured gains, the replay's C sampler on the run's clock").
    The CPU time over `core_share` (the share of a core the engine thread got while runnable in the run) is what
    the C twin's call would have taken in the run's conditions; without a core_share it is taken as a whole core.

    Why the thread count: under one busy-loop hog the engine's governor held torch at one thread for most
    of a SmolLM2 run, while the replay, after the load, ran the Python twin at torch's two and waited on
    OpenMP barriers, slower per row than in the run. The C twin (one thread) did not move, so the replayed
    speedup read several times the quiet one, and the prediction overshot (docs/measurements.md)."""
    import torch

    chunks = np.array(run or [], dtype=float).reshape(-1, 3)  # (ns, rows, calls) per chunk of the run's calls
    run_priced = chunks[:, 1].sum() > 0 and torch.device(device).type == "cpu"
    # Off the host the run's sampler time waits on the model's kernels; without the run's Python twin there is
    # nothing of the run to price it by: the replay prices both twins, each by the same (wall) clock.
    c_clock = native_clock if run_priced and native_clock is not None else clock
    python_ns, native_ns, common = _play_cases(pair, cases, repeats, (clock, c_clock), device, evictor)
    if not run_priced:
        replayed: ReplayComponent = {
            **speedup_of(python_ns, native_ns, time_ordered=False),
            **common,
            "rows": sum(len(case.seq_ids) for case in cases),
            "python_priced": "replay",
        }
        return replayed
    on_cpu_clock = c_clock is not clock
    known = core_share if on_cpu_clock and core_share is not None and 0 < core_share <= 1 else None
    priced = _priced_by_run(chunks, cases, python_ns, [ns / (known or 1.0) for ns in native_ns])
    priced.update(common)
    priced["native_clock"] = "thread cpu" if on_cpu_clock else "wall"
    priced["core_share"] = known  # None: a whole core (or the wall clock)
    return priced


def _play_cases(
    pair: TwinMakers[Sampler],
    cases: list[SamplerCase],
    repeats: int,
    clocks: tuple[Clock, Clock],
    device: str,
    evictor: Callable[[torch.Tensor], None] | None,
) -> tuple[list[int], list[int], ReplayComponent]:
    """Each case played by both twins in turn (the Python twin on `clocks[0]`, the C twin on `clocks[1]`), at
    the case's torch thread count: each twin's median time per case, and whether they agreed and at which
    thread counts they played."""
    import torch

    (py, c), (clock, c_clock) = pair, clocks
    python_ns: list[int] = []
    native_ns: list[int] = []
    agree = True
    threads: dict[str, int] = {}
    own = torch.get_num_threads()
    evict = evictor or CacheEvictor()
    for case in cases:
        on_device = case.logits.to(device)
        with torch_threads(case.threads) as count:
            (py_times, c_times), tokens = interleaved(
                (
                    partial(_timed_once, py, case, clock, on_device, evict),
                    partial(_timed_once, c, case, c_clock, None, evict),
                ),
                repeats,
            )
        threads[str(count)] = threads.get(str(count), 0) + 1
        python_ns.append(py_times[0])
        native_ns.append(c_times[0])
        agree = agree and tokens[0] == tokens[1]
    return python_ns, native_ns, {"twins_agree": agree, "torch_threads": threads, "torch_threads_own": own}


def _priced_by_run(
    chunks: np.ndarray, cases: list[SamplerCase], python_ns: list[int], native_ns: Sequence[float]
) -> ReplayComponent:
    """The speedup as the run's Python time a row (its (ns, rows, calls) chunks) over the C twin's time a row
    (`native_ns` per case, already on the run's clock), with a bootstrap interval over both."""
    run_ns, run_rows, run_calls = chunks.sum(axis=0)
    rows = sum(len(case.seq_ids) for case in cases)
    run_per_row = run_ns / run_rows
    python = chunks[:, :2]  # (ns, rows) per chunk
    native = np.column_stack([np.asarray(native_ns, dtype=float), [len(case.seq_ids) for case in cases]])
    native_per_row = native[:, 0].sum() / rows
    # Both sides resampled: the run's chunks and the cases, each in time order as runs of neighbours (block
    # None), so that a drift within the run widens the interval as a rerun would see it (as the shares do).
    interval = bootstrap([python, native], ratio_of(rate_statistic), block=None)

    def bound(value: float) -> float | None:
        return value if math.isfinite(value) else None

    priced: ReplayComponent = {
        "speedup": run_per_row / native_per_row if native_per_row > 0 else None,
        "low": bound(interval.low),
        "high": bound(interval.high),
        "steps": len(cases),
        "python_us_per_step": run_ns / run_calls / 1e3,  # the run's, over its calls
        "native_us_per_step": native_per_row * run_rows / run_calls / 1e3,  # the replay's, at the run's rows
        "rows": rows,
        "python_priced": "run",
        "run_calls": int(run_calls),
        # The replay's own Python timing, beside the run's: how much the replay's conditions moved it.
        "replayed_python_us_per_step": float(np.mean(python_ns) / 1e3),
        "replayed_python_over_run": float(sum(python_ns) / rows / run_per_row),
    }
    return priced


@contextmanager
def torch_threads(count: int | None) -> Iterator[int]:
    """torch's thread count set to `count` on this thread for the block (None: left as it is), given back
    after; yields the count in force."""
    import torch

    before = torch.get_num_threads()
    if count is None or count < 1 or count == before:
        yield before
        return
    torch.set_num_threads(count)
    try:
        yield count
    finally:
        torch.set_num_threads(before)


def _timed_once(
    make: Callable[[], Sampler],
    case: SamplerCase,
    clock: Clock,
    logits: torch.Tensor | None,
    evict: Callable[[torch.Tensor], None],
) -> tuple[list[int], list[int]]:
    """One timed sample() call (time_sampler_case) as a pass of interleaved: [its ns], the tokens."""
    elapsed, tokens = time_sampler_case(make, case, clock, logits, evict)
    return [elapsed], tokens
