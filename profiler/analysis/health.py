"""The run's health: did the engine thread get a core, was the rest of the machine busy, did the engine keep up with the load.

A distorted run (its engine thread starved of CPU, or the engine saturated) still records every number,
but its shares, latencies and predictions describe the machine's contention or the queue, not the
engine: the headline says so first, and budgets, `compare` and `selftest` treat it as void.

Figures (result.json `health`, shape in `health_section`):
    engine core share = on-CPU time / (on-CPU + runnable-but-waiting time) of the engine thread, from
                        /proc/self/task/<tid>/schedstat: the part of a core it got while it wanted one
                        (time it slept waiting for requests counts in neither).
    others' load      = CPU time the rest of the machine used during the run, in cores; the mean number
                        of other runnable tasks (procs_running less ours); steal time's fraction.
    delivered / offered (open loop, finite rate), the queue's share of request latency, and how much later
                        requests' latency grew over early ones'.
The thresholds below were chosen from measured runs; docs/measurements.md ("Run health") has the figures.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING

from ..rundir.health import VOID_BUSY, VOID_SATURATED
from ..rundir.schema import Health, Metrics

if TYPE_CHECKING:
    from ..collectors.health import HealthFigures

# Alone on a core a thread waits only for its wake-ups (a share near 1); with one CPU-bound competitor per core the
# scheduler gives it about half. Below 0.75 the run averaged at least half a competitor per core over its whole
# length. The runs measured for this (docs/measurements.md, "Run health") gave 0.03-0.11 on a machine shared by
# ~20 runnable tasks: far below, whatever the exact line.
CONTENDED_BELOW = 0.75
# Below this much engine demand (CPU + wait) the share is a handful of scheduler ticks: too few to judge.
MIN_DEMAND_S = 0.5
# Open loop: the engine delivered under half the offered request rate: saturated, whatever else. (A run that keeps
# up delivers near its offered rate; the drain after the last arrival lowers it by under half while a request's
# latency is shorter than the arrival window. A busy run delivered a small fraction of it: docs/measurements.md,
# "Figures that stood in code comments".)
SATURATED_DELIVERED_BELOW = 0.50
# Under 80% of it and a backlog (below): saturated too.
BACKLOG_DELIVERED_BELOW = 0.80
# ... and requests spent at least half of their latency queued for a batch slot, or ...
SATURATED_QUEUE_SHARE = 0.50
# ... the last third of requests (by arrival) took this many times the first third's median latency: a backlog
# that grows with the run (an engine keeping up serves late requests like early ones; batching alone grows it
# far less than this).
SATURATED_LATENCY_GROWTH = 2.0


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


def _load_settings(scenario: Mapping[str, object]) -> Mapping[str, object]:
    """The scenario's `load` settings (scenarios.spec.ScenarioSpec.to_dict: mode, rate, burstiness, clients)."""
    load = scenario.get("load")
    return load if isinstance(load, dict) else {}


def offered_rate(
    scenario: Mapping[str, object], measured_requests: int, arrival_span_s: float | None
) -> float | None:
    """Requests/s the load offered: the measured requests over their arrival span (open loop); None for a closed
    loop or an all-at-once load, whose offered rate is not a rate."""
    load = _load_settings(scenario)
    if load.get("mode") != "open-loop" or load.get("rate") in ("inf", None):
        return None
    if arrival_span_s and arrival_span_s > 0 and measured_requests > 1:
        return (measured_requests - 1) / arrival_span_s
    return _number(load.get("rate"))


def latency_growth(e2e_ms_by_arrival: list[float | None]) -> float | None:
    """Median latency of the last third of requests (in arrival order) over the first third's; None under 6 requests."""
    values = [number for value in e2e_ms_by_arrival if (number := _number(value)) is not None]
    if len(values) < 6:
        return None
    third = len(values) // 3
    early, late = sorted(values[:third]), sorted(values[-third:])
    early_median, late_median = early[len(early) // 2], late[len(late) // 2]
    return late_median / early_median if early_median > 0 else None


def _queue_share(metrics: Metrics) -> float | None:
    """The mean request's queue time over its latency (None where either was not measured)."""
    queue_mean = _number((metrics.get("queue_ms") or {}).get("mean"))
    e2e_mean = _number((metrics.get("e2e_ms") or {}).get("mean"))
    return queue_mean / e2e_mean if queue_mean is not None and e2e_mean else None


def _saturated(ratio: float | None, open_loop: bool, backlog: bool) -> bool:
    """Whether the engine could not keep up: delivered / offered (`ratio`) far short, or short with a backlog.

    Only an open loop can be offered more than it delivers (a ratio exists only there): its queue, and so its
    latencies, grow with the run's length. A closed loop with more clients than batch slots queues too, but a
    bounded queue: at capacity, not void."""
    if ratio is None:  # an all-at-once load: only the backlog can tell
        return open_loop and backlog
    return ratio < SATURATED_DELIVERED_BELOW or (backlog and ratio < BACKLOG_DELIVERED_BELOW)


def health_section(
    probe: HealthFigures,
    metrics: Metrics,
    scenario: Mapping[str, object],
    *,
    offered_rps: float | None,
    growth: float | None = None,
) -> Health:
    """result.json's `health` from the probe's raw figures (profiler.collectors.health) and the run's metrics.

    {engine_thread: {cpu_s, wait_s, core_share | null}, machine: {cpus, others_cores, others_runnable_mean,
     steal_fraction}, load: {mode, offered_rps | null, delivered_rps, delivered_ratio | null, queue_share | null,
           latency_growth | null (latency_growth())},
     contended: bool, saturated: bool, at_capacity: bool (a closed loop queued: not void), void: null | "the machine was busy" | "the engine was saturated",
     lines: [plain sentences for the headline, most serious first], thresholds: {name: value}}"""
    cpu_s, wait_s = _number(probe.get("engine_cpu_s")), _number(probe.get("engine_wait_s"))
    core_share = None
    if cpu_s is not None and wait_s is not None and cpu_s + wait_s >= MIN_DEMAND_S:
        core_share = cpu_s / (cpu_s + wait_s)
    delivered = _number(metrics.get("request_throughput"))
    ratio = delivered / offered_rps if delivered is not None and offered_rps else None
    queue_share = _queue_share(metrics)
    mode = _load_settings(scenario).get("mode")
    contended = core_share is not None and core_share < CONTENDED_BELOW
    queued = queue_share is not None and queue_share >= SATURATED_QUEUE_SHARE
    backlog = queued or (growth is not None and growth >= SATURATED_LATENCY_GROWTH)
    saturated = _saturated(ratio, mode == "open-loop", backlog)
    section: Health = {
        "engine_thread": {"cpu_s": cpu_s, "wait_s": wait_s, "core_share": core_share},
        "machine": {
            "cpus": probe.get("cpus"),
            "others_cores": _number(probe.get("others_cores")),
            "others_runnable_mean": _number(probe.get("others_runnable_mean")),
            "steal_fraction": _number(probe.get("steal_fraction")),
        },
        "load": {
            "mode": mode if isinstance(mode, str) else None,
            "offered_rps": offered_rps,
            "delivered_rps": delivered,
            "delivered_ratio": ratio,
            "queue_share": queue_share,
            "latency_growth": growth,
        },
        "contended": contended,
        "saturated": saturated,
        "at_capacity": queued and not saturated,
        "void": VOID_BUSY if contended else VOID_SATURATED if saturated else None,
        "thresholds": {
            "contended_below": CONTENDED_BELOW,
            "saturated_delivered_below": SATURATED_DELIVERED_BELOW,
            "backlog_delivered_below": BACKLOG_DELIVERED_BELOW,
            "saturated_queue_share": SATURATED_QUEUE_SHARE,
            "saturated_latency_growth": SATURATED_LATENCY_GROWTH,
        },
    }
    section["lines"] = health_lines(section)
    return section


def health_lines(health: Health | None) -> list[str]:
    """The headline's warnings about the run itself, in plain words with the measured figures (empty: healthy)."""
    if not health:
        return []
    lines = []
    engine, machine, load = (
        health.get("engine_thread") or {},
        health.get("machine") or {},
        health.get("load") or {},
    )
    if health.get("contended"):
        others = machine.get("others_cores")
        runnable = machine.get("others_runnable_mean")
        steal = machine.get("steal_fraction")
        detail = []
        if others is not None:
            detail.append(f"other programs used {others:.1f} of {machine.get('cpus')} cores")
        if runnable is not None:
            detail.append(f"{runnable:.1f} other tasks were runnable on average")
        if steal:
            detail.append(f"the hypervisor stole {steal:.0%}")
        lines.append(
            f"The machine was busy: the engine thread got {engine['core_share']:.0%} of a core while it had work "
            f"(it waited {engine['wait_s']:.1f} s for a CPU, ran {engine['cpu_s']:.1f} s)"
            + (f"; {', '.join(detail)}" if detail else "")
            + ". Timings, shares and predictions of this run are inflated by contention: void for budgets and compare."
        )
    if health.get("saturated"):
        offered, delivered, ratio = (
            load.get("offered_rps"),
            load.get("delivered_rps"),
            load.get("delivered_ratio"),
        )
        rate = (
            f"it completed {delivered:.3g} req/s of the {offered:.3g} req/s offered ({ratio:.0%})"
            if offered and delivered is not None and ratio is not None
            else None
        )
        queue = load.get("queue_share")
        queued = (
            f"requests spent {queue:.0%} of their latency queued for a batch slot"
            if queue is not None and queue >= SATURATED_QUEUE_SHARE
            else None
        )
        growth = load.get("latency_growth")
        grew = (
            f"the last third of requests took {growth:.1f}x the first third's latency"
            if growth is not None and growth >= SATURATED_LATENCY_GROWTH
            else None
        )
        lines.append(
            "The engine was saturated: "
            + "; ".join(part for part in (rate, queued, grew) if part)
            + ". Latencies grow with the run's length, not the engine's speed: void for budgets and compare."
        )
    return lines
