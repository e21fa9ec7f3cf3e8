"""One profiled session: prepare the engine and collectors, drive a scenario's load through it, record a RunResult."""

from __future__ import annotations

import datetime as _dt
import os
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

import pandas as pd

from ...engine.engine import ENGINE_THREAD_NAME
from ...engine.setup_thread import run_on_setup_thread
from ...scenarios.loadgen import RequestSpec, generate_requests, prompt_text_for
from ...scenarios.spec import ScenarioSpec
from ..collectors.base import Collector
from ..collectors.device_time import DeviceTimeCollector
from ..collectors.kernels import KernelCollector, KernelResult, KernelWindow
from ..collectors.registry import (
    PROFILES,
    CollectorResults,
    collectors_section,
    default_collectors,
    spans_record_cpu_time,
)
from ..collectors.registry import results as collector_results_of
from ..collectors.spans import RecordingTracer
from ..replay.recorder import WorkloadLog, install_recorder
from ..rundir.environment import describe_environment
from ..rundir.results import RunResult, write_run
from ..rundir.schema import (
    Breakdown,
    CollectorStatus,
    Config,
    EngineFigures,
    GpuTime,
    Health,
    Interval,
    Metrics,
    Overhead,
    Replay,
    Verdict,
)
from .builder import BuiltEngine, build_engine
from .drive import Drive, drive_load
from .gpu_time import gpu_time_section
from .options import EngineOptions, OptionError
from .record import (
    RequestRow,
    request_tables,
    run_config,
    step_table,
    write_samples,
    write_trace_tables,
)
from .until import Look, Stopper, round_maker, steps_judge

if TYPE_CHECKING:
    from ...engine.engine import Engine
    from ...engine.loader import LoadedModel
    from ...engine.tokenizer import Tokenizer
    from ..analysis.breakdown import StepsRow
    from ..checks.injections import Injections


@dataclass
class SessionHooks:
    """Callbacks a face (CLI, tests) can pass in; all optional."""

    on_start: Callable[[int], None] | None = None  # total measured requests
    on_request_done: Callable[[int, int], None] | None = None  # (requests done, output tokens so far)
    message: Callable[[str], None] | None = None
    on_collectors: Callable[[list[Collector]], None] | None = None  # the started collectors (the in-run A/B)
    on_engine: Callable[[Engine], None] | None = (
        None  # the built engine, before it starts (--verify's twin switch)
    )
    # `--until resolved`: each look, and the measured requests' new total
    on_look: Callable[[Look], None] | None = None
    on_more: Callable[[int], None] | None = None


class SessionExtras(TypedDict, total=False):
    """What a session kept beside its RunResult for the files written after it and for faces that look deeper."""

    # {collector name: its result()} (profiler.collectors.registry.results)
    collector_results: CollectorResults
    built: BuiltEngine
    gpu_timeline: list[tuple[int, str, int, int]]  # the device timer's (step, span, start ns, end ns)


@dataclass
class SessionOutcome:
    run_dir: Path
    result: RunResult
    requests: pd.DataFrame
    steps: pd.DataFrame
    interrupted: bool = False
    extras: SessionExtras = field(default_factory=lambda: SessionExtras())


@dataclass
class Prepared:
    """Everything built before the load starts: requests and prompts, the engine, the tracer and collectors."""

    requests: list[RequestSpec]
    prompts: dict[int, str]
    built: BuiltEngine
    tracer: RecordingTracer | None
    collectors: list[Collector]
    workload: WorkloadLog | None = None  # what the engine asked of its control components (traced runs)


def prepare_prompts(requests: list[RequestSpec], tokenizer: Tokenizer) -> dict[int, str]:
    """Each request's prompt text, trimmed so that it encodes to its target token count (user content)."""
    texts: dict[int, str] = {}
    for request in requests:
        ids = tokenizer.encode(prompt_text_for(request))[: max(1, request.prompt_tokens)]
        texts[request.index] = tokenizer.decode(ids)
    return texts


def run_session(
    options: EngineOptions,
    scenario: ScenarioSpec,
    out_dir: Path,
    *,
    loaded: LoadedModel,  # loaded once per CLI call
    profile: str = "default",
    stop_event: threading.Event | None = None,
    hooks: SessionHooks | None = None,
    native_speedups: dict[str, float] | None = None,
    measured_gains: dict[str, float] | None = None,
    write: bool = True,
    injections: Injections | None = None,
    sampling_rate: int | None = None,
    replay: bool = True,
    until_max_time_s: float | None = None,
) -> SessionOutcome:
    """Run one scenario through a freshly built engine and write its run directory (result.json last);
    `replay`: record the control workload and time both twins on it after the run (traced runs only);
    `until_max_time_s`: go on in whole rounds of the scenario until the answer is resolved or this many seconds
    have passed (profiler.session.until)."""
    hooks = hooks or SessionHooks()
    prepared = prepare_session(
        options,
        scenario,
        loaded,
        profile=profile,
        injections=injections,
        sampling_rate=sampling_rate,
        replay=replay,
        resolve=until_max_time_s is not None,
    )
    stopper = (
        _stopper(prepared, until_max_time_s, hooks)
        if until_max_time_s is not None and prepared.tracer
        else None
    )
    if hooks.on_engine:
        hooks.on_engine(prepared.built.engine)
    drive = _drive_session(
        prepared, scenario, loaded, stop_event or threading.Event(), hooks, stopper, injections
    )
    _settle_replay(prepared, drive, hooks)
    outcome = record_session(
        options,
        scenario,
        loaded,
        prepared,
        drive,
        out_dir,
        profile=profile,
        native_speedups=native_speedups,
        measured_gains=measured_gains,
        injections=injections,
        stopper=stopper,
    )
    if write:
        write_outcome(out_dir, outcome, prepared.tracer)
    return outcome


def _drive_session(
    prepared: Prepared,
    scenario: ScenarioSpec,
    loaded: LoadedModel,
    stop_event: threading.Event,
    hooks: SessionHooks,
    stopper: Stopper | None,
    injections: Injections | None,
) -> Drive:
    """Drive the scenario's load through the prepared engine, then close the injections (a failed drive included)."""
    try:
        return drive_load(
            prepared.built.engine,
            scenario,
            prepared.requests,
            prepared.prompts,
            prepared.collectors,
            stop_event=stop_event,
            on_request_done=hooks.on_request_done,
            on_started=_on_started(prepared, hooks, stopper),
            next_round=_next_round(prepared, scenario, loaded, stopper, hooks) if stopper else None,
        )
    finally:
        if injections:
            from ..checks.injections import close_injections

            close_injections(prepared.built.components)


def _on_started(prepared: Prepared, hooks: SessionHooks, stopper: Stopper | None) -> Callable[[], None]:
    """What runs once the engine and collectors are up: the stopper's clock, then the face's hooks."""
    measured_total = sum(not request.warmup for request in prepared.requests)

    def on_started() -> None:
        if stopper is not None:
            stopper.start()
        if hooks.on_collectors:
            hooks.on_collectors(prepared.collectors)
        if hooks.on_start:
            hooks.on_start(measured_total)

    return on_started


def _settle_replay(prepared: Prepared, drive: Drive, hooks: SessionHooks) -> None:
    """A stopped run drops its replay (its partial result has no predictions' speedups); a finished one says the
    replay is coming."""
    if drive.interrupted:
        prepared.workload = None
    elif prepared.workload is not None and hooks.message:
        hooks.message("timing the C twins on the run's own work")


def write_outcome(out_dir: Path, outcome: SessionOutcome, tracer: RecordingTracer | None) -> None:
    """The run directory: result.json and its tables, then the collectors' samples and the trace tables."""
    write_run(out_dir, outcome.result, outcome.requests, outcome.steps)
    write_samples(out_dir, outcome.extras["collector_results"], outcome.result)
    write_trace_tables(
        out_dir,
        tracer,
        outcome.extras["collector_results"],
        outcome.result,
        gpu_timeline=outcome.extras.get("gpu_timeline"),
    )


def prepare_session(
    options: EngineOptions,
    scenario: ScenarioSpec,
    loaded: LoadedModel,
    *,
    profile: str,
    injections: Injections | None = None,
    sampling_rate: int | None = None,
    replay: bool = True,
    resolve: bool = False,
) -> Prepared:
    """The scenario's requests and prompts, a fresh engine with the profile's tracer, and its collectors."""
    if profile not in PROFILES:
        raise OptionError(f"--profile={profile!r}: use one of {', '.join(PROFILES)}")
    requests = generate_requests(scenario, loaded.config.context_length)
    prompts = prepare_prompts(requests, loaded.tokenizer)
    cpu_clock = time.thread_time_ns if spans_record_cpu_time(profile) else None
    tracer = None if profile == "off" else RecordingTracer(cpu_clock=cpu_clock)
    built = build_engine(loaded, options, tracer=tracer, injections=injections)
    collectors = (
        default_collectors(
            profile,
            pid=os.getpid(),
            tracer=tracer,
            engine_thread_name=ENGINE_THREAD_NAME,
            sampling_rate=sampling_rate,
            device=options.device,
            resolve=resolve,
        )
        if tracer
        else []
    )
    # Traced runs keep their control workload, replayed after the run to measure the C twins' speedups on it.
    workload = install_recorder(built.engine) if tracer is not None and replay else None
    return Prepared(requests, prompts, built, tracer, collectors, workload)


def record_session(
    options: EngineOptions,
    scenario: ScenarioSpec,
    loaded: LoadedModel,
    prepared: Prepared,
    drive: Drive,
    out_dir: Path,
    *,
    profile: str,
    native_speedups: dict[str, float] | None,
    measured_gains: dict[str, float] | None,
    injections: Injections | None,
    stopper: Stopper | None = None,
) -> SessionOutcome:
    """The run's metrics, steps, breakdown and verdict as one RunResult (not yet written)."""
    request_rows, metrics, window = _measured(prepared, drive, scenario)
    engine = prepared.built.engine
    steps = step_table(engine, prepared.tracer)
    collector_results = collector_results_of(prepared.collectors)
    statuses = collectors_section(prepared.collectors)  # after the results: a summary that failed says so
    health = _health(drive, metrics, scenario, request_rows)
    analysis = _session_analysis(
        prepared,
        drive,
        collector_results,
        statuses,
        steps,
        health,
        options,
        stopper,
        native_speedups,
        measured_gains,
    )
    device_timer = next((c for c in prepared.collectors if isinstance(c, DeviceTimeCollector)), None)
    gpu_time = _gpu_time(prepared, device_timer, collector_results, request_rows, window, analysis)
    result = RunResult(
        config=_session_config(options, scenario, loaded, prepared, profile, injections),
        environment=describe_environment(),
        scenario=scenario.to_dict(),
        metrics=metrics,
        engine={**engine_section(engine, steps), "heap_trims": drive.heap_trims},
        collectors=statuses,
        partial=drive.interrupted,
        partial_reason="stopped (Ctrl-C or SIGTERM): in-flight requests were aborted"
        if drive.interrupted
        else None,
        breakdown=analysis.breakdown,
        replay=analysis.replay,
        verdict=analysis.verdict,
        overhead=analysis.overhead,
        health=health,
        gpu_time=gpu_time,
    )
    extras: SessionExtras = {"collector_results": collector_results, "built": prepared.built}
    if gpu_time is not None and device_timer is not None:  # a GPU split needs the device timer's pairs
        extras["gpu_timeline"] = device_timer.timeline()
    return SessionOutcome(
        out_dir, result, pd.DataFrame(request_rows), steps, interrupted=drive.interrupted, extras=extras
    )


def _session_analysis(
    prepared: Prepared,
    drive: Drive,
    collector_results: CollectorResults,
    statuses: dict[str, CollectorStatus],
    steps: pd.DataFrame,
    health: Health,
    options: EngineOptions,
    stopper: Stopper | None,
    native_speedups: dict[str, float] | None,
    measured_gains: dict[str, float] | None,
) -> Analysis:
    """A traced run's analysis (an untraced run's is empty), its verdict with the stopper's record where the run
    went on until resolved."""
    analysis = (
        _analyse(
            prepared,
            collector_results,
            statuses,
            drive.wall_end_ns - drive.wall_start_ns,
            native_speedups,
            measured_gains,
            options,
            steps,
            health,
            confidence=stopper.confidence if stopper is not None else 0.95,
        )
        if prepared.tracer is not None
        else Analysis()
    )
    if stopper is not None and analysis.verdict:
        analysis.verdict["stopping"] = stopper.record()
    return analysis


def _session_config(
    options: EngineOptions,
    scenario: ScenarioSpec,
    loaded: LoadedModel,
    prepared: Prepared,
    profile: str,
    injections: Injections | None,
) -> Config:
    """result.json's `config` of a profiled session."""
    return run_config(
        options,
        loaded,
        prepared.built,
        scenario,
        profile=profile,
        requests=sum(not request.warmup for request in prepared.requests),
        collectors=[collector.name for collector in prepared.collectors],
        duration_s=scenario.duration_s,
        injections=sorted((injections or {}).keys()),
        verify=False,
    )


def _measured(
    prepared: Prepared, drive: Drive, scenario: ScenarioSpec
) -> tuple[list[RequestRow], Metrics, tuple[int, int]]:
    """The request rows, the run's metrics over its measured window, and that window (start ns, end ns): from the
    load's start to the last finish."""
    from ..analysis.metrics import compute_metrics

    timings, request_rows = request_tables(prepared.requests, drive.outputs(), drive.rejected)
    measure_start = drive.load.start_ns if drive.load else drive.wall_start_ns
    measure_end = max([row["finish_ns"] for row in request_rows if row["finish_ns"]] or [drive.wall_end_ns])
    duration_s = max(1e-9, (measure_end - measure_start) / 1e9)
    metrics = compute_metrics(timings, duration_s=duration_s, slos=scenario.slo.as_dict())
    metrics["duration_s"] = duration_s
    metrics["slo"] = scenario.slo.as_dict()  # goodput's definition travels with its value
    if drive.load is not None:
        metrics["loadgen_schedule_lag_ms"] = drive.load.schedule_lag_ms()
    warmups = {request.index for request in prepared.requests if request.warmup}
    metrics["rejected"] = sum(index not in warmups for index in drive.rejected)
    return request_rows, metrics, (measure_start, measure_end)


def _gpu_time(
    prepared: Prepared,
    device_timer: DeviceTimeCollector | None,
    collector_results: CollectorResults,
    request_rows: list[RequestRow],
    window: tuple[int, int],
    analysis: Analysis,
) -> GpuTime | None:
    """result.json's `gpu_time` over the measured window; where there is one, the verdict's `gpu` line from it."""
    gpu_time = gpu_time_section(
        device_timer,
        prepared.tracer,
        request_rows,
        window,
        engine_thread_name=ENGINE_THREAD_NAME,
        kernels=collector_results.get("kernels"),
        nvml=collector_results.get("gpu"),
    )
    if gpu_time is not None:
        from ..analysis.diagnose import gpu_verdict

        if analysis.verdict:
            analysis.verdict["gpu"] = gpu_verdict(gpu_time)
    return gpu_time


def _health(drive: Drive, metrics: Metrics, scenario: ScenarioSpec, rows: list[RequestRow]) -> Health:
    """result.json's `health`: the probe's figures, the offered load (open loop: the measured arrivals' span)."""
    from ..analysis.health import health_section, latency_growth, offered_rate

    scheduled = sorted(
        record.scheduled_ns
        for record in (drive.load.records if drive.load else [])
        if not record.request.warmup and record.scheduled_ns is not None
    )
    span_s = (scheduled[-1] - scheduled[0]) / 1e9 if len(scheduled) > 1 else None
    offered = offered_rate(scenario.to_dict(), len(scheduled), span_s)
    measured = sorted(
        (row for row in rows if not row.get("warmup") and row.get("ok")), key=lambda row: row["arrival_ns"]
    )
    growth = latency_growth([row["e2e_ms"] for row in measured])
    return health_section(drive.health_probe, metrics, scenario.to_dict(), offered_rps=offered, growth=growth)


def engine_section(engine: Engine, steps: pd.DataFrame) -> EngineFigures:
    """result.json's `engine`: its counters after shutdown (so the pool's free count is at the end), the step
    timeline's summary (its steps and preemptions in the counters' places), the graphs' and threads' records."""
    from ..analysis.metrics import engine_timeline_summary

    stats = engine.stats()
    section: EngineFigures = {
        **stats,
        "blocks_free_at_end": stats["blocks_free"],
        **engine_timeline_summary(steps.to_dict("records")),
    }
    graphs = getattr(engine.model, "graphs", None)
    if graphs is not None:
        done = graphs.stats
        section["graphs"] = {
            "replayed_steps": done.replayed_steps,
            "eager_steps": done.eager_steps,
            "captures": done.captures,
            "capture_ms": done.capture_ms,
            "buckets": [list(bucket) for bucket in done.buckets],
        }
    if engine.threads is not None:
        section["threads"] = {**engine.threads.record()}
    return section


@dataclass
class Analysis:
    """A traced run's sections (all None for an untraced run)."""

    breakdown: Breakdown | None = None
    replay: Replay | None = None
    verdict: Verdict | None = None
    overhead: Overhead | None = None


def _analyse(
    prepared: Prepared,
    collector_results: CollectorResults,
    statuses: dict[str, CollectorStatus],
    wall_ns: int,
    native_speedups: dict[str, float] | None,
    measured_gains: dict[str, float] | None,
    options: EngineOptions,
    steps: pd.DataFrame,
    health: Health | None = None,
    confidence: float = 0.95,
) -> Analysis:
    """The breakdown, the verdict and the profiling cost of a traced run; `confidence`: the interpreter share's
    interval's (higher than 95% where a run that stops when resolved looked more than once)."""
    from ..analysis.breakdown import build_breakdown
    from ..analysis.diagnose import diagnose
    from ..analysis.step_shares import step_share_intervals
    from ..overhead.costs import overhead_section
    from ..rundir.twins import expand

    # C twins' spans are native code, not interpreter time: the breakdown counts them as "other".
    breakdown = build_breakdown(
        collector_results,
        engine_thread_name=ENGINE_THREAD_NAME,
        wall_ns=wall_ns,
        native_components=sorted(prepared.built.native_active),
    )
    breakdown["share_intervals"] = step_share_intervals(steps)
    replay = _replay(prepared, health)
    spans_interval = spans_share_interval(
        breakdown, steps, collector_results.get("kernels"), prepared.built.native_active, confidence
    )
    return Analysis(
        breakdown=breakdown,
        replay=replay,
        verdict=diagnose(
            breakdown,
            native_speedups=native_speedups,
            measured_gains=measured_gains,
            collectors=statuses,
            added_costs=_native_added_costs(prepared, options, steps, wall_ns),
            replayed=replay["components"] if replay else None,
            twins_on=expand(prepared.built.native_active),
            health=health,
            spans_interval=spans_interval,
            confidence=confidence,
        ),
        # The collectors' self-measured costs; benchmarks/bench_overhead.py measures the real A/B ratio.
        overhead=overhead_section(collector_results, wall_ns=wall_ns),
    )


def spans_share_interval(
    breakdown: Breakdown,
    steps: pd.DataFrame,
    kernels: KernelResult | None,
    native: Iterable[str],
    confidence: float,
) -> Interval | None:
    """The interpreter share's interval from the steps and kernel windows (profiler.analysis.share_interval), made
    at the level diagnose's verdict_interval wants it; None without a spans split."""
    from ..analysis.diagnose import spans_confidence
    from ..analysis.share_interval import breakdown_share_interval

    spans = (breakdown.get("methods") or {}).get("spans") or {}
    categories = spans.get("categories") or {}
    busy = 1.0 - (categories.get("idle") or 0.0)
    point = (categories.get("interpreter") or 0.0) / busy if busy > 0 else None
    interval = breakdown_share_interval(
        breakdown,
        steps.to_dict("records") if not steps.empty else [],
        kernels,
        point=point,
        native=sorted(native),
        confidence=spans_confidence(breakdown, confidence),
    )
    return interval.record() if interval is not None else None


def _stopper(prepared: Prepared, max_time_s: float, hooks: SessionHooks) -> Stopper:
    """The until-resolved rule over this session's steps so far and its kernel windows closed so far."""
    kernels = next((c for c in prepared.collectors if isinstance(c, KernelCollector)), None)
    engine, tracer = prepared.built.engine, prepared.tracer

    def estimate() -> tuple[list[StepsRow], list[KernelWindow]]:
        steps = step_table(engine, tracer)
        windows = kernels.windows_so_far() if kernels is not None and kernels.status == "ok" else []
        return (steps.to_dict("records") if not steps.empty else []), windows

    def on_look(look: Look) -> None:
        if hooks.on_look:
            hooks.on_look(look)

    return Stopper(max_time_s, steps_judge(estimate, sorted(prepared.built.native_active)), on_look=on_look)


def _replay(prepared: Prepared, health: Health | None = None) -> Replay | None:
    """The C twins timed against the Python twins on this run's recorded work (profiler.replay.replay), the C
    sampler put on the run's clock by the share of a core the engine thread got (health)."""
    if prepared.workload is None:
        return None
    from ..replay.replay import PoolShape, replay_speedups

    engine, config = prepared.built.engine, prepared.built.config
    shape = PoolShape(
        engine.num_blocks, config.block_size, config.max_batch, config.max_batched_tokens, config.policy
    )
    workload = prepared.workload
    # On a thread that exits: the Python sampler's torch ops would leave an OpenMP pool on this one, which
    # slows the engine thread of every later run in the process (see engine/setup_thread.py).
    core_share = ((health or {}).get("engine_thread") or {}).get("core_share")
    return run_on_setup_thread(
        lambda: replay_speedups(workload, shape, core_share=core_share), "infer-prof-replay"
    )


def _native_added_costs(
    prepared: Prepared, options: EngineOptions, steps: pd.DataFrame, wall_ns: int
) -> dict[str, float]:
    """On a GPU with the Python sampler: the logits copies the C sampler would add, as a share of wall time."""
    if options.device == "cpu" or "sampler" in prepared.built.native_active or steps.empty:
        return {}
    from .transfer import sampler_copy_share

    share = sampler_copy_share(
        options.device, steps.to_dict("records"), prepared.built.engine.vocab_size, wall_ns
    )
    return {"sampler": share} if share is not None else {}


def default_run_dir(scenario_name: str, root: Path = Path("runs")) -> Path:
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return root / f"{stamp}-{scenario_name}"


def _next_round(
    prepared: Prepared, scenario: ScenarioSpec, loaded: LoadedModel, stopper: Stopper, hooks: SessionHooks
) -> Callable[[int], list[RequestSpec] | None]:
    """After each round, the stopper's look and the next round's requests (until.round_maker), their prompts
    prepared with the model's tokenizer."""
    return round_maker(
        scenario,
        loaded.config.context_length,
        prepared.requests,
        lambda batch: prepared.prompts.update(prepare_prompts(batch, loaded.tokenizer)),
        stopper,
        hooks.on_more,
    )
