"""What a `--swap` run's probe records say: the engine's steps with and without the swapped-in C sampler, paired by turns, with an A/A, and the gain its own speedup predicted.

The steps take turns 1, S, S, 1 (profiler/inject/vllm_sampler_swap.py: S has the swap in, 1 is vLLM's own
sampler); every call of the swapped function logs its time, its rows and the path it took (swap-PID.tsv).
Neighbouring steps of about equal size (probe_spans' rule) pair one turn of each kind; like neighbours make
the A/A. Per step:

    forward ms   the swapped function's own time (vLLM's TopKTopPSampler.forward_cpu, or the C sampler)
    sampler ms   the probe's sampler component (the model runner's _sample, exclusive), which holds it
    step ms      the engine's step (the yardstick)
    tokens/s     rows sampled / step time, summed over an arm's steps
    TPOT ms      the step time of decode-only steps (as many tokens scheduled as rows sampled)

Each arm's figure has a bootstrap interval over its paired steps; each ratio (with / without) one over the
pairs (profiler.overhead.inrun's ratio of totals), and the A/A's ratio says how far noise alone moves it. The
prediction is Amdahl's from this run's own figures: the forward share s of the steps without the swap and
the forward speedup k measured beside it give a step time of 1 - s (1 - 1/k) of the old one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..overhead.inrun import Block, estimate
from ..stats import bootstrap, mean_statistic, rate_statistic
from .probe_slowdown import outermost_steps
from .probe_spans import (
    END,
    INDEX,
    SIZE_TOLERANCE,
    START,
    STEP,
    exclusive_ns,
    step_sizes,
)

SWAP_ON = ord("S")  # vllm_sampler_swap.SWAP_ON: the turn with the swap in
SWAP_OFF = ord("1")
DELAYED = ord("a")  # probe_slowdown.FIRST_CODE: switch bytes from here on are a slowdown's delayed turns
PATHS = (  # vllm_sampler_swap.PATHS, by code
    "swapped",
    "off turn",
    "processed logprobs",
    "fp64 gumbel",
    "no top-k or top-p",
    "logits layout",
    "refused by C",
    "error",
)
C_START, C_END, C_ROWS, C_PATH = range(4)  # columns of swap-PID.tsv
MIN_PAIRS = 8
SAMPLER = "sampler"


@dataclass(frozen=True, slots=True)
class Figure:
    """A point with its 95% interval (None where it could not be had)."""

    point: float | None
    low: float | None = None
    high: float | None = None


@dataclass(frozen=True, slots=True)
class Arms:
    """One figure with the swap in and without it, and with / without over the pairs."""

    with_swap: Figure
    without: Figure
    ratio: Figure


@dataclass(slots=True)
class SwapResult:
    """result of analyse_swap: written as swap.json in the run directory."""

    swapped_in: list[int]  # pids where the swap replaced the function
    refused: dict[str, str]  # pid -> why the swap left vLLM's function there
    rows: dict[str, int]  # rows by the path they took, all processes
    steps: int = 0
    pairs: int = 0
    aa_pairs: int = 0
    forward_ms: Arms | None = None
    sampler_ms: Arms | None = None
    step_ms: Arms | None = None
    tokens_per_s: Arms | None = None
    tpot_ms: Arms | None = None
    aa_step_ratio: Figure | None = None  # like with like: step time ratio, the noise
    forward_speedup: Figure | None = None  # forward ms without / with
    forward_share: float | None = None  # forward ms / step ms, steps without the swap
    predicted_step_ratio: float | None = None  # Amdahl from forward_share and forward_speedup
    note: str | None = None
    lines: list[str] = field(default_factory=list)


def analyse_swap(
    probes: list[dict[str, str]],
    found: dict[int, dict[str, Any]],
    calls: dict[int, np.ndarray],
    statuses: dict[int, dict[str, Any]],
) -> SwapResult:
    """`found` is read_probe's (pid -> records, sizes, turns, status), `calls` swap-PID.tsv's rows and `statuses`
    swap-PID.json per pid."""
    result = _swap_statuses(statuses)
    components = [str(probe.get("component")) for probe in probes]
    step_indices = [i for i, name in enumerate(components) if name == STEP]
    counts = {
        pid: int(np.isin(entry["records"][:, INDEX], step_indices).sum()) for pid, entry in found.items()
    }
    step_pid = max(counts, key=counts.__getitem__, default=None)
    if step_pid is None or counts[step_pid] == 0:
        result.note = "no step probe recorded: the A/B needs the engine's steps"
        return _with_lines(result)
    steps = outermost_steps(found[step_pid]["records"], step_indices)
    turns = found[step_pid].get("turns")
    if turns is None or not len(turns):
        result.note = "the steps logged no turns: the swap was never switched in (is the step probe patched?)"
        return _with_lines(result)
    state = _turn_of(steps[:, START], turns)
    steps = steps[state < DELAYED]  # a slowdown's delayed turns (run beside the swap) are neither arm
    starts, ends = steps[:, START], steps[:, END]
    on = state[state < DELAYED] == SWAP_ON
    forward_ns, rows = _per_step_calls(starts, ends, calls)
    sampler_ns = _per_step_component(starts, ends, found, components, SAMPLER)
    sizes = step_sizes(steps[:, [START, END, INDEX]], [entry.get("sizes") for entry in found.values()])
    result.steps = len(steps)
    ab, aa = _neighbours(on, sizes)
    result.pairs, result.aa_pairs = len(ab), len(aa)
    if len(ab) < MIN_PAIRS:
        result.note = (
            f"{len(ab)} pairs of neighbouring steps with and without the swap: too few (at least {MIN_PAIRS})"
        )
        return _with_lines(result)
    step_ns = ends - starts
    result.step_ms = _arms(ab, step_ns, np.ones(len(steps)), starts, ends)
    result.forward_ms = _arms(ab, forward_ns, np.ones(len(steps)), np.zeros(len(steps)), forward_ns)
    result.sampler_ms = _arms(ab, sampler_ns, np.ones(len(steps)), np.zeros(len(steps)), sampler_ns)
    result.tokens_per_s = _throughput(ab, rows, starts, ends)
    decode = rows > 0 if sizes is None else (rows > 0) & (sizes == rows)
    decode_pairs = [(a, b) for a, b in ab if decode[a] and decode[b]]
    if len(decode_pairs) >= MIN_PAIRS:
        result.tpot_ms = _arms(decode_pairs, step_ns, np.ones(len(steps)), starts, ends)
    if len(aa) >= MIN_PAIRS:
        blocks = [(_block(a, starts, ends, 1.0, True), _block(b, starts, ends, 1.0, False)) for a, b in aa]
        noise = estimate(blocks)
        result.aa_step_ratio = _figure(1 / noise.ratio, 1 / noise.high, 1 / noise.low)
    _add_prediction(result, result.forward_ms.ratio, ab, step_ns, forward_ns)
    return _with_lines(result)


def _swap_statuses(statuses: dict[int, dict[str, Any]]) -> SwapResult:
    """What the swap's statuses say before any step is read: where it went in, where it was refused and why, and
    the rows each path took."""
    result = SwapResult(
        swapped_in=sorted(pid for pid, status in statuses.items() if status.get("swapped")),
        refused={
            str(pid): str(s.get("why"))
            for pid, s in statuses.items()
            if not s.get("swapped") and s.get("version")
        },
        rows={name: 0 for name in PATHS},
    )
    for status in statuses.values():
        for name, count in (status.get("rows") or {}).items():
            result.rows[name] = result.rows.get(name, 0) + int(count)
    return result


def _add_prediction(
    result: SwapResult,
    ratio: Figure,
    ab: list[tuple[int, int]],
    step_ns: np.ndarray,
    forward_ns: np.ndarray,
) -> None:
    """The forward's speedup (from its with/without `ratio`), its share of the steps without the swap, and the
    step ratio Amdahl predicts from the two."""
    if ratio.point:
        result.forward_speedup = _figure(
            1 / ratio.point, 1 / ratio.high if ratio.high else None, 1 / ratio.low if ratio.low else None
        )
    off = [b for _a, b in ab]
    total_step = float(step_ns[off].sum())
    if total_step > 0 and result.forward_speedup is not None and result.forward_speedup.point:
        share = float(forward_ns[off].sum()) / total_step
        result.forward_share = share
        result.predicted_step_ratio = 1 - share * (1 - 1 / result.forward_speedup.point)


def _turn_of(step_starts: np.ndarray, turns: np.ndarray) -> np.ndarray:
    """Each step's switch byte: the last turn logged at or before its start (-1 before any)."""
    turns = np.asarray(turns, dtype=np.int64).reshape(-1, 2)
    turns = turns[np.argsort(turns[:, 0], kind="stable")]
    at = np.searchsorted(turns[:, 0], step_starts, side="right") - 1
    return np.where(at >= 0, turns[np.maximum(at, 0), 1], -1)


def _per_step_calls(
    starts: np.ndarray, ends: np.ndarray, calls: dict[int, np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    """The swapped function's ns and rows within each step (by the start of the call), over every process."""
    forward = np.zeros(len(starts))
    rows = np.zeros(len(starts))
    for table in calls.values():
        table = np.asarray(table, dtype=np.int64).reshape(-1, 4)
        at = np.searchsorted(starts, table[:, C_START], side="right") - 1
        inside = (at >= 0) & (table[:, C_START] < ends[np.maximum(at, 0)])
        np.add.at(forward, at[inside], table[inside, C_END] - table[inside, C_START])
        np.add.at(rows, at[inside], table[inside, C_ROWS])
    return forward, rows


def _per_step_component(
    starts: np.ndarray, ends: np.ndarray, found: dict[int, dict[str, Any]], components: list[str], name: str
) -> np.ndarray:
    """A probe component's exclusive ns within each step, over every process."""
    total = np.zeros(len(starts))
    wanted = [i for i, component in enumerate(components) if component == name]
    for entry in found.values():
        records = np.asarray(entry["records"], dtype=np.int64).reshape(-1, 5)
        if not len(records):
            continue
        own = exclusive_ns(records)
        mine = np.isin(records[:, INDEX], wanted)
        at = np.searchsorted(starts, records[:, START], side="right") - 1
        inside = mine & (at >= 0) & (records[:, START] < ends[np.maximum(at, 0)])
        np.add.at(total, at[inside], own[inside])
    return total


def _neighbours(
    on: np.ndarray, sizes: np.ndarray | None
) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """(with, without) step indices of neighbours in different turns, and (first, second) of like ones: each step
    in one pair at most; with sizes, only neighbours within SIZE_TOLERANCE of each other."""

    def alike(a: int, b: int) -> bool:
        if sizes is None:
            return True
        x, y = int(sizes[a]), int(sizes[b])
        return x >= 0 and y >= 0 and abs(x - y) <= SIZE_TOLERANCE * max(x, y)

    found: tuple[list[tuple[int, int]], list[tuple[int, int]]] = ([], [])
    for differ, pairs in zip((True, False), found, strict=True):
        index = 0
        while index + 1 < len(on):
            if (bool(on[index]) != bool(on[index + 1])) != differ or not alike(index, index + 1):
                index += 1
                continue
            first, second = index, index + 1
            pairs.append((first, second) if not differ or on[first] else (second, first))
            index += 2
    return found


def _block(index: int, starts: np.ndarray, ends: np.ndarray, tokens: float, on: bool) -> Block:
    return Block(int(starts[index]), int(ends[index]), on, tokens)


def _arms(
    pairs: list[tuple[int, int]],
    values_ns: np.ndarray,
    units: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
) -> Arms:
    """Mean ms per step in each arm, and with / without as a ratio of totals over the pairs (inrun.estimate on
    blocks of one unit each over [starts, ends): the inverse of its throughput ratio)."""
    first = np.array([values_ns[a] for a, _ in pairs]) / 1e6
    second = np.array([values_ns[b] for _, b in pairs]) / 1e6
    blocks = [
        (_block(a, starts, ends, units[a], True), _block(b, starts, ends, units[b], False)) for a, b in pairs
    ]
    arms = [bootstrap([sample], mean_statistic, block=None, resamples=1000) for sample in (first, second)]
    if float(second.sum()) <= 0 or float(first.sum()) <= 0:
        return Arms(_interval(arms[0]), _interval(arms[1]), Figure(None))
    through = estimate(blocks)
    return Arms(
        _interval(arms[0]), _interval(arms[1]), _figure(1 / through.ratio, 1 / through.high, 1 / through.low)
    )


def _throughput(pairs: list[tuple[int, int]], rows: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> Arms:
    """Rows sampled per second of step in each arm, and with / without over the pairs."""
    per_arm = []
    for side in (0, 1):
        chosen = [pair[side] for pair in pairs]
        table = np.column_stack([rows[chosen], (ends[chosen] - starts[chosen]) / 1e9])
        per_arm.append(bootstrap([table], rate_statistic, block=None, resamples=1000))
    blocks = [
        (_block(a, starts, ends, rows[a], True), _block(b, starts, ends, rows[b], False)) for a, b in pairs
    ]
    through = estimate(blocks)
    return Arms(
        _interval(per_arm[0]), _interval(per_arm[1]), _figure(through.ratio, through.low, through.high)
    )


def _interval(found: Any) -> Figure:
    return _figure(found.point, found.low, found.high)


def _figure(point: float | None, low: float | None, high: float | None) -> Figure:
    def clean(value: float | None) -> float | None:
        return None if value is None or not math.isfinite(value) else float(value)

    return Figure(clean(point), clean(low), clean(high))


def _with_lines(result: SwapResult) -> SwapResult:
    result.lines = swap_sentences(result)
    return result


def swap_sentences(result: SwapResult) -> list[str]:
    """What the terminal says of a swap run."""
    taken = ", ".join(f"{name} {count:,}" for name, count in result.rows.items() if count)
    lines = [
        f"sampler swap: in {len(result.swapped_in)} process(es); rows by path: {taken or 'none'}"
        + "".join(f"; pid {pid} kept vLLM's: {why}" for pid, why in result.refused.items())
    ]
    if result.note:
        return [*lines, f"sampler swap: {result.note}"]
    lines.append(
        f"sampler swap A/B: {result.pairs} pairs of neighbouring steps of about equal size, A/A {result.aa_pairs}"
    )
    for label, arms, unit in (
        ("forward_cpu", result.forward_ms, "ms/step"),
        ("sampler", result.sampler_ms, "ms/step"),
        ("step", result.step_ms, "ms"),
        ("TPOT (decode steps)", result.tpot_ms, "ms"),
        ("tokens/s", result.tokens_per_s, ""),
    ):
        if arms is not None:
            lines.append(
                f"  {label}: with {_fig(arms.with_swap)} {unit}, without {_fig(arms.without)} {unit}; "
                f"with / without {_fig(arms.ratio, 3)}"
            )
    if result.aa_step_ratio is not None:
        lines.append(f"  A/A step ratio (noise): {_fig(result.aa_step_ratio, 3)}")
    if (
        result.forward_speedup is not None
        and result.predicted_step_ratio is not None
        and result.step_ms is not None
    ):
        lines.append(
            f"  forward_cpu {_fig(result.forward_speedup, 1)}x faster, {result.forward_share or 0:.1%} of a step without "
            f"the swap: Amdahl predicts step ratio {result.predicted_step_ratio:.3f}, measured {_fig(result.step_ms.ratio, 3)}"
        )
    return lines


def _fig(figure: Figure, digits: int = 2) -> str:
    if figure.point is None:
        return "n/a"
    interval = (
        f" [{figure.low:.{digits}f}, {figure.high:.{digits}f}]"
        if figure.low is not None and figure.high is not None
        else ""
    )
    return f"{figure.point:.{digits}f}{interval}"
