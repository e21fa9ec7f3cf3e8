"""What the in-process probe timed inside another engine: time per component and per step, Amdahl bounds with intervals, the probe's own cost, and whether the samples agree.

The probe (profiler/inject/sitecustomize.py) records one span per call of each named function (one per
resumption of a coroutine) on every thread of every Python process of a launched server. Here:

    exclusive time   a span's own time: its duration less the spans nested inside it on the same thread
    steps            spans of the engine's "step" probe (vLLM's EngineCore.step): the yardstick; each
                     component's time falls into the step whose interval holds its start (any process)
    shares           component time / step time over the steps, with a moving-block bootstrap interval;
                     if a component on the step's path cost nothing the step would be that much shorter
                     (Amdahl at an infinite speedup; nothing verifies it: no C twin exists there)
    cost             in-run A/B: the step probe always records, and before each step it switches the
                     others on or off in ABBA turns, so step time with and without them, over neighbouring
                     pairs of steps (the median pair), prices the probe; an A/A over neighbouring like pairs
                     beside it shows the noise; and priced = calls made while on x measured cost / time on.
                     Where the engine's table counts each step's work (step_size: vLLM's tokens scheduled),
                     only neighbours of about equal size (SIZE_TOLERANCE) are paired: a step's time follows
                     its batch, and two steps of different batches differ by far more than the probe costs
    agreement        each component's share of its thread's wall time against the samples' share of
                     that thread (a Wilson interval): the two methods agree when the probe's figure falls
                     inside the samples' interval
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..rundir.schema import (
    PairedDifference,
    Probe,
    ProbeAgreement,
    ProbeCost,
    ProbeProcess,
    ProbeShare,
    ProbeSteps,
    TargetProcess,
)
from ..stats import bootstrap, quantile_statistic, rate_statistic, wilson_interval
from .foreign_words import slowdown_measured

# Columns of a probe record: native thread id, probe index, start and end (perf_counter_ns), component probes on.
TID, INDEX, START, END, ON = range(5)
STEP = "step"
MIN_STEPS = 8  # fewer steps than this give no shares: one batch's noise would read as a result
# Neighbours pair when their sizes differ by at most this fraction of the larger (equal below ten tokens). Chosen
# by the A/A's width on the first vLLM run that recorded sizes (docs/measurements.md): equal sizes only kept too
# few pairs, and wider tolerances let the batch's own swings back in.
SIZE_TOLERANCE = 0.10
AA_RESOLVES = 0.02  # an A/A interval wider than this cannot resolve the probe's 1% allowance
NAMES = {"worker": "waiting on the model worker"}  # the engine loop's wait, named in sentences
# Sample components each probe component is compared with (the samples name Python by file, the probe by call).
SAMPLE_NAMES = {
    "model": ("model", "model_kernels", "model_glue"),
    "scheduler": ("scheduler",),
    "sampler": ("sampler",),
    "prepare": ("prepare",),
    "detokenizer": ("detokenizer",),
    "tokenizer": ("tokenizer",),
    "kv_alloc": ("kv_alloc",),
}


def exclusive_ns(records: np.ndarray) -> np.ndarray:
    """Each record's own time: its duration less the records nested inside it on the same thread."""
    own = (records[:, END] - records[:, START]).astype(np.int64)
    if len(records) == 0:
        return own
    order = np.lexsort((-records[:, END], records[:, START], records[:, TID]))
    stack: list[int] = []
    thread = None
    for i in order:
        tid, start, end = records[i, TID], records[i, START], records[i, END]
        if tid != thread:
            stack, thread = [], tid
        while stack and records[stack[-1], END] <= start:
            stack.pop()
        if stack and end <= records[stack[-1], END]:
            own[stack[-1]] -= end - start
        stack.append(int(i))
    return np.maximum(own, 0)


def on_time_ns(switches: list[tuple[int, int]], window_ns: tuple[int, int]) -> int:
    """How long the component probes were on inside the window: they start on, then follow the steps'
    (perf_counter_ns, state) turns. Only then do they record, so a share of wall time is a share of this."""
    start_ns, end_ns = window_ns
    total, state, since = 0, 1, start_ns
    for at_ns, new_state in sorted(switches):
        at_ns = min(max(at_ns, start_ns), end_ns)
        total += (at_ns - since) if state else 0
        state, since = int(new_state), at_ns
    return total + ((end_ns - since) if state else 0)


def analyse_probe(
    probes: list[dict[str, str]],
    processes: dict[int, dict[str, Any]],
    window_ns: tuple[int, int],
    roles: dict[int, str] | None = None,
    sampled: Mapping[int, TargetProcess] | None = None,
    *,
    confidence: float = 0.95,
) -> Probe:
    """The probe section of a run: `processes` maps pid -> {"records": (N, 5) int64, "status": probe-PID.json,
    "sizes": (M, 2) int64 at_ns and size, where a probe counts the steps' work}; the loop's own work (the bound on
    its interpreter share) with its interval at `confidence`."""
    roles = roles or {}
    start_ns, end_ns = window_ns
    window = max(1, end_ns - start_ns)  # the step probe records throughout ...
    components = [str(probe.get("component")) for probe in probes]
    kept = {pid: _records_in_window(entry, window_ns) for pid, entry in processes.items()}
    step_pid, table = _step_table(kept, components)  # the yardstick, read once for shares, on-time and cost
    switches = [(int(start), int(on)) for start, _end, on in table]
    wall_ns = max(1, on_time_ns(switches, window_ns))  # ... the others only while the steps have them on
    per_process = {
        pid: _process_row(pid, entry, kept[pid], components, roles.get(pid), window, wall_ns)
        for pid, entry in processes.items()
    }
    section: Probe = {
        "window_s": window / 1e9,
        "probes_on_s": wall_ns / 1e9,
        "switches": sum(a[1] != b[1] for a, b in zip(switches, switches[1:])),
        "processes": [per_process[pid] for pid in sorted(per_process)],
        "loaded_in": sorted(pid for pid, entry in per_process.items() if entry["loaded"]),
    }
    turns = processes.get(step_pid, {}).get("turns") if step_pid is not None else None
    if turns is not None and len(turns):
        # A slowdown run (--what-if): the probes stay on, and a step under a delay measures no share; the A/B
        # of the probe's own cost needs turns with the probes off, which such a run has none of.
        undelayed = table.copy()
        undelayed[:, 2] = _turn_of(table[:, 0], turns) == ord("1")
        section["steps"] = _steps(kept, components, step_pid, undelayed, confidence)
        section["cost"] = _cost(kept, per_process, None, table, wall_ns)
        section["cost"]["note"] = (
            "a slowdown run keeps the probes on in every turn: their cost is priced from calls; a run without "
            "--what-if measures it by turns on and off"
        )
    else:
        section["steps"] = steps = _steps(kept, components, step_pid, table, confidence)
        sizes = step_sizes(table, [entry.get("sizes") for entry in processes.values()])
        section["cost"] = _cost(kept, per_process, steps, table, wall_ns, sizes)
    section["agreement"] = _agreement(kept, components, sampled or {}, wall_ns)
    return section


def _records_in_window(entry: dict[str, Any], window_ns: tuple[int, int]) -> np.ndarray:
    """One process's records that start inside the window, each with its own (exclusive) ns as a sixth column."""
    start_ns, end_ns = window_ns
    records = np.asarray(entry.get("records"), dtype=np.int64).reshape(-1, 5)
    inside = records[(records[:, START] >= start_ns) & (records[:, START] < end_ns)]
    own = exclusive_ns(inside)
    return np.column_stack([inside, own]) if len(inside) else np.zeros((0, 6), dtype=np.int64)


def _process_row(
    pid: int,
    entry: dict[str, Any],
    kept: np.ndarray,
    components: list[str],
    role: str | None,
    window: int,
    wall_ns: int,
) -> ProbeProcess:
    """One process's row: what its probe loaded, patched and missed, and each component's calls and own time,
    as a share of the window (the step) or of the time the probes were on (the others)."""
    inside, own = kept[:, :5], kept[:, 5]
    status = entry.get("status") or {}
    totals: dict[str, dict[str, float]] = defaultdict(lambda: {"calls": 0, "ms": 0.0})
    for index, own_ns in zip(inside[:, INDEX], own, strict=True):
        name = components[int(index)] if 0 <= index < len(components) else "unknown"
        totals[name]["calls"] += 1
        totals[name]["ms"] += own_ns / 1e6
    return {
        "pid": pid,
        "role": role,
        "loaded": bool(status),
        "records": int(len(inside)),
        "patched": [f"{item.get('module')}:{item.get('function')}" for item in status.get("patched", [])],
        "missing": [str(item) for item in status.get("missing", [])],
        "dropped": int(status.get("dropped") or 0),
        "cost_ns": status.get("cost_ns"),
        "components": {
            name: {
                "calls": int(v["calls"]),
                "ms": v["ms"],
                "share_of_wall": v["ms"] * 1e6 / (window if name == STEP else wall_ns),
            }
            for name, v in sorted(totals.items(), key=lambda item: -item[1]["ms"])
        },
    }


def _turn_of(step_starts: np.ndarray, turns: np.ndarray) -> np.ndarray:
    """Each step's switch byte in a slowdown run: the last turn logged at or before its start (-1 before any)."""
    turns = np.asarray(turns, dtype=np.int64).reshape(-1, 2)
    turns = turns[np.argsort(turns[:, 0], kind="stable")]
    at = np.searchsorted(turns[:, 0], step_starts, side="right") - 1
    return np.where(at >= 0, turns[np.maximum(at, 0), 1], -1)


def step_sizes(table: np.ndarray, found: list[Any]) -> np.ndarray | None:
    """Each step's size (the sizes recorded while it ran, summed; -1 where none was), or None when no process
    recorded a size: the engine's table names no step_size, or the run predates it."""
    recorded = [np.asarray(rows, dtype=np.int64).reshape(-1, 2) for rows in found if rows is not None]
    at_sizes = np.concatenate(recorded) if recorded else np.zeros((0, 2), dtype=np.int64)
    if not len(at_sizes):
        return None
    at_sizes = at_sizes[np.argsort(at_sizes[:, 0], kind="stable")]
    running = np.concatenate([[0], np.cumsum(at_sizes[:, 1])])
    low = np.searchsorted(at_sizes[:, 0], table[:, 0])
    high = np.searchsorted(at_sizes[:, 0], table[:, 1])
    return np.where(high > low, running[high] - running[low], -1).astype(np.int64)


def _step_pid(kept: dict[int, np.ndarray], components: list[str]) -> int | None:
    step_indices = [i for i, name in enumerate(components) if name == STEP]
    counts = {pid: int(np.isin(rows[:, INDEX], step_indices).sum()) for pid, rows in kept.items()}
    best = max(counts, key=lambda pid: counts[pid], default=None)
    return best if best is not None and counts[best] > 0 else None


def _step_table(kept: dict[int, np.ndarray], components: list[str]) -> tuple[int | None, np.ndarray]:
    """The engine loop's steps as rows (start, end, on), in time order."""
    pid = _step_pid(kept, components)
    if pid is None:
        return None, np.zeros((0, 3), dtype=np.int64)
    rows = kept[pid]
    steps = rows[np.array([components[int(i)] == STEP for i in rows[:, INDEX]], dtype=bool)]
    steps = steps[np.argsort(steps[:, START])]
    return pid, steps[:, [START, END, ON]]


def _steps(
    kept: dict[int, np.ndarray],
    components: list[str],
    pid: int | None,
    steps: np.ndarray,
    confidence: float = 0.95,
) -> ProbeSteps | None:
    if pid is None:
        return None
    on = steps[steps[:, 2] == 1]
    duration_ms = (on[:, 1] - on[:, 0]) / 1e6
    shares: dict[str, ProbeShare] = {}
    section: ProbeSteps = {
        "pid": pid,
        "count": int(len(steps)),
        "with_probes_on": int(len(on)),
        "mean_ms": float(duration_ms.mean()) if len(on) else None,
        "p50_ms": float(np.median(duration_ms)) if len(on) else None,
        "components": shares,
    }
    if len(on) < MIN_STEPS:
        section["note"] = f"{len(on)} steps with the probes on: too few for shares (at least {MIN_STEPS})"
        return section
    per_step = _per_step_ms(kept, components, on, pid)
    for name, values in sorted(per_step.items(), key=lambda item: -item[1].sum()):
        interval = bootstrap(
            [np.column_stack([values, duration_ms])], rate_statistic, block=None, resamples=1000
        )
        shares[name] = {
            "ms_per_step": float(values.mean()),
            "share": interval.point,
            "low": None if math.isnan(interval.low) else interval.low,
            "high": None if math.isnan(interval.high) else interval.high,
            "where": "engine loop" if _on_loop(kept, components, pid, name) else "other process",
        }
    own = loop_work_ms(kept, components, pid, on)
    if own is not None:
        interval = bootstrap(
            [np.column_stack([own, duration_ms])],
            rate_statistic,
            block=None,
            resamples=1000,
            confidence=confidence,
        )
        section["loop_work"] = {
            "ms_per_step": float(own.mean()),
            "share": interval.point,
            "low": None if math.isnan(interval.low) else interval.low,
            "high": None if math.isnan(interval.high) else interval.high,
            "where": "engine loop",
        }
    return section


# Probe components that are the loop waiting (on its model worker, for work), not working: engine_tables.WAIT_KINDS.
LOOP_WAITS = ("idle", "queueing", "worker", "client")


def loop_work_ms(
    kept: dict[int, np.ndarray], components: list[str], pid: int, steps: np.ndarray
) -> np.ndarray | None:
    """Per step (rows start, end, on), the engine loop's own work in ms: the step span's exclusive time (the loop's
    code no probe names) plus every probed call on the step's thread that is not a wait. Interpreter time is part
    of it, so its share of step time bounds the loop's interpreter share from above. None without step records."""
    rows = kept.get(pid)
    if rows is None or not len(rows) or not len(steps):
        return None
    is_step = np.array([components[int(i)] == STEP for i in rows[:, INDEX]], dtype=bool)
    waits = np.array([components[int(i)] in LOOP_WAITS for i in rows[:, INDEX]], dtype=bool)
    starts, ends = steps[:, 0], steps[:, 1]
    own = np.zeros(len(steps))
    step_rows = rows[is_step]
    threads = {int(row[START]): int(row[TID]) for row in step_rows}
    for row in rows[~waits]:
        at = int(np.searchsorted(starts, row[START], side="right")) - 1
        if at < 0 or row[START] >= ends[at] or threads.get(int(starts[at])) != int(row[TID]):
            continue  # outside the steps, or another thread's or process's work
        own[at] += row[5] / 1e6
    return own


def _on_loop(kept: dict[int, np.ndarray], components: list[str], pid: int, name: str) -> bool:
    return any(components[int(i)] == name for i in kept[pid][:, INDEX])


def _per_step_ms(
    kept: dict[int, np.ndarray], components: list[str], steps: np.ndarray, loop_pid: int
) -> dict[str, np.ndarray]:
    """Each component's exclusive ms within each step (by the start of its span), over all processes; the
    loop's own components only on the loop's thread that ran the step."""
    starts, ends = steps[:, 0], steps[:, 1]
    result: dict[str, np.ndarray] = {}
    for rows in kept.values():
        for row in rows:
            name = components[int(row[INDEX])]
            if name == STEP:
                continue
            at = int(np.searchsorted(starts, row[START], side="right")) - 1
            if at < 0 or row[START] >= ends[at]:
                continue  # between steps (the API server's work, a request's arrival)
            result.setdefault(name, np.zeros(len(steps)))[at] += row[5] / 1e6
    return result


def _cost(
    kept: dict[int, np.ndarray],
    per_process: dict[int, ProbeProcess],
    steps: ProbeSteps | None,
    table: np.ndarray,
    wall_ns: int,
    sizes: np.ndarray | None = None,
) -> ProbeCost:
    """The probe's own cost: in-run A/B on step time (with an A/A beside it) and priced from calls x cost."""
    priced = {}
    for pid, rows in kept.items():
        cost = per_process[pid].get("cost_ns")
        if isinstance(cost, (int, float)) and cost > 0 and len(rows):
            on = rows[rows[:, ON] == 1]  # the calls made while the probes were on, over the time they were on
            _tids, calls = np.unique(on[:, TID], return_counts=True)
            priced[pid] = (
                int(calls.max(initial=0)) * cost / wall_ns
            )  # its busiest thread's calls x the cost of one
    section: ProbeCost = {
        "priced": max(priced.values()) if priced else None,
        "priced_by_pid": {str(pid): share for pid, share in priced.items()},
        "ab": None,
        "aa": None,
    }
    if steps is None:
        section["note"] = "no step probe recorded: the in-run A/B needs the engine's steps"
        return section
    ab, aa = adjacent_pairs(table, sizes)
    section["pairs"] = {"on_off": len(ab), "like": len(aa)}
    if sizes is not None:
        section["matched_by"] = f"step sizes within {SIZE_TOLERANCE:.0%}"
    if len(ab) < MIN_STEPS:
        section["note"] = (
            f"{len(ab)} on/off pair(s) of steps"
            + (" of about equal size" if sizes is not None else "")
            + ": the run was too short for the A/B (the steps take turns)"
        )
        return section
    if min(sum(order for *_ms, order in ab), sum(1 - order for *_ms, order in ab)) < MIN_STEPS // 2:
        section["note"] = "the on/off pairs came in one order only: no ABBA units for the A/B"
        return section
    section["ab"] = _relative(ab)
    if len(aa) >= MIN_STEPS:
        section["aa"] = _relative(aa)
    return section


Pair = tuple[float, float, int]  # (first arm's ms, second arm's ms, order: 0 or 1)


def adjacent_pairs(table: np.ndarray, sizes: np.ndarray | None = None) -> tuple[list[Pair], list[Pair]]:
    """Neighbouring steps paired, as ms: (on, off) where their turns differ, the A/B; and like with like, the A/A.

    The steps take turns 1, 0, 0, 1, ...: a step is paired with its neighbour, so the load's drift (a batch
    filling up) cancels within a pair. Each pair carries its order: for the A/B whether the step switched on
    came first (1) or second (0), so an effect of a step's place (the step after a long one) cancels between
    orders; the A/A alternates its order the same way. With `sizes`, neighbours whose sizes differ by more
    than SIZE_TOLERANCE of the larger (or are unknown) are not paired.
    """
    durations = (table[:, 1] - table[:, 0]) / 1e6
    flags = table[:, 2].astype(int)
    ab: list[Pair] = []
    aa: list[Pair] = []
    for differ, pairs in ((True, ab), (False, aa)):
        index = 0
        while index + 1 < len(durations):
            unlike = sizes is not None and not _alike(int(sizes[index]), int(sizes[index + 1]))
            if (flags[index] != flags[index + 1]) != differ or unlike:
                index += 1
                continue
            first, second = float(durations[index]), float(durations[index + 1])
            if differ:
                on_first = int(flags[index] == 1)
                pairs.append((first, second, on_first) if on_first else (second, first, on_first))
            else:
                order = len(pairs) % 2
                pairs.append((first, second, order) if order == 0 else (second, first, order))
            index += 2
    return ab, aa


def _alike(size: int, other: int) -> bool:
    return size >= 0 and other >= 0 and abs(size - other) <= SIZE_TOLERANCE * max(size, other)


def _relative(pairs: list[Pair]) -> PairedDifference:
    """The typical relative difference first / second - 1, with a bootstrap interval over units.

    A unit is a pair of each order, taken in time order (ABBA), so the mean of their log(first / second)
    holds no effect of a step's place; the figure is the median unit. A median, not a ratio of sums: a CPU
    server's steps run from tens of ms (decode) to seconds (a batch of prefills), and one long step in one
    arm would swamp a cost paid per call, which is what the probe adds to every step alike."""
    by_order: list[list[float]] = [[], []]
    for first, second, order in pairs:
        by_order[order].append(math.log(max(first, 1e-9) / max(second, 1e-9)))
    units = np.array([(a + b) / 2 for a, b in zip(*by_order, strict=False)], dtype=float)
    interval = bootstrap([units], quantile_statistic(0.5), block=None, resamples=2000)
    return {
        "point": math.expm1(interval.point),
        "low": None if math.isnan(interval.low) else math.expm1(interval.low),
        "high": None if math.isnan(interval.high) else math.expm1(interval.high),
        "pairs": len(pairs),
        "units": len(units),
        "statistic": "median over units of two neighbouring pairs of steps (ABBA)",
    }


def _agreement(
    kept: dict[int, np.ndarray], components: list[str], sampled: Mapping[int, TargetProcess], wall_ns: int
) -> list[ProbeAgreement]:
    """Per (process, thread, component) both measured: the probe's share of the thread's wall time against
    the samples' Wilson interval for that thread."""
    rows: list[ProbeAgreement] = []
    for pid, records in kept.items():
        row = sampled.get(pid)
        split = row.get("split") if row else None
        threads = (split.get("threads") or {}) if split else {}
        for thread in threads.values():
            tid, samples = thread.get("thread_id"), int(thread.get("samples") or 0)
            if tid is None or samples == 0:
                continue
            mine = records[records[:, TID] == tid]
            for name in sorted({components[int(i)] for i in mine[:, INDEX]} & set(SAMPLE_NAMES)):
                own = mine[np.array([components[int(i)] == name for i in mine[:, INDEX]], dtype=bool)]
                probe_share = float(own[:, 5].sum() / wall_ns)
                sample_share = sum(
                    float((thread.get("components") or {}).get(n) or 0.0) for n in SAMPLE_NAMES[name]
                )
                interval = wilson_interval(round(sample_share * samples), samples)
                rows.append(
                    {
                        "pid": pid,
                        "thread": thread.get("name"),
                        "thread_id": tid,
                        "component": name,
                        "probe_share": probe_share,
                        "sample_share": sample_share,
                        "samples": samples,
                        "low": interval.low,
                        "high": interval.high,
                        "agree": interval.low <= probe_share <= interval.high,
                    }
                )
    return rows


def probe_bounds(section: Probe, engine: str) -> list[str]:
    """The Amdahl bound of each component on the step's path, from the probe's shares (the verdict's long form),
    each saying how it was obtained: slowdown-measured where a --what-if run measured it, else a bound only."""
    components = (section.get("steps") or {}).get("components") or {}
    measured = (section.get("what_if") or {}).get("components") or {}
    lines = []
    for name, entry in components.items():
        if name in ("model", "worker"):
            continue
        slowdown = measured.get(name)
        how = (
            slowdown_measured(slowdown)
            if slowdown is not None and slowdown.get("sensitivity") is not None
            else "bound only (Amdahl): no C twin exists there, and no slowdown measured it (--what-if would)."
        )
        lines.append(
            f"If {engine}'s {name} cost nothing, its step would be at most {_pct(entry['share'])} shorter "
            f"(Amdahl at an infinite speedup{_iv(entry, ', 95% interval ')}, from the probe's spans); {how}"
        )
    return lines


def probe_sentences(section: Probe, engine: str) -> list[str]:
    """The summary's lines from the probe: time per step, the critical path, agreement, cost."""
    lines = []
    steps = section.get("steps")
    if steps and steps.get("components"):
        parts = [
            f"{NAMES.get(name, name)} {entry['ms_per_step']:.2f} ms ({_pct(entry['share'])}{_iv(entry)})"
            for name, entry in steps["components"].items()
        ]
        lines.append(
            f"In-process probe, {steps['with_probes_on']:,} steps (mean {steps['mean_ms']:.1f} ms): per step "
            + ", ".join(parts)
            + "."
        )
        path = critical_path(steps)
        if path:
            lines.append(path)
    elif steps and steps.get("note"):
        lines.append(f"In-process probe: {steps['note']}.")
    agreement = section.get("agreement") or []
    if agreement:
        agreeing = sum(row["agree"] for row in agreement)
        worst = [
            f"{row['component']} on {row['thread']} ({row['pid']}): probe {_pct(row['probe_share'])}, samples "
            f"{_pct(row['sample_share'])} [{_pct(row['low'])}, {_pct(row['high'])}]"
            for row in agreement
            if not row["agree"]
        ]
        lines.append(
            f"Probe against samples: {agreeing} of {len(agreement)} component shares fall inside the samples' "
            f"95% interval" + (f"; outside: {'; '.join(worst)}." if worst else ".")
        )
    cost: ProbeCost = section.get("cost") or {}
    ab, aa = cost.get("ab"), cost.get("aa")
    if ab:
        size = " of about equal size" if cost.get("matched_by") else ""
        pairs = (
            f" (median of {ab['units']:,} units of neighbouring steps{size} on and off)"
            if ab.get("units")
            else ""
        )
        lines.append(
            f"The probe's cost, in-run A/B on step time: {_signed(ab['point'])}{_iv(ab, ' [', signed=True)}{pairs}"
            + (f" (A/A beside it: {_signed(aa['point'])}{_iv(aa, ' [', signed=True)})" if aa else "")
            + (
                f"; priced from its calls: {_pct(cost['priced'], 3)} of a thread"
                if cost.get("priced") is not None
                else ""
            )
            + (
                "; the A/A's spread says this run's step times vary too much for the A/B to resolve a cost of "
                "that size: read the priced figure"
                if _unresolved(aa, cost.get("priced"))
                else ""
            )
            + "."
        )
    elif cost.get("priced") is not None:
        lines.append(
            f"The probe's cost, priced from its calls: {_pct(cost['priced'], 3)} of a thread"
            + (f" ({cost['note']})" if cost.get("note") else "")
            + "."
        )
    return lines


def _unresolved(aa: PairedDifference | None, priced: float | None) -> bool:
    """The A/A's interval is wider than AA_RESOLVES: the A/B beside it cannot tell a cost of the priced size
    (or of the 1% the probe is allowed) from the load's own variation."""
    low, high = (aa.get("low"), aa.get("high")) if aa else (None, None)
    if low is None or high is None:
        return False
    return high - low > max(AA_RESOLVES, 4 * (priced or 0.0))


def critical_path(steps: ProbeSteps) -> str | None:
    """A step of a loop that hands the model to another process, in order: the loop's own work, the wait on
    the worker and what the worker's probes timed inside it; None when the loop does not wait on a worker."""
    components = steps.get("components") or {}
    worker, mean = components.get("worker"), steps.get("mean_ms")
    if not worker or not mean:
        return None
    own = max(0.0, mean - worker["ms_per_step"])
    inside = [
        f"{name} {entry['ms_per_step']:.1f} ms"
        for name, entry in components.items()
        if entry.get("where") == "other process" and name not in ("api", "tokenizer", "detokenizer")
    ]
    return (
        f"A step's critical path (mean {mean:.1f} ms): the engine loop's own work {own:.1f} ms "
        f"({_pct(own / mean)}), then waiting on the model worker {worker['ms_per_step']:.1f} ms "
        f"({_pct(worker['share'])})"
        + (f", in which the worker's probes timed {', '.join(inside)}" if inside else "")
        + ", then back to the loop."
    )


def _pct(value: float | None, digits: int = 1) -> str:
    return "n/a" if value is None else f"{value * 100:.{digits}f}%"


def _signed(value: float) -> str:
    return f"{value * 100:+.1f}%"


def _iv(
    entry: ProbeShare | PairedDifference | ProbeAgreement, prefix: str = " [", *, signed: bool = False
) -> str:
    low, high = entry.get("low"), entry.get("high")
    if low is None or high is None:
        return ""
    show = _signed if signed else _pct
    return (
        f"{prefix}{show(low)}, {show(high)}]" if prefix.endswith("[") else f"{prefix}{show(low)}-{show(high)}"
    )
