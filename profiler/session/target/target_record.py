"""After a `run --target` load: client-side serving metrics (the same definitions as in-process), each process's role and split, the server's split and verdict (spans from our server, samples of the process that runs the engine loop, the probe's spans), the `target` block -> RunResult."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ....scenarios.spec import ScenarioSpec
from ...analysis.foreign import (
    foreign_breakdown,
    queueing_reason,
    with_probe_bound,
    with_slowdowns,
)
from ...analysis.metrics import (
    RequestTiming,
    compute_metrics,
    engine_timeline_summary,
    latency_summary,
)
from ...analysis.probe_slowdown import analyse_slowdowns
from ...analysis.probe_spans import analyse_probe, probe_bounds, probe_sentences
from ...collectors.base import status_entry
from ...collectors.spans import StepRow
from ...rundir.environment import describe_environment
from ...rundir.results import REQUEST_COLUMNS, STEP_COLUMNS, RunResult
from ...rundir.schema import (
    Breakdown,
    CollectorStatus,
    Config,
    EngineFigures,
    Metrics,
    Probe,
    ProbeWhatIf,
    SampledThread,
    Target,
    TargetClient,
    TargetProcess,
    TargetTree,
    Verdict,
)
from ..until import Stopper
from .client import HttpLoad, HttpRecord, http_outcome
from .inject import ProbeSetup, read_probe
from .processes import primary_pid, process_table
from .remote import RemoteWindow
from .server_split import (
    foreign_processes,
    gil_section,
    server_breakdown,
    server_verdict,
    thread_table,
)
from .watch import TreeSampler, WatchedProcess

if TYPE_CHECKING:
    from ...collectors.registry import CollectorResults
    from ...collectors.sampling import SamplingResult
    from ..record import RequestRow
    from .ray_run import RayRun

from .target_plan import TargetPlan

CLIENT_BUSY_FRACTION = 0.8  # of one core: above it the client may be what limits the load
CLIENT_LAG_MS = 50.0  # p99 lateness of sends against the schedule that says the same


def _client_metrics(load: HttpLoad, scenario: ScenarioSpec) -> tuple[list[RequestRow], Metrics, float]:
    """requests.csv's rows, the `metrics` section (the in-process definitions, plus the schedule's lateness) and the
    measured load's length in seconds, all from the client's records."""
    timings, rows = _request_tables(load.records)
    measured_end = max(
        [row["finish_ns"] for row in rows if not row["warmup"] and row["finish_ns"]] or [load.end_ns]
    )
    duration_s = max(1e-9, (measured_end - load.start_ns) / 1e9)
    metrics = compute_metrics(timings, duration_s=duration_s, slos=scenario.slo.as_dict())
    metrics["slo"] = scenario.slo.as_dict()
    lags = [
        (r.send_ns - r.scheduled_ns) / 1e6
        for r in load.records
        if not r.request.warmup and r.send_ns is not None and r.scheduled_ns is not None
    ]
    metrics["loadgen_schedule_lag_ms"] = {
        "mean": float(np.mean(lags)) if lags else None,
        "p99": float(np.percentile(lags, 99)) if lags else None,
        "max": float(max(lags)) if lags else None,
    }
    return rows, metrics, duration_s


def record_target(
    plan: TargetPlan,
    scenario: ScenarioSpec,
    load: HttpLoad,
    window: RemoteWindow | None,
    window_data: dict[str, Any] | None,
    tree: TreeSampler | None,
    *,
    profile: str,
    prompt_model: str,
    probe: ProbeSetup | None = None,
    ray_run: RayRun | None = None,
    stopper: Stopper | None = None,
) -> tuple[RunResult, pd.DataFrame, pd.DataFrame, CollectorResults]:
    """The run's result, requests.csv, steps.csv and collector results (`processes`: each pid's sampling); after a
    run that went on until resolved (`stopper`), the verdict's intervals at its last look's confidence."""
    rows, metrics, duration_s = _client_metrics(load, scenario)
    found = _server_samples(plan, load, window, window_data, tree, ray_run)
    probe_section, verdict = _probe_and_verdict(probe, load, found, metrics, ray_run, stopper)
    target = _target_block(
        plan,
        load,
        found.breakdown,
        found.sampling,
        window,
        window_data,
        found.threads,
        found.engine_thread,
        duration_s,
        found.processes,
        found.primary,
    )
    if probe_section is not None:
        target["probe"] = probe_section
    _with_ray(target, ray_run, found.processes)
    result = RunResult(
        config=_config(plan, scenario, profile, list(found.collectors), prompt_model),
        environment=describe_environment(),
        scenario=scenario.to_dict(),
        metrics=metrics,
        engine=_engine_figures(found.steps),
        collectors=found.collectors,
        breakdown=found.breakdown,
        verdict=verdict,
        target=target,
    )
    collector_results: CollectorResults = {"sampling": found.sampling} if found.sampling else {}
    collector_results["processes"] = found.results
    steps = found.steps
    steps_df = pd.DataFrame(steps) if steps else pd.DataFrame(columns=list(STEP_COLUMNS))
    return result, pd.DataFrame(rows, columns=list(REQUEST_COLUMNS)), steps_df, collector_results


def _probe_and_verdict(
    probe: ProbeSetup | None,
    load: HttpLoad,
    found: _ServerSamples,
    metrics: Metrics,
    ray_run: RayRun | None,
    stopper: Stopper | None,
) -> tuple[Probe | None, Verdict | None]:
    """The probe's section (its status among `found.collectors`) and the server's verdict (None without a split),
    at the run's confidence: the last look's after a run that went on until resolved."""
    confidence = stopper.confidence if stopper is not None else 0.95
    processes = found.processes
    probe_section = _probe_section(probe, load, processes, confidence, ray_run) if probe is not None else None
    probed = bool(probe_section and probe_section["loaded_in"])
    if probe is not None:
        found.collectors["probe"] = {
            "status": "ok" if probed else "failed",
            "reason": None if probed else NO_PROBE,
        }
    verdict = (
        _target_verdict(found.breakdown, found.collectors, metrics, probe_section, probed, stopper)
        if found.breakdown is not None
        else None
    )
    return probe_section, verdict


def _engine_figures(steps: list[StepRow]) -> EngineFigures:
    """result.json's `engine` of a server run: our server's step timeline's summary (empty for another engine)."""
    if not steps:
        return {}
    return {**engine_timeline_summary(steps), "steps": len(steps)}


@dataclass
class _ServerSamples:
    """What the samplers (and our server's profile window) measured of the server's processes."""

    results: dict[int, SamplingResult]  # pid -> the tree's py-spy result
    primary: int | None  # the process whose engine loop the split reads
    sampling: SamplingResult | None  # its result (or why none)
    processes: list[TargetProcess] | None  # the process table, Ray-placed rows included
    collectors: dict[str, CollectorStatus]
    breakdown: Breakdown | None
    engine_thread: str
    threads: dict[str, SampledThread]
    steps: list[StepRow]  # our server's steps, from its window (profiler.serve.profiling.ServerWindow)


def _server_samples(
    plan: TargetPlan,
    load: HttpLoad,
    window: RemoteWindow | None,
    window_data: dict[str, Any] | None,
    tree: TreeSampler | None,
    ray_run: RayRun | None,
) -> _ServerSamples:
    """The process table and the server's split: the tree's samples (with the Ray-placed processes' beside them) and
    our server's spans."""
    wall_ns = load.end_ns - load.start_ns
    watched = tree.processes() if tree is not None else []
    results: dict[int, SamplingResult] = {
        w.info.pid: w.collector.result() for w in watched if w.collector is not None
    }
    primary = primary_pid(watched, results, prefer=plan.server.pid if plan.server.ours else None)
    sampling = results.get(primary) if primary is not None else _unsampled(plan, watched, results)
    processes = process_table(watched, results, primary, wall_ns) if tree is not None else None
    collectors: dict[str, CollectorStatus] = {"sampling": status_entry(sampling)} if sampling else {}
    if window is not None:
        ok = window_data is not None
        for name in ("spans", "gc"):
            collectors[name] = {"status": "ok" if ok else "failed", "reason": None if ok else window.error}
    native = list((plan.server.info or {}).get("native") or [])
    breakdown, engine_thread, _notes = server_breakdown(sampling, window_data, wall_ns, native, pid=primary)
    sampled = [(pid, result) for pid, result in results.items() if result.get("status") == "ok"]
    if ray_run is not None:  # the processes Ray placed, sampled on their nodes: read beside the tree's
        sampled += ray_run.sampled()
        processes = ray_run.rows(processes, wall_ns)
    if window_data is None and not plan.server.ours and len(sampled) > 1:
        # Another engine of several processes: the verdict reads the whole tree (the engine loop's process, the
        # model worker it waits on, the API server beside them), not the primary process alone.
        breakdown = foreign_breakdown(foreign_processes(sampled), wall_ns)
    threads = thread_table(sampling, primary) if sampling and sampling.get("status") == "ok" else {}
    steps = window_data["steps"] if window_data else []
    return _ServerSamples(
        results, primary, sampling, processes, collectors, breakdown, engine_thread, threads, steps
    )


def _with_ray(target: Target, ray_run: RayRun | None, processes: list[TargetProcess] | None) -> None:
    """target.ray: the Ray side of the run, or, for a tree that runs Ray, what --ray-address would add."""
    if ray_run is not None:
        target["ray"] = ray_run.section(processes)
    elif processes:
        from .ray_run import ray_hint

        if (hint := ray_hint(processes)) is not None:
            target["ray"] = hint


def _target_verdict(
    breakdown: Breakdown,
    collectors: dict[str, CollectorStatus],
    metrics: Metrics,
    probe_section: Probe | None,
    probed: bool,
    stopper: Stopper | None,
) -> Verdict:
    """The server's verdict at the run's confidence (the last look's, after a run that went on until resolved), with
    the queueing it saw, the probe's sentences, slowdowns and bound where --probe ran."""
    confidence = stopper.confidence if stopper is not None else 0.95
    verdict = server_verdict(breakdown, collectors, probed=probed, confidence=confidence)
    if stopper is not None:
        verdict["stopping"] = stopper.record()
    queued = queueing_reason(verdict, metrics)
    if queued:
        verdict["reasons"] = [*verdict.get("reasons", []), queued]
        verdict.setdefault("foreign", {})["queueing"] = queued
    if probe_section is None:
        return verdict
    engine = (verdict.get("foreign") or {}).get("engine") or "the engine"
    probe_section["lines"] = (
        probe_sentences(probe_section, engine) if probed else [f"In-process probe: {NO_PROBE}."]
    )
    what_if = probe_section.get("what_if")
    verdict["reasons"] = [
        *verdict.get("reasons", []),
        *probe_section["lines"],
        *(what_if or {}).get("lines", []),
        *probe_bounds(probe_section, engine),
    ]
    if what_if is not None:
        with_slowdowns(verdict, what_if)
    if probed:  # the loop's own work, timed by the probe, bounds its interpreter share from above
        with_probe_bound(verdict, probe_section, confidence=confidence)
    return verdict


NO_PROBE = (
    "no process of the server loaded the probe: does the command reset PYTHONPATH, or run Python with -S "
    "or -I? (the probe is a sitecustomize on the PYTHONPATH it is given)"
)
PROBE_FLUSH_S = 0.6  # the probe writes its spans every 0.25 s
NO_TURNS = (
    "Slowdowns (--what-if): no process of the server took the experiments' turns (no step probe ran, or the "
    "probe could not write its switch), so nothing was delayed or measured."
)


def _probe_section(
    probe: ProbeSetup,
    load: HttpLoad,
    processes: list[TargetProcess] | None,
    confidence: float = 0.95,
    ray_run: RayRun | None = None,
) -> Probe:
    """The probe's spans (read once its last flush is in; with Ray, every node's, on our clock, keyed by node and
    pid), analysed over the load; the loop's own work with its interval at `confidence`."""
    time.sleep(PROBE_FLUSH_S)
    key = ray_run.probe_key if ray_run is not None else lambda entry: int(entry["pid"])
    table = {key(entry): entry for entry in processes or []}
    found = read_probe(probe)
    if ray_run is not None:
        found = ray_run.probe_found(found)
    section = analyse_probe(
        probe.probes,
        found,
        (load.start_ns, load.end_ns),
        roles={pid: str(entry.get("role")) for pid, entry in table.items()},
        sampled=table,
        confidence=confidence,
    )
    section["lines"] = []
    if ray_run is not None:
        ray_run.name_probe_processes(section["processes"])
        section["loaded_in"] = [int(pid) for pid in section["loaded_in"]]
    if probe.what_if is not None:
        what_if = analyse_slowdowns(
            probe.probes,
            found,
            (load.start_ns, load.end_ns),
            roles={pid: str(entry.get("role")) for pid, entry in table.items()},
        )
        no_turns: ProbeWhatIf = {"components": {}, "lines": [NO_TURNS]}
        section["what_if"] = what_if if what_if is not None else no_turns
    return section


def _unsampled(
    plan: TargetPlan, watched: list[WatchedProcess], results: dict[int, SamplingResult]
) -> SamplingResult | None:
    """What stands for the sampling result when no process could be sampled: the first failure, or why none
    of the tree's processes was Python."""
    if plan.pid is None:
        return None
    failed = [result for result in results.values() if result.get("status") != "ok"]
    if failed:
        return failed[0]
    reason = (
        f"no Python process in the tree of pid {plan.pid} ({', '.join(w.info.title for w in watched) or 'gone'}): "
        "py-spy samples Python only"
    )
    return {"status": "skipped", "reason": reason}


def _request_tables(records: list[HttpRecord]) -> tuple[list[RequestTiming], list[RequestRow]]:
    """The metrics' per-request timings and requests.csv's rows, from the client's records of the requests sent."""
    timings: list[RequestTiming] = []
    rows: list[RequestRow] = []
    for index, record in enumerate(records):
        if record.send_ns is None:
            continue  # never sent (stopped before its turn)
        timing = _request_timing(index, record, record.send_ns)
        timings.append(timing)
        rows.append(_request_row(index, timing, record))
    return timings, rows


def _request_timing(index: int, record: HttpRecord, send_ns: int) -> RequestTiming:
    """One sent request's timing: its first token (its finish, for a reply that came whole), its token counts as the
    server reported them, else as the client counted."""
    ok = record.ok
    first = record.first_token_ns if record.first_token_ns is not None else (record.finish_ns if ok else None)
    output_tokens = record.completion_tokens if record.completion_tokens is not None else len(record.token_ns)
    prompt_tokens = record.prompt_tokens if record.prompt_tokens is not None else record.request.prompt_tokens
    return RequestTiming(
        request_id=index,
        arrival_ns=send_ns,
        scheduled_ns=None,
        first_token_ns=first,
        token_ns=list(record.token_ns),
        finish_ns=record.finish_ns,
        prompt_tokens=prompt_tokens,
        output_tokens=output_tokens,
        ok=ok,
        warmup=record.request.warmup,
    )


def _request_row(index: int, timing: RequestTiming, record: HttpRecord) -> RequestRow:
    """requests.csv's row of one sent request (its latencies from its send, on the client's clock)."""
    ok, first, send_ns, output_tokens = (
        timing.ok,
        timing.first_token_ns,
        timing.arrival_ns,
        timing.output_tokens,
    )
    ttft = (first - send_ns) / 1e6 if first is not None else None
    e2e = (record.finish_ns - send_ns) / 1e6 if record.finish_ns is not None else None
    return {
        "request_id": index,
        "index": record.request.index,
        "priority": record.request.priority,
        "warmup": record.request.warmup,
        "ok": ok,
        "finish_reason": record.finish_reason or ("error" if not ok else None),
        "error": record.error,
        "prompt_tokens": timing.prompt_tokens,
        "output_tokens": output_tokens,
        "arrival_ns": send_ns,
        "scheduled_ns": None,
        "first_token_ns": first,
        "finish_ns": record.finish_ns,
        "ttft_ms": ttft,
        "e2e_ms": e2e,
        "tpot_ms": (e2e - ttft) / (output_tokens - 1)
        if ttft is not None and e2e is not None and output_tokens > 1
        else None,
        "queue_ms": None,
        "num_preemptions": None,
        "token_ns": " ".join(str(t) for t in record.token_ns),
    }


def _config(
    plan: TargetPlan, scenario: ScenarioSpec, profile: str, collectors: list[str], prompt_model: str
) -> Config:
    info = plan.server.info or {}
    return {
        "model": plan.server.model,
        "model_source": f"{plan.server.name or 'server'} at {plan.server.url}",
        "dtype": (info.get("options") or {}).get("dtype"),
        "native": info.get("native", []),
        "native_requested": [],
        "scenario": scenario.name,
        "seed": scenario.seed,
        "requests": scenario.num_requests,
        "duration_s": scenario.duration_s,
        "profile": profile,
        "collectors": collectors,
        "engine": info.get("engine", {}),
        "injections": [],
        "verify": False,
        "target": plan.server.url,
        "prompt_tokenizer": prompt_model,
    }


def _target_block(
    plan: TargetPlan,
    load: HttpLoad,
    breakdown: Breakdown | None,
    sampling: SamplingResult | None,
    window: RemoteWindow | None,
    window_data: dict[str, Any] | None,
    threads: dict[str, SampledThread],
    engine_thread: str,
    duration_s: float,
    processes: list[TargetProcess] | None,
    primary: int | None,
) -> Target:
    methods = [name for name, split in ((breakdown or {}).get("methods") or {}).items() if split]
    reason = _no_split_reason(plan, sampling, window, window_data) if not methods else None
    http = http_outcome(load.records, dropped=load.dropped_fields)
    return {
        "url": plan.server.url,
        "ours": plan.server.ours,
        # Most requests failing is the run's first fact: the summary leads with the headline.
        "failed_share": http["failed_share"],
        "headline": http["headline"],
        "server": plan.server.to_dict(),
        "pid": primary if primary is not None else plan.pid,
        "pid_source": plan.pid_source,
        "tree": _tree_section(plan),
        "processes": processes,
        "split": {
            "available": bool(methods),
            "methods": methods,
            "reason": reason,
            "engine_thread": engine_thread if methods else None,
        },
        "threads": threads,
        "gil": gil_section(window_data, threads, engine_thread),
        "client": _client_section(load),
        "http": {**http, "measured_s": duration_s},
    }


def _no_split_reason(
    plan: TargetPlan,
    sampling: SamplingResult | None,
    window: RemoteWindow | None,
    window_data: dict[str, Any] | None,
) -> str:
    """Why the server's time has no split: the plan's reason, else the sampler's and the window's failures."""
    reason = plan.split_unavailable
    if reason is None:
        reasons = [sampling.get("reason")] if sampling and sampling.get("status") != "ok" else []
        if window is not None and window_data is None:
            reasons.append(window.error)
        reason = "; ".join(filter(None, reasons)) or "nothing measured the server's time"
    return reason


def _tree_section(plan: TargetPlan) -> TargetTree | None:
    """target.tree: the server's process tree's root and how it was found (None without a pid)."""
    if plan.pid is None:
        return None
    return {
        "root": plan.pid,
        "source": plan.pid_source,
        "note": plan.tree.note if plan.tree else None,
        "listeners": plan.tree.listeners if plan.tree else [],
    }


def _client_section(load: HttpLoad) -> TargetClient:
    """target.client: the load generator's own CPU and lateness, and whether it may have limited the load."""
    wall_s = (load.end_ns - load.start_ns) / 1e9
    lags = [
        (r.send_ns - r.scheduled_ns) / 1e6
        for r in load.records
        if not r.request.warmup and r.send_ns is not None and r.scheduled_ns is not None
    ]
    lag = latency_summary(lags)
    busy = load.client_cpu_s / wall_s if wall_s > 0 else 0.0
    bottleneck = busy >= CLIENT_BUSY_FRACTION or (lag["p99"] or 0.0) > CLIENT_LAG_MS
    return {
        "cpu_s": load.client_cpu_s,
        "loop_cpu_s": load.loop_cpu_s,
        "wall_s": wall_s,
        "cpu_fraction_of_one_core": busy,
        "python_threads": load.threads,
        "peak_in_flight": load.peak_in_flight,
        "schedule_lag_ms": lag,
        "bottleneck": bottleneck,
        "note": (
            f"the client used {busy:.0%} of one core and sent its requests {lag['p99'] or 0:.1f} ms late at p99: "
            + ("it may have limited the load" if bottleneck else "it was not the bottleneck")
        ),
    }
