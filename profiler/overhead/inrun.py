"""Profiling cost inside one run: the collectors are paused and resumed in alternating blocks (ABBA) and the blocks' throughputs compared.

Whole runs A/B'd against each other on this shared two-core machine differ by more than the costs they
are after (two runs of the same profile too; docs/measurements.md). Inside one run the slow drift of
the machine and of the load is shared by neighbouring blocks, so pairing a profiled block with the
unprofiled block next to it cancels it; many short pairs then narrow the interval.

What the blocks cannot see: costs paid once per run (py-spy attaching, calibration, the final
summaries), which the whole-run A/B also keeps outside its measured window, and costs that persist
after a collector pauses (memory its records take), which both kinds of block then pay alike.
"""

from __future__ import annotations

import itertools
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..collectors.base import Collector
from ..stats import bootstrap

if TYPE_CHECKING:
    from ...engine.loader import LoadedModel
    from ...scenarios.spec import ScenarioSpec
    from ..collectors.registry import CollectorResults
    from ..collectors.sampling import SamplingResult
    from ..session.options import EngineOptions
    from ..session.session import SessionHooks, SessionOutcome


@dataclass(slots=True)
class Block:
    """A stretch of the run with the collectors on or off, and the tokens the engine produced in it."""

    start_ns: int
    end_ns: int
    on: bool
    tokens: float = 0.0  # the steps' tokens, each spread over the blocks its step overlapped
    stalled: bool = False  # a stall (a step many times the usual length) overlapped this block

    @property
    def throughput(self) -> float:
        return self.tokens * 1e9 / (self.end_ns - self.start_ns) if self.end_ns > self.start_ns else 0.0


@dataclass(slots=True)
class Estimate:
    """ratio = profiled blocks' throughput / unprofiled blocks' throughput (0.98: the profile costs 2%)."""

    ratio: float
    low: float  # 95% bootstrap interval of the ratio, resampling pairs
    high: float
    pairs: int
    pair_ratios: list[float] = field(default_factory=list)

    @property
    def overhead(self) -> float:
        return 1.0 - self.ratio


@dataclass(slots=True)
class InRunResult:
    """Both estimates of one toggled run and how it was toggled.

    all: every complete pair. steady: the pairs no stall touched. A stall is a step ten times the
    median's length; the ones looked at were full garbage collections of the engine's heap (longer as
    the run's requests pile up), which come as likely in a block of either kind. One stall decides its
    pair's ratio, so the steady estimate is the narrower one;
    stalls_on/stalls_off show whether stalls favoured a side (mind that "off" blocks are longer).
    """

    all: Estimate
    steady: Estimate | None
    stalls_on: int = 0  # stalled blocks, by state
    stalls_off: int = 0
    paused: list[str] = field(default_factory=list)  # collectors that were switched off in "off" blocks
    blocks: list[Block] = field(default_factory=list)
    sampling_rate_hz: int | None = None  # py-spy's configured rate in this run (see measure_inrun_overhead)
    py_spy_cpu_s: float | None = None  # py-spy's CPU over the whole run (start-up and settling included)
    on_s: float = 0.0
    off_s: float = 0.0


def abba_state(index: int) -> bool:
    """Block `index`'s state in on, off, off, on, on, off, ...: every pair holds one of each, and the
    order within pairs alternates so a steady drift favours neither side."""
    pair, second = divmod(index, 2)
    return (pair % 2 == 0) != bool(second)


class BlockToggler:
    """A thread that resumes `collectors` for `on_s` and pauses them for `off_s` seconds, in ABBA order.

    `boundaries` holds (time_ns, on) at the start of each block, read after stop(); the time is taken
    after the collectors were switched, so a block is what the engine ran in that state.
    """

    def __init__(
        self,
        collectors: Sequence[Collector],
        *,
        on_s: float,
        off_s: float,
        settle_s: float = 0.0,
        only: Sequence[str] | None = None,
        clock: Callable[[], int] = time.perf_counter_ns,
    ) -> None:
        if on_s <= 0 or off_s <= 0:
            raise ValueError("on_s and off_s must be positive")
        self.collectors = [
            collector
            for collector in collectors
            if collector.status == "ok" and (only is None or collector.name in only)
        ]
        self.on_s, self.off_s = on_s, off_s
        self.settle_s = settle_s
        self.clock = clock
        self.boundaries: list[tuple[int, bool]] = []
        self.paused_names: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="infer-prof-overhead-toggler", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def request_stop(self) -> None:
        """Ask the thread to end its current block and stop, without waiting for it."""
        self._stop.set()

    def stop(self) -> None:
        """Stop toggling and leave every collector measuring; safe to call more than once."""
        self._stop.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join()

    def _switch(self, on: bool) -> None:
        for collector in self.collectors:
            if on:
                collector.resume()
            elif collector.pause():
                self.paused_names.add(collector.name)

    def _run(self) -> None:
        if self._stop.wait(self.settle_s):
            return
        index = 0
        try:
            while not self._stop.is_set():
                on = abba_state(index)
                self._switch(on)
                self.boundaries.append((self.clock(), on))
                index += 1
                if self._stop.wait(self.on_s if on else self.off_s):
                    break
            self.boundaries.append((self.clock(), True))  # the end of the last block
        finally:
            self._switch(True)


def blocks_from_steps(
    boundaries: Sequence[tuple[int, bool]],
    step_starts_ns: Sequence[int],
    step_ends_ns: Sequence[int],
    step_tokens: Sequence[int],
    *,
    stall_factor: float = 10.0,
) -> list[Block]:
    """Blocks between consecutive boundaries, each credited with the part of every step's tokens that its
    overlap with the step is of the step's length; a block that a step `stall_factor` times the median
    step's length overlapped is `stalled`.

    Spread, not counted whole where a step ended: a 0.05 s block holds about seven 7 ms steps, so whole
    steps would add up to a step's tokens of noise to every block (docs/measurements.md, "Crediting
    blocks by overlap, and a cheaper default profile").
    """
    blocks = [
        Block(start, end, on) for (start, on), (end, _next) in itertools.pairwise(boundaries) if end > start
    ]
    durations = sorted(end - start for start, end in zip(step_starts_ns, step_ends_ns))
    stall_ns = stall_factor * durations[len(durations) // 2] if durations else float("inf")
    order = sorted(range(len(step_starts_ns)), key=step_starts_ns.__getitem__)
    cursor = 0
    for index in order:
        start, end = step_starts_ns[index], step_ends_ns[index]
        if end <= start:
            continue  # a step of no length has no time to share out (clocks never give one)
        stalled = end - start > stall_ns
        while cursor < len(blocks) and blocks[cursor].end_ns <= start:
            cursor += 1  # steps go in start order, so no later step reaches back before this block
        overlapped = cursor
        while overlapped < len(blocks) and blocks[overlapped].start_ns < end:
            block = blocks[overlapped]
            overlap = min(end, block.end_ns) - max(start, block.start_ns)
            block.tokens += step_tokens[index] * overlap / (end - start)
            block.stalled = block.stalled or stalled
            overlapped += 1
    return blocks


def _pairs(blocks: Sequence[Block]) -> list[tuple[Block, Block]]:
    """Complete pairs in ABBA order, each as (on block, off block)."""
    return [
        (first, second) if first.on else (second, first)
        for first, second in zip(blocks[0::2], blocks[1::2])
        if first.on != second.on
    ]


def _pair_rows(pairs: Sequence[tuple[Block, Block]]) -> np.ndarray:
    """One row per pair: (on tokens, on ns, off tokens, off ns)."""
    return np.array(
        [(on.tokens, on.end_ns - on.start_ns, off.tokens, off.end_ns - off.start_ns) for on, off in pairs],
        dtype=float,
    ).reshape(-1, 4)


def ratio_of_totals(resampled: np.ndarray) -> np.ndarray:
    """(on tokens / on time) / (off tokens / off time) of each resample of pair rows; NaN with no off tokens."""
    on_tokens, on_ns, off_tokens, off_ns = (resampled[..., column].sum(axis=1) for column in range(4))
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = (on_tokens / on_ns) / (off_tokens / off_ns)
    return np.where((off_tokens == 0) | (on_ns == 0), np.nan, ratio)


def estimate(pairs: Sequence[tuple[Block, Block]], *, resamples: int = 2000, seed: int = 0) -> Estimate:
    """Throughput of the "on" blocks over that of the "off" blocks of `pairs`, with a 95% interval.

    The ratio is of totals (tokens / time on each side), so a block that happened to be short counts
    for less; the interval comes from resampling whole pairs, which keeps each pair's shared drift.
    """
    if not pairs:
        raise ValueError("no complete on/off pair of blocks: the run was shorter than two blocks")
    interval = bootstrap([_pair_rows(pairs)], ratio_of_totals, resamples=resamples, seed=seed)
    pair_ratios = [on.throughput / off.throughput for on, off in pairs if off.throughput > 0]
    return Estimate(
        ratio=interval.point, low=interval.low, high=interval.high, pairs=len(pairs), pair_ratios=pair_ratios
    )


def paired_ratio(blocks: Sequence[Block], *, resamples: int = 2000, seed: int = 0) -> InRunResult:
    """The estimates over every complete pair and over the pairs no stall touched."""
    pairs = _pairs(blocks)
    steady = [(on, off) for on, off in pairs if not on.stalled and not off.stalled]
    return InRunResult(
        all=estimate(pairs, resamples=resamples, seed=seed),
        steady=estimate(steady, resamples=resamples, seed=seed) if steady else None,
        stalls_on=sum(on.stalled for on, _off in pairs),
        stalls_off=sum(off.stalled for _on, off in pairs),
    )


def pooled(results: Sequence[InRunResult], *, resamples: int = 2000, seed: int = 0) -> Estimate:
    """One estimate over the complete pairs of several toggled runs of the same profile, as if one long run."""
    pairs = [pair for result in results for pair in _pairs(result.blocks)]
    return estimate(pairs, resamples=resamples, seed=seed)


def measure_inrun_overhead(
    options: EngineOptions,
    spec: ScenarioSpec,
    loaded: LoadedModel,
    *,
    profile: str = "default",
    on_s: float = 0.2,
    settle_s: float = 2.0,
    only: Sequence[str] | None = None,
    rate_hz: int | None = None,
) -> InRunResult:
    """One run of `spec` under `profile` with its collectors toggled in ABBA blocks.

    py-spy, paused, owes its samples: its timer keeps the average rate over the whole run, so after a pause
    it samples back to back until it has caught up. To make "on" blocks pay py-spy's real rate, it runs
    at a whole number of Hz near a third of the profile's rate, and "on" blocks take that share of the
    time (at the default 2 Hz: 1 Hz, and "off" blocks as long as `on_s`). Toggling starts `settle_s`
    after the collectors (warm-up requests, py-spy's first reads) and stops once no new request will be
    submitted (the last `clients` requests drain the batch, which would slow the final blocks for a
    reason that is not the profile). `only` toggles just the named collectors, the rest measuring
    throughout: what each one costs; `only=[]` toggles none, an A/A run that shows the method's own
    noise. `rate_hz` replaces the profile's py-spy rate: a high one makes py-spy's cost per sample large
    enough to resolve.
    """
    from ..session.session import run_session

    run_rate, off_s = _block_shape(profile, rate_hz, on_s)
    stop_after = None if spec.num_requests is None else max(1, spec.num_requests - (spec.clients or 1))
    holder: dict[str, BlockToggler] = {}
    hooks = _toggling_hooks(
        holder, on_s=on_s, off_s=off_s, settle_s=settle_s, only=only, stop_after=stop_after
    )
    with tempfile.TemporaryDirectory(prefix="infer-prof-inrun-") as scratch:
        outcome = run_session(
            options,
            spec,
            Path(scratch),
            loaded=loaded,
            profile=profile,
            stop_event=threading.Event(),
            hooks=hooks,
            write=False,
            sampling_rate=run_rate,
        )
    toggler = holder.get("toggler")
    if toggler is None:
        raise RuntimeError(f"profile {profile!r} started no collectors: nothing to toggle")
    toggler.stop()
    return _inrun_result(outcome, toggler, run_rate=run_rate, on_s=on_s, off_s=off_s)


def _block_shape(profile: str, rate_hz: int | None, on_s: float) -> tuple[int, float]:
    """py-spy's rate for the run and the "off" blocks' seconds (measure_inrun_overhead says why)."""
    from ..collectors.registry import DEEP_RATE_HZ, TRACED_RATE_HZ

    # The same block shape and py-spy rate whatever `only` says, so that an A/A run (only=[]) or a
    # run toggling some collectors has the noise of the full A/B. Deep mode's py-spy cannot pause.
    rate = rate_hz or (DEEP_RATE_HZ if profile == "deep" else TRACED_RATE_HZ)
    run_rate = rate if profile == "deep" else max(1, round(rate / 3))
    on_fraction = 0.5 if profile == "deep" else run_rate / rate
    return run_rate, on_s * (1 - on_fraction) / on_fraction


def _toggling_hooks(
    holder: dict[str, BlockToggler],
    *,
    on_s: float,
    off_s: float,
    settle_s: float,
    only: Sequence[str] | None,
    stop_after: int | None,
) -> SessionHooks:
    """The session's hooks that start toggling its collectors (the toggler kept in `holder`) and ask it to stop
    once request `stop_after` is done."""
    from ..session.session import SessionHooks

    def on_collectors(collectors: list[Collector]) -> None:
        toggler = BlockToggler(collectors, on_s=on_s, off_s=off_s, settle_s=settle_s, only=only)
        holder["toggler"] = toggler
        toggler.start()

    def on_request_done(done: int, _tokens: int) -> None:
        if stop_after is not None and done >= stop_after and "toggler" in holder:
            holder["toggler"].request_stop()  # on the load's thread: joined after the run, not here

    return SessionHooks(on_collectors=on_collectors, on_request_done=on_request_done)


def _inrun_result(
    outcome: SessionOutcome, toggler: BlockToggler, *, run_rate: int, on_s: float, off_s: float
) -> InRunResult:
    """The run's steps cut into the toggler's blocks and paired, with what the run paused and py-spy's CPU."""
    steps = outcome.steps
    blocks = blocks_from_steps(
        toggler.boundaries, list(steps["start_ns"]), list(steps["end_ns"]), list(steps["batch_size"])
    )
    result = paired_ratio(blocks)
    result.blocks = blocks
    result.paused = sorted(toggler.paused_names)
    result.sampling_rate_hz = run_rate
    collector_results: CollectorResults = outcome.extras.get("collector_results") or {}
    sampling: SamplingResult = collector_results.get("sampling") or {}
    overhead = sampling.get("overhead")
    result.py_spy_cpu_s = overhead.get("py_spy_cpu_s") if overhead else None
    result.on_s, result.off_s = on_s, off_s
    return result


def describe(estimate: Estimate) -> str:
    """One line for a terminal."""
    spread = (
        f", pairs {min(estimate.pair_ratios):.3f}..{max(estimate.pair_ratios):.3f}"
        if estimate.pair_ratios
        else ""
    )
    return (
        f"ratio {estimate.ratio:.4f}, overhead {estimate.overhead:.2%} (95% interval {1 - estimate.high:.2%} .. "
        f"{1 - estimate.low:.2%}), {estimate.pairs} pairs, median pair {statistics.median(estimate.pair_ratios):.3f}"
        f"{spread}"
    )


def summarize(result: InRunResult) -> str:
    """Both estimates, for a terminal."""
    lines = [f"all pairs:    {describe(result.all)}"]
    if result.steady is not None:
        lines.append(f"steady pairs: {describe(result.steady)}")
    on_s = sum(block.end_ns - block.start_ns for block in result.blocks if block.on) / 1e9
    off_s = sum(block.end_ns - block.start_ns for block in result.blocks if not block.on) / 1e9
    lines.append(
        f"stalled blocks: {result.stalls_on} in {on_s:.0f} s on, {result.stalls_off} in {off_s:.0f} s off"
    )
    if on_s > 0 and off_s > 0:
        # The share a profile costs grows as the engine gets faster (docs/measurements.md), so say how fast.
        on_tokens = sum(block.tokens for block in result.blocks if block.on)
        off_tokens = sum(block.tokens for block in result.blocks if not block.on)
        lines.append(f"throughput: {on_tokens / on_s:.0f} tok/s on, {off_tokens / off_s:.0f} tok/s off")
    if result.py_spy_cpu_s is not None and "sampling" in result.paused and on_s > 0:
        # py-spy samples only while on (it is stopped in "off" blocks), so its CPU per second on is the
        # share of a core it took there; its start-up and the settling before toggling add to it.
        lines.append(
            f"py-spy: {result.py_spy_cpu_s:.2f} s of CPU, {result.py_spy_cpu_s / on_s:.2%} of one core over "
            "the on blocks (at most: its start-up counts too)"
        )
    return "\n".join(lines)
