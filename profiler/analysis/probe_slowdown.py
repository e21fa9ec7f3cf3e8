"""What a slowdown run's probe records say: each delayed component's sensitivity, the gain a faster one would bring, and the headroom of one beside the engine loop.

A `--what-if` run (profiler/inject/sitecustomize.py) delays every call of a named component by a busy
loop of a fraction (the level) of the call's own duration, in turns the engine's steps take: no delay,
delay, delay, no delay (ABBA), one (component, level) experiment after another. Here each turn becomes a
block (profiler.analysis.sensitivity.DelayBlock):

    on the step's path   a component the engine's steps run (on the thread that steps), or one in a model
                         worker the loop waits on (its process's role, or its calls inside the loop's waits
                         on the worker): the response is the steps' own time, per step
    beside the loop      any other (vLLM's API server, its output processor): the response is the turn's wall time from its first step to the next
                         turn's, per token generated (per step without sizes), i.e. 1 / throughput

A block's added time is the delay the component's calls actually added in it. The sensitivity (added
response per added ms) then gives the predicted gain of a k-times faster component, sensitivity x its
share x (1 - 1/k), and for a component beside the loop its headroom, how much slower it can get before it
limits throughput, two ways: measured, 1 + the largest level whose response stayed within noise (at least
that; its interval holds 0), and extrapolated from the busy share u of the thread it runs on, where its own
share is c: (1 - u + c) / c times its time fills the thread.

A component's levels are those probes.json asked for times the scale its process set from the run's first
steps (its share of the step there; sitecustomize's _Scale, probe-PID.json's what_if.scales): the blocks carry
the scaled levels, so each level's figure is read at the delay that ran, and the sensitivity stays added
response per added ms of the component's own time whatever the scale, since both are measured.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..rundir.schema import (
    DelayAccuracy,
    Headroom,
    ProbeLevelScale,
    ProbeSlowdown,
    ProbeWhatIf,
    SlowdownGain,
    SlowdownLevel,
    SlowdownSensitivity,
)
from .probe_spans import END, INDEX, START, STEP, TID, exclusive_ns
from .sensitivity import (
    DelayBlock,
    NotEnoughBlocks,
    Sensitivity,
    estimate_sensitivity,
    predicted_gain,
    unresolved,
)

NO_DELAY = ord("1")  # the switch byte of a turn without a delay
FIRST_CODE = ord("a")  # experiment i's switch byte
# Columns of a delays-PID.tsv row (sitecustomize's _DELAY_LINE).
D_TID, D_INDEX, D_START, D_END, D_BEGAN, D_DONE, D_REQUESTED, D_STATE = range(8)
ON_PATH = 0.9  # a component with this share of its calls in the loop's steps (or waits on the worker) is on the path
WORKER = "worker"  # the loop's wait on its model worker (vLLM's executor calls)
UNNAMED = {"None", ""}  # a process's role when the run could not tell it (roles' values are strings)
SPEEDUP = 10.0  # the speedup the verdict's predictions are shown at
SIZE_TOLERANCE = 0.10  # one-step turns pair only with neighbours of about equal size (probe_spans' rule)
ACCURATE = 0.05  # a delayed call's added time within this fraction of the requested counts as accurate
# A level whose interval reaches down to this sensitivity did not measurably slow the response: under 5% of the added
# time reached it. Not 0: a delay cannot speed the loop up, so an interval wholly below 0 (-0.03 to -0.01 over 72
# tightly paired turns) is the steps' drift, and a level read so must not hide the headroom it shows.
NEGLIGIBLE = 0.05


@dataclass(frozen=True, slots=True)
class Turn:
    """One turn of the switch: its steps (rows of the step table), the byte it set, and its time slice."""

    number: int
    state: int
    first: int  # index of its first step in the step table
    last: int  # index of its last step
    start_ns: int
    end_ns: int  # the next turn's first step's start (its own last step's end for the final turn)


def outermost_steps(records: np.ndarray, step_indices: Sequence[int]) -> np.ndarray:
    """The step records of one process that no other step record holds, in time order (rows of records)."""
    rows = records[np.isin(records[:, INDEX], list(step_indices))]
    rows = rows[np.lexsort((-rows[:, END], rows[:, START]))]
    kept, reach = [], -1
    for row in rows:
        if row[END] <= reach:
            continue  # nested: a step probe called inside another keeps its caller's turn
        kept.append(row)
        reach = int(row[END])
    return np.asarray(kept, dtype=np.int64).reshape(-1, records.shape[1])


def group_turns(steps: np.ndarray, turns: np.ndarray, turn_steps: int) -> list[Turn]:
    """The steps grouped by the turn they took: the k-th logged turn belongs to block k // turn_steps."""
    turns = np.asarray(turns, dtype=np.int64).reshape(-1, 2)
    turns = turns[np.argsort(turns[:, 0], kind="stable")]
    if not len(steps) or not len(turns):
        return []
    at = np.searchsorted(turns[:, 0], steps[:, START], side="right") - 1
    blocks: dict[int, list[int]] = {}
    for row, logged in enumerate(at):
        if logged >= 0:
            blocks.setdefault(int(logged) // turn_steps, []).append(row)
    numbers = sorted(blocks)
    found = []
    for position, number in enumerate(numbers):
        rows = blocks[number]
        following = numbers[position + 1] if position + 1 < len(numbers) else None
        end_ns = (
            int(steps[blocks[following][0], START]) if following is not None else int(steps[rows[-1], END])
        )
        found.append(
            Turn(
                number=number,
                state=int(turns[int(at[rows[0]]), 1]),
                first=rows[0],
                last=rows[-1],
                start_ns=int(steps[rows[0], START]),
                end_ns=end_ns,
            )
        )
    return found


def analyse_slowdowns(
    probes: list[dict[str, str]],
    processes: dict[int, dict[str, Any]],
    window_ns: tuple[int, int],
    *,
    roles: dict[int, str] | None = None,
    resamples: int = 2000,
) -> ProbeWhatIf | None:
    """The what_if section of a slowdown run's probe, or None when no process ran the experiments."""
    components = [str(probe.get("component")) for probe in probes]
    step_indices = [i for i, name in enumerate(components) if name == STEP]
    start_ns, end_ns = window_ns
    inside: dict[int, np.ndarray] = {}
    for pid, entry in processes.items():
        records = np.asarray(entry.get("records"), dtype=np.int64).reshape(-1, 5)
        records = records[(records[:, START] >= start_ns) & (records[:, START] < end_ns)]
        inside[pid] = np.column_stack([records, exclusive_ns(records)])
    loop = max(inside, key=lambda pid: int(np.isin(inside[pid][:, INDEX], step_indices).sum()), default=None)
    if loop is None:
        return None
    config = (processes[loop].get("status") or {}).get("what_if")
    turns = processes[loop].get("turns")
    if not config or turns is None:
        return None
    experiments = [(str(name), float(level)) for name, level in config.get("experiments") or []]
    turn_steps = int(config.get("turn_steps") or 1)
    steps = outermost_steps(inside[loop], step_indices)
    blocks = [turn for turn in group_turns(steps, turns, turn_steps) if turn.start_ns >= start_ns]
    sizes = _step_sizes(steps, processes)
    delays = _delays(processes, components, window_ns)
    section: ProbeWhatIf = {
        "levels": sorted({level for _name, level in experiments}),
        "turn_steps": turn_steps,
        "turns": len(blocks),
        "components": {},
    }
    if config.get("measure_steps"):
        section["measure_steps"] = int(config["measure_steps"])
        section["scales"] = {}
    for name in dict.fromkeys(name for name, _level in experiments):
        scale = level_scale_of(name, processes)
        factor = scale["scale"] if scale is not None else 1.0
        levels = {
            FIRST_CODE + number: level * factor
            for number, (other, level) in enumerate(experiments)
            if other == name
        }
        calls = _calls(inside, components, name)
        on_path = _on_path(calls, steps, inside[loop], components, loop, roles or {})
        slowdown = _component(
            name, levels, steps, blocks, sizes, delays.get(name), calls, on_path, inside, resamples
        )
        slowdown["scale"] = scale
        section["components"][name] = slowdown
        if "scales" in section and scale is not None:
            section["scales"][name] = factor
    section["lines"] = slowdown_sentences(section)
    return section


def level_scale_of(name: str, processes: dict[int, dict[str, Any]]) -> ProbeLevelScale | None:
    """The scale a process set for the component's levels (probe-PID.json's what_if.scales), None when no process
    set one (fixed levels, or no call of it reached a delayed turn). Where several processes run it (vLLM's
    workers, one per rank), the one that tallied the most calls speaks, and the others' range is kept."""
    found = []
    for pid, entry in sorted(processes.items()):
        scales = ((entry.get("status") or {}).get("what_if") or {}).get("scales") or {}
        mine = scales.get(name)
        if isinstance(mine, dict) and isinstance(mine.get("scale"), (int, float)):
            found.append((int(mine.get("calls") or 0), pid, mine))
    if not found:
        return None
    _calls_tallied, pid, chosen = max(found, key=lambda item: item[0])
    share = chosen.get("share")
    scale: ProbeLevelScale = {
        "scale": float(chosen["scale"]),
        "share": float(share) if isinstance(share, (int, float)) else None,
        "capped": bool(chosen.get("capped")),
        "steps": int(chosen["steps"]) if isinstance(chosen.get("steps"), int) else None,
        "skipped": int(chosen["skipped"]) if isinstance(chosen.get("skipped"), int) else None,
        "pid": pid,
        "why": chosen.get("why"),
    }
    if len(found) > 1:
        values = [float(mine["scale"]) for _calls, _pid, mine in found]
        scale["range"] = [min(values), max(values)]
    return scale


def _step_sizes(steps: np.ndarray, processes: dict[int, dict[str, Any]]) -> np.ndarray | None:
    """Each step's size (the sizes recorded while it ran), or None without sizes; -1 where none was recorded."""
    found = [
        np.asarray(entry["sizes"], dtype=np.int64).reshape(-1, 2)
        for entry in processes.values()
        if "sizes" in entry
    ]
    rows = np.concatenate(found) if found else np.zeros((0, 2), dtype=np.int64)
    if not len(rows):
        return None
    rows = rows[np.argsort(rows[:, 0], kind="stable")]
    running = np.concatenate([[0], np.cumsum(rows[:, 1])])
    low = np.searchsorted(rows[:, 0], steps[:, START])
    high = np.searchsorted(rows[:, 0], steps[:, END])
    return np.where(high > low, running[high] - running[low], -1)


def _delays(
    processes: dict[int, dict[str, Any]], components: list[str], window_ns: tuple[int, int]
) -> dict[str, np.ndarray]:
    """Every delayed call inside the window, by component (delays-PID.tsv rows)."""
    by_name: dict[str, list[np.ndarray]] = {}
    for entry in processes.values():
        rows = np.asarray(entry.get("delays", np.zeros((0, 8))), dtype=np.int64).reshape(-1, 8)
        rows = rows[(rows[:, D_BEGAN] >= window_ns[0]) & (rows[:, D_BEGAN] < window_ns[1])]
        for index in np.unique(rows[:, D_INDEX]):
            name = components[int(index)] if 0 <= index < len(components) else "unknown"
            by_name.setdefault(name, []).append(rows[rows[:, D_INDEX] == index])
    return {name: np.concatenate(parts) for name, parts in by_name.items()}


def _calls(inside: dict[int, np.ndarray], components: list[str], name: str) -> np.ndarray:
    """The component's spans from every process: rows of (tid, index, start, end, on, own), plus its pid."""
    parts = []
    for pid, rows in inside.items():
        mine = rows[np.array([components[int(i)] == name for i in rows[:, INDEX]], dtype=bool)]
        if len(mine):
            parts.append(np.column_stack([mine, np.full(len(mine), pid)]))
    return np.concatenate(parts) if parts else np.zeros((0, 7), dtype=np.int64)


def _on_path(
    calls: np.ndarray,
    steps: np.ndarray,
    loop_rows: np.ndarray,
    components: list[str],
    loop: int,
    roles: dict[int, str],
) -> bool:
    """Whether the component's calls are part of the steps: run by the thread that steps, inside its steps; or in
    a model worker's process (by its role, or, in a process whose role is unknown, its calls inside the loop's
    waits on the worker). A process known as anything else (vLLM's API server) is beside the loop."""
    if not len(calls):
        return False
    stepping = set(steps[:, TID].tolist())
    ours = (calls[:, 6] == loop) & np.isin(calls[:, TID], list(stepping))
    in_steps = _within(calls[:, START], steps[:, START], steps[:, END]) >= 0
    if float((ours & in_steps).mean()) >= ON_PATH:
        return True
    others = {int(pid) for pid in calls[calls[:, 6] != loop, 6]}
    if others and all(roles.get(pid) == "model worker" for pid in others):
        return True
    # By time, only the calls of a process the run could not name: the loop of vLLM's CPU build waits on its
    # worker nearly all the time, so the API server's calls fall inside those waits too, yet run beside them.
    unnamed = np.array([str(roles.get(int(pid))) in UNNAMED for pid in calls[:, 6]], dtype=bool)
    unnamed &= calls[:, 6] != loop
    waits = loop_rows[np.array([components[int(i)] == WORKER for i in loop_rows[:, INDEX]], dtype=bool)]
    if not len(waits) or float(unnamed.mean()) < ON_PATH:
        return False
    waits = outermost_steps(waits, sorted({int(i) for i in waits[:, INDEX]}))
    inside = _within(calls[unnamed, START], waits[:, START], waits[:, END]) >= 0
    return float(inside.mean()) >= ON_PATH


def _within(times: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Index of the interval (sorted, disjoint) each time falls in, -1 outside every one."""
    at = np.searchsorted(starts, times, side="right") - 1
    ok = (at >= 0) & (times < ends[np.maximum(at, 0)])
    return np.where(ok, at, -1)


def _component(
    name: str,
    levels: dict[int, float],
    steps: np.ndarray,
    turns: list[Turn],
    sizes: np.ndarray | None,
    delays: np.ndarray | None,
    calls: np.ndarray,
    on_path: bool,
    inside: dict[int, np.ndarray],
    resamples: int,
) -> ProbeSlowdown:
    """One component's what_if entry: its share and cost per unit from the undelayed turns, then its sensitivity,
    predicted gain and (beside the loop) headroom from the delayed ones; a note says why a figure is missing."""
    delays = delays if delays is not None else np.zeros((0, 8), dtype=np.int64)
    by_tokens = not on_path and sizes is not None and bool((sizes >= 0).all())
    out = _unmeasured(name, on_path, by_tokens, delays)
    if not len(calls):
        out["note"] = f"no call of {name} was timed in the run: nothing was delayed"
        return out
    kept = [turn for turn in turns if turn.state == NO_DELAY or turn.state in levels]
    found = _turn_blocks(kept, levels, steps, sizes, delays, calls, on_path=on_path, by_tokens=by_tokens)
    out["share"] = found.share
    out["ms_per_unit"] = found.ms_per_unit
    if not len(delays):
        out["note"] = (
            f"{name}'s calls were timed but none was delayed: the probe delays sync functions only (a coroutine's "
            "are listed under what_if.not_delayed in its probe-PID.json)"
        )
        return out
    try:
        sensitivity = estimate_sensitivity(name, found.blocks, resamples=resamples)
    except NotEnoughBlocks as exc:
        out["note"] = str(exc)
        return out
    out.update(sensitivity_figures(sensitivity))
    if found.share is not None:
        out["gain"] = _gain(sensitivity, found.share)
    if not on_path:
        out["headroom"] = _headroom(name, calls, inside, kept, levels, out["levels"])
    return out


def _unmeasured(name: str, on_path: bool, by_tokens: bool, delays: np.ndarray) -> ProbeSlowdown:
    """A component's entry before its figures: where it runs, what its response is counted per, and how
    accurately its calls were delayed."""
    return {
        "component": name,
        "path": "step" if on_path else "beside",
        "units": "tokens" if by_tokens else "steps",
        **sensitivity_figures(None),
        "share": None,
        "ms_per_unit": None,
        "gain": None,
        "headroom": None,
        "accuracy": _accuracy(delays),
        "scale": None,
    }


@dataclass(frozen=True, slots=True)
class _Blocks:
    """A component's turns as delay blocks, with its own time and the response summed over the undelayed turns."""

    blocks: list[DelayBlock]
    own_off_ms: float
    response_off_ms: float

    @property
    def share(self) -> float | None:
        """The component's share of the response when undelayed."""
        return self.own_off_ms / self.response_off_ms if self.response_off_ms > 0 else None

    @property
    def ms_per_unit(self) -> float | None:
        """The component's own time per step (per token beside the loop with sizes) when undelayed."""
        off_units = sum(block.units for block in self.blocks if block.level == 0.0)
        return self.own_off_ms / off_units if off_units else None


def _turn_blocks(
    kept: list[Turn],
    levels: dict[int, float],
    steps: np.ndarray,
    sizes: np.ndarray | None,
    delays: np.ndarray,
    calls: np.ndarray,
    *,
    on_path: bool,
    by_tokens: bool,
) -> _Blocks:
    """Each kept turn as a DelayBlock, the delay its calls added and the component's own time counted by the
    time slice they began in (each step on the path, each turn beside the loop); one-step turns with sizes keep
    a delayed turn only beside alike undelayed ones (_matched)."""
    if on_path:
        starts, ends = steps[:, START], steps[:, END]
    else:
        starts = np.array([turn.start_ns for turn in kept], dtype=np.int64)
        ends = np.array([turn.end_ns for turn in kept], dtype=np.int64)
    added = _summed_ms(
        _within(delays[:, D_BEGAN], starts, ends), delays[:, D_DONE] - delays[:, D_BEGAN], len(starts)
    )
    own = _summed_ms(_within(calls[:, START], starts, ends), calls[:, 5], len(starts))
    turned = [
        _turn_block(turn, position, levels.get(turn.state, 0.0), steps, sizes, added, own, on_path, by_tokens)
        for position, turn in enumerate(kept)
    ]
    blocks = [block for block, _own in turned]
    own_off = sum((block_own for block, block_own in turned if block.level == 0.0), 0.0)
    response_off = sum((block.response_ms for block in blocks if block.level == 0.0), 0.0)
    if sizes is not None and on_path and all(turn.last == turn.first for turn in kept):
        blocks = _matched(blocks, [int(sizes[turn.first]) for turn in kept])
    return _Blocks(blocks, own_off, response_off)


def _summed_ms(at: np.ndarray, durations_ns: np.ndarray, slices: int) -> np.ndarray:
    """Durations summed per time slice, in ms (`at`: the slice each one began in, -1 outside every one)."""
    counted = at >= 0
    return np.bincount(at[counted], durations_ns[counted] / 1e6, minlength=slices)


def _turn_block(
    turn: Turn,
    position: int,
    level: float,
    steps: np.ndarray,
    sizes: np.ndarray | None,
    added: np.ndarray,
    own: np.ndarray,
    on_path: bool,
    by_tokens: bool,
) -> tuple[DelayBlock, float]:
    """One turn as a DelayBlock, and the component's own time in it (ms): on the path, its steps' own time over
    its steps; beside the loop, its wall time over its tokens (over its steps without sizes)."""
    if on_path:
        span = slice(turn.first, turn.last + 1)
        response = float((steps[span, END] - steps[span, START]).sum()) / 1e6
        units = float(turn.last - turn.first + 1)
        block = DelayBlock(turn.number, level, float(added[span].sum()), response, units)
        return block, float(own[span].sum())
    response = (turn.end_ns - turn.start_ns) / 1e6
    units = (
        float(sizes[turn.first : turn.last + 1].sum())
        if by_tokens and sizes is not None
        else float(turn.last - turn.first + 1)
    )
    return DelayBlock(turn.number, level, float(added[position]), response, units), float(own[position])


def _gain(sensitivity: Sensitivity, share: float) -> SlowdownGain:
    """The gain a SPEEDUP-times faster component would bring, from its sensitivity and share."""
    gain = predicted_gain(sensitivity, min(1.0, share), SPEEDUP)
    return {"speedup": SPEEDUP, "gain": gain.gain, "low": gain.low, "high": gain.high}


def _matched(blocks: list[DelayBlock], sizes: list[int]) -> list[DelayBlock]:
    """One-step turns with sizes: a delayed step whose nearest undelayed neighbours differ in size (by more than
    SIZE_TOLERANCE) is left out, since a step's time follows its batch far more than its delay."""
    kept = []
    for position, block in enumerate(blocks):
        if block.level > 0:
            neighbours = [_nearest_off(blocks, position, step) for step in (-1, 1)]
            if any(other is not None and not _alike(sizes[position], sizes[other]) for other in neighbours):
                continue
        kept.append(block)
    return kept


def _nearest_off(blocks: list[DelayBlock], position: int, step: int) -> int | None:
    other = position + step
    while 0 <= other < len(blocks) and blocks[other].level > 0:
        other += step
    return other if 0 <= other < len(blocks) else None


def _alike(size: int, other: int) -> bool:
    return size >= 0 and other >= 0 and abs(size - other) <= SIZE_TOLERANCE * max(size, other)


def sensitivity_figures(sensitivity: Sensitivity | None) -> SlowdownSensitivity:
    """A sensitivity as result.json holds it, per level and pooled (None: none measured): the probe's section and
    the built-in engine's what_if section alike."""
    if sensitivity is None:
        return {
            "sensitivity": None,
            "low": None,
            "high": None,
            "pairs": 0,
            "linear": None,
            "levels": [],
            "null": None,
        }
    levels: list[SlowdownLevel] = [
        {
            "level": entry.level,
            "sensitivity": entry.value if math.isfinite(entry.value) else None,
            "low": entry.low,
            "high": entry.high,
            "pairs": entry.pairs,
            "added_ms_per_unit": entry.added_ms_per_unit,
            "response_ms_per_unit": entry.response_ms_per_unit,
            "within_noise": entry.low is not None and entry.low <= NEGLIGIBLE,
        }
        for entry in sensitivity.per_level
    ]
    null = sensitivity.null
    return {
        "sensitivity": sensitivity.value,
        "low": sensitivity.low,
        "high": sensitivity.high,
        "pairs": sensitivity.pairs,
        "linear": sensitivity.linear,
        "levels": levels,
        "null": None
        if null is None
        else {"difference_ms": null.difference_ms, "low": null.low, "high": null.high, "pairs": null.pairs},
    }


def _headroom(
    name: str,
    calls: np.ndarray,
    inside: dict[int, np.ndarray],
    turns: list[Turn],
    levels: dict[int, float],
    measured: list[SlowdownLevel],
) -> Headroom:
    """Utilisation of the component's busiest thread in undelayed turns, and the two headroom figures."""
    off = [turn for turn in turns if turn.state == NO_DELAY]
    starts = np.array([turn.start_ns for turn in off], dtype=np.int64)
    ends = np.array([turn.end_ns for turn in off], dtype=np.int64)
    wall = float((ends - starts).sum())
    pid_col, tid_col = 6, TID
    threads, weights = np.unique(calls[:, [pid_col, tid_col]], axis=0, return_counts=True)
    pid, tid = (int(value) for value in threads[int(np.argmax(weights))])
    rows = inside[pid][inside[pid][:, TID] == tid]
    at = _within(rows[:, START], starts, ends)
    busy = float(rows[at >= 0, 5].sum())
    mine = calls[(calls[:, pid_col] == pid) & (calls[:, TID] == tid)]
    own = float(mine[_within(mine[:, START], starts, ends) >= 0, 5].sum())
    utilisation = busy / wall if wall > 0 else math.nan
    share = own / wall if wall > 0 else math.nan
    extrapolated = (1.0 - utilisation + share) / share if share > 0 and utilisation <= 1.0 else None
    quiet = [entry["level"] for entry in measured if entry.get("within_noise")]
    return {
        "utilisation": utilisation,
        "extrapolated_x": extrapolated,
        "measured_x": 1.0 + max(quiet) if quiet else None,
        "method": (
            f"measured: 1 + the largest level whose response could not be told from none (at least that); "
            f"extrapolated: the factor at which {name}'s thread (pid {pid}, thread {tid}), busy "
            f"{utilisation:.0%} of the time with {name} {share:.0%}, would be busy all the time"
        ),
    }


def _accuracy(delays: np.ndarray) -> DelayAccuracy | None:
    requested = delays[:, D_REQUESTED].astype(float)
    added = (delays[:, D_DONE] - delays[:, D_BEGAN]).astype(float)
    useful = requested > 0
    if not useful.any():
        return None
    errors = np.abs(added[useful] / requested[useful] - 1.0)
    return {
        "calls": int(useful.sum()),
        "requested_ms": float(requested[useful].sum() / 1e6),
        "added_ms": float(added[useful].sum() / 1e6),
        "ratio": float(added[useful].sum() / requested[useful].sum()),
        "median_error": float(np.median(errors)),
        "within_5pct": float((errors <= ACCURATE).mean()),
    }


def slowdown_sentences(section: ProbeWhatIf) -> list[str]:
    """The summary's lines: per component, its sensitivity, levels, predicted gain and headroom."""
    lines = []
    for name, entry in section.get("components", {}).items():
        scaled = scale_words(entry.get("scale"), section.get("levels", []))
        if entry.get("sensitivity") is None:
            lines.append(
                f"Slowdown of {name}: no sensitivity ({entry.get('note', 'no result')})"
                + (f"; {scaled}" if scaled else "")
                + "."
            )
            continue
        parts = [
            _sensitivity_words(name, entry, scaled),
            unresolved(entry.get("low"), entry.get("high"), entry.get("pairs", 0)),
            _gain_words(name, entry),
            _headroom_words(entry),
            _accuracy_words(entry),
        ]
        lines.append("; ".join(part for part in parts if part is not None) + ".")
    return lines


def _sensitivity_words(name: str, entry: ProbeSlowdown, scaled: str) -> str:
    """Where the component runs, its sensitivity with its interval over how many pairs, and per level."""
    where = (
        "on the step's path, response: step time"
        if entry["path"] == "step"
        else f"beside the loop, response: wall time per {entry['units'][:-1]}"
    )
    levels = ", ".join(
        f"{level['level']:.3g}x its time: {_num(level['sensitivity'])}{_iv(level['low'], level['high'])}"
        for level in entry.get("levels", [])
    )
    curve = (
        "; the levels disagree: a curve, not a line, so the prediction holds near the levels tried"
        if entry.get("linear") is False
        else ""
    )
    return (
        f"Slowdown of {name} ({where}): sensitivity {_num(entry['sensitivity'])}{_iv(entry['low'], entry['high'])} "
        f"over {entry['pairs']} pairs of turns (by level: {levels}{curve})"
        + (f"; {scaled}" if scaled else "")
    )


def _gain_words(name: str, entry: ProbeSlowdown) -> str | None:
    """What a faster component would save, and how that was worked out; None without a gain."""
    gain = entry.get("gain")
    if gain is None:
        return None
    per = "step" if entry["path"] == "step" else f"time per {entry['units'][:-1]}"
    return (
        f"a {gain['speedup']:g}x faster {name} would save {gain['gain']:.1%}"
        f"{_iv(gain['low'], gain['high'], pct=True)} of the {per}"
        f" (slowdown-measured: sensitivity x its share {entry['share']:.1%} x (1 - 1/{gain['speedup']:g}))"
    )


def _headroom_words(entry: ProbeSlowdown) -> str | None:
    """How much slower the component can get, measured and extrapolated; None without a headroom."""
    headroom = entry.get("headroom")
    if headroom is None:
        return None
    measured, extrapolated = headroom.get("measured_x"), headroom.get("extrapolated_x")
    text = "headroom: " + (
        f"at least {measured:.3g}x its time measured"
        if measured
        else "none measured (the lowest level already moved the response)"
    )
    if extrapolated:
        text += (
            f", {extrapolated:.1f}x extrapolated from its thread's {headroom['utilisation']:.0%} utilisation"
        )
    return text


def _accuracy_words(entry: ProbeSlowdown) -> str | None:
    """How close the delays came to the requested; None when no call had a delay requested."""
    accuracy = entry.get("accuracy")
    if not accuracy:
        return None
    return (
        f"the delay per call: median {accuracy['median_error']:.1%} off the requested, "
        f"{accuracy['within_5pct']:.0%} of {accuracy['calls']:,} calls within 5%"
    )


def scale_words(scale: ProbeLevelScale | None, levels: Sequence[float]) -> str:
    """How a component's levels were scaled, in words; empty for fixed levels."""
    if not scale:
        return ""
    factor = scale.get("scale", 1.0)
    asked = "/".join(f"{level:g}x" for level in levels)
    share, steps, skipped = scale.get("share"), scale.get("steps"), scale.get("skipped")
    if share is None:
        return f"levels {asked} its time, unscaled: {scale.get('why') or 'no share measured'}"
    ran = "/".join(f"{level * factor:.3g}x" for level in levels)
    why = f"its share of the step {share:.1%} over {steps} steps" + (
        f" after the first {skipped}" if skipped else ""
    )
    if factor <= 1.0:
        return f"levels {asked} its time, unscaled ({why} is large enough)"
    return (
        f"levels scaled {factor:.3g}x to {ran} its time ({why}"
        + (f"; capped, so that no level passes {max(levels) * factor:g}x" if scale.get("capped") else "")
        + ")"
    )


def _num(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def _iv(low: float | None, high: float | None, *, pct: bool = False) -> str:
    if low is None or high is None:
        return ""
    return f" [{low:.1%}, {high:.1%}]" if pct else f" [{low:.2f}, {high:.2f}]"
