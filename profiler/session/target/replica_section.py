"""`target.replicas`: each replica's engine loop split from its processes' samples, and whether the replicas did equal work (their CPU over the load against a fair router's spread)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ...analysis.diagnose import rule_for
from ...analysis.foreign_figures import engine_process, loop_figures
from ...analysis.foreign_words import interval_method
from ...rundir.schema import Interval, TargetReplica, TargetReplicas
from ...stats import wilson_interval
from .server_split import foreign_processes

if TYPE_CHECKING:
    from ...collectors.sampling import SamplingResult

Z_95 = 1.959964  # the normal quantile of a two-sided 95% band
# LoopFigures' counts that a replica's split gives as shares of its loop's busy samples
SPLIT_CATEGORIES = ("interpreter", "kernel", "on_worker", "lock")


@dataclass(slots=True)
class ReplicaSamples:
    """One replica as sampled: where it listens, how and when it was found, and its processes' sampling results."""

    url: str
    name: str  # HOST:PORT, as the table names it
    found_by: str  # "--replica" or "the router's connections"
    found_s: float | None  # seconds after sampling started; 0 for a replica named with --replica
    root: int | None
    pids: list[int]
    with_router: bool  # its processes are in the router's own tree, sampled there
    results: dict[int, SamplingResult] = field(default_factory=dict)  # pid -> py-spy result
    cpu_s: float | None = None  # CPU seconds its processes used over the load (/proc: exact, no sampling)


def replica_entry(replica: ReplicaSamples) -> TargetReplica:
    """The replica's entry: its engine loop's split when one worked while sampled, else why not."""
    entry: TargetReplica = {
        "url": replica.url,
        "name": replica.name,
        "found_by": replica.found_by,
        "found_s": replica.found_s,
        "root": replica.root,
        "pids": list(replica.pids),
        "sampled_with_router": replica.with_router,
        "cpu_s": replica.cpu_s,
        "engine_pid": None,
        "engine_role": None,
        "samples": 0,
        "busy_samples": 0,
        "busy": None,
        "interpreter": None,
        "split": {},
        "rule": None,
        "reason": None,
    }
    processes = foreign_processes(sorted(replica.results.items()))
    if not processes:
        entry["reason"] = "none of its processes could be sampled"
        return entry
    chosen = engine_process(processes)
    if chosen is None:
        entry["reason"] = "no engine loop or model worker was found in its sampled processes"
        return entry
    entry["engine_pid"], entry["engine_role"] = chosen["pid"], chosen["role"]
    figures = loop_figures(processes, chosen)
    if figures is None:
        entry["reason"] = "its engine loop only waited for work while sampled"
        return entry
    samples, busy = round(figures.samples), round(figures.busy)
    busy_share = wilson_interval(busy, samples)
    entry["samples"], entry["busy_samples"] = samples, busy
    entry["busy"] = {
        "share": busy_share.point,
        "low": busy_share.low,
        "high": busy_share.high,
        "samples": samples,
        "method": "Wilson 95% interval of the loop's busy samples among all its samples",
    }
    interpreter: Interval = {
        "share": figures.share,
        "low": figures.low,
        "high": figures.high,
        "samples": busy,
        "method": interval_method(figures),
    }
    entry["interpreter"] = interpreter
    entry["split"] = {
        name: getattr(figures, name) / figures.busy for name in SPLIT_CATEGORIES if getattr(figures, name)
    }
    entry["rule"] = rule_for(figures.share)
    return entry


def replicas_section(
    replicas: list[ReplicaSamples], *, router: str, router_pids: list[int], source: str, requests: int
) -> TargetReplicas:
    """target.replicas: every replica's entry, and the line that says whether they were balanced (cpu_balance) over
    the load's `requests`."""
    entries = [replica_entry(replica) for replica in replicas]
    lines = [
        f"Replica {entry['name']}: no split ({entry['reason']})" for entry in entries if entry.get("reason")
    ]
    judged = cpu_balance(entries, requests)
    if judged is not None:
        lines.append(f"Replicas behind {router}: {judged.line}")
    elif len(replicas) > 1:
        lines.append(
            f"Replicas behind {router}: balance not judged (no CPU time read, or no request measured)"
        )
    late = [entry for entry in entries if (entry.get("found_s") or 0.0) > 0.0]
    if late:
        lines.append(
            "Replicas found through the router's connections are sampled from when they were found ("
            + ", ".join(f"{entry['name']} {entry['found_s']:.1f} s" for entry in late)
            + " after sampling started): their busy and interpreter shares cover that part of the load, their CPU all of it"
        )
    lines.append(
        f"The run's verdict and split above read one engine loop of the target's process tree ({router}); each "
        "replica's own loop is read in the replicas' table"
    )
    return {
        "source": source,
        "router": router,
        "router_pids": list(router_pids),
        "requests": requests,
        "replicas": entries,
        "balanced": judged.balanced if judged is not None else None,
        "busiest": judged.busiest if judged is not None and not judged.balanced else None,
        "idlest": judged.idlest if judged is not None and not judged.balanced else None,
        "spread": judged.spread if judged is not None else None,
        "lines": lines,
    }


@dataclass(frozen=True, slots=True)
class CpuBalance:
    """Each replica's share of the replicas' CPU over the load, against the spread a fair router would give."""

    shares: dict[str, float]
    spread: float  # the 95% half-width of one replica's share under a router that picks replicas at random
    balanced: bool
    busiest: str
    idlest: str
    line: str


def cpu_balance(entries: list[TargetReplica], requests: int) -> CpuBalance | None:
    """Whether the replicas did equal work: each one's share of their CPU time over one window (read exactly from
    /proc), against 1/k +- the 95% spread of a router that sends each of the `requests` to one of k replicas at
    random (binomial: 1.96 sqrt(p(1-p)/n)). A round robin spreads less, so a share outside it is beyond what fair
    routing of these requests explains; CPU the replicas spend idle pulls the shares together, never apart. None with
    fewer than two replicas read, no CPU used, or no request measured."""
    cpu = {entry["name"]: entry["cpu_s"] for entry in entries if entry.get("cpu_s") is not None}
    total = sum(value for value in cpu.values() if value is not None)
    if len(cpu) < 2 or total <= 0 or requests <= 0:
        return None
    shares = {name: (value or 0.0) / total for name, value in cpu.items()}
    fair = 1.0 / len(shares)
    spread = Z_95 * math.sqrt(fair * (1.0 - fair) / requests)
    busiest = max(shares, key=lambda name: shares[name])
    idlest = min(shares, key=lambda name: shares[name])
    balanced = all(abs(share - fair) <= spread for share in shares.values())
    listed = ", ".join(f"{name} {cpu[name]:.2f} s ({share:.0%})" for name, share in shares.items())
    band = f"a random router's 95% spread of {fair:.0%} +- {spread:.0%} over {requests} requests"
    verdict = (
        f"balanced (every share within {band})"
        if balanced
        else f"not balanced: {busiest} did {shares[busiest]:.0%} of the work and {idlest} {shares[idlest]:.0%}, "
        f"beyond {band}"
    )
    return CpuBalance(shares, spread, balanced, busiest, idlest, f"CPU over the load {listed}; {verdict}")
