"""One profiled session: build the engine, drive a scenario's load through it, collect, and record a RunResult."""

from __future__ import annotations

import datetime as _dt
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from engine.types import SamplingParams
from profiler.rundir.environment import describe_environment
from profiler.rundir.results import RunResult, write_run
from profiler.session.builder import build_engine
from profiler.session.options import EngineOptions
from scenarios.loadgen import LoadRecord, RequestSpec, generate_requests, prompt_text_for, run_load
from scenarios.spec import ScenarioSpec

ENGINE_THREAD_NAME = "infer-prof-engine"
PROFILES = ("off", "default", "deep")
# --native names (native_paths.toggles) -> the breakdown's component names.
NATIVE_COMPONENT_NAMES = {"sampler": "sampler", "kv": "kv_alloc", "scheduler": "scheduler"}


@dataclass
class SessionHooks:
    """Callbacks a face (CLI, tests) can pass in; all optional."""

    on_start: Callable[[int], None] | None = None  # total measured requests
    on_request_done: Callable[[int, int], None] | None = None  # (requests done, output tokens so far)
    message: Callable[[str], None] | None = None
    on_collectors: Callable[[list], None] | None = None  # the started collectors (the in-run overhead A/B)


@dataclass
class SessionOutcome:
    run_dir: Path
    result: RunResult
    requests: pd.DataFrame
    steps: pd.DataFrame
    interrupted: bool = False
    extras: dict[str, Any] = field(default_factory=dict)


class _Ticket:
    """What the load generator waits on: the engine's handle for one request."""

    __slots__ = ("handle", "request")

    def __init__(self, handle, request: RequestSpec) -> None:  # type: ignore[no-untyped-def]
        self.handle = handle
        self.request = request

    def wait(self, timeout: float | None = None) -> object:
        return self.handle.result(timeout=timeout)


def prepare_prompts(requests: list[RequestSpec], tokenizer) -> dict[int, str]:  # type: ignore[no-untyped-def]
    """Each request's prompt text, trimmed so that it encodes to its target token count (user content)."""
    texts = {}
    for request in requests:
        text = prompt_text_for(request)
        ids = tokenizer.encode(text)[: max(1, request.prompt_tokens)]
        texts[request.index] = tokenizer.decode(ids)
    return texts


def run_session(
    options: EngineOptions,
    scenario: ScenarioSpec,
    out_dir: Path,
    *,
    loaded,  # type: ignore[no-untyped-def]  # engine.models.LoadedModel, loaded once per CLI call
    profile: str = "default",
    stop_event: threading.Event | None = None,
    hooks: SessionHooks | None = None,
    native_speedups: dict[str, float] | None = None,
    measured_gains: dict[str, float] | None = None,
    write: bool = True,
    injections: dict[str, Any] | None = None,
    sampling_rate: int | None = None,
) -> SessionOutcome:
    """Run one scenario through a freshly built engine and write its run directory (result.json last)."""
    from profiler.analysis.metrics import compute_metrics, engine_timeline_summary
    from profiler.collectors.registry import default_collectors, spans_record_cpu_time
    from profiler.collectors.spans import RecordingTracer

    hooks = hooks or SessionHooks()
    stop_event = stop_event or threading.Event()
    if profile not in PROFILES:
        from profiler.session.options import OptionError

        raise OptionError(f"--profile={profile!r}: use one of {', '.join(PROFILES)}")
    context = loaded.config.context_length
    requests = generate_requests(scenario, context)
    prompts = prepare_prompts(requests, loaded.tokenizer)

    cpu_clock = time.thread_time_ns if spans_record_cpu_time(profile) else None
    tracer = None if profile == "off" else RecordingTracer(cpu_clock=cpu_clock)
    built = build_engine(loaded, options, tracer=tracer, injections=injections)
    engine = built.engine
    collectors = default_collectors(profile, pid=os.getpid(), tracer=tracer, engine_thread_name=ENGINE_THREAD_NAME,
                                    sampling_rate=sampling_rate) if tracer else []  # fmt: skip

    done = {"requests": 0, "tokens": 0}
    done_lock = threading.Lock()

    tickets: dict[int, _Ticket] = {}

    def submit(request: RequestSpec) -> _Ticket:
        params = SamplingParams(**request.sampling)
        handle = engine.submit(prompts[request.index], params, chat=request.chat, priority=request.priority)
        tickets[request.index] = ticket = _Ticket(handle, request)
        return ticket

    def on_done(record: LoadRecord) -> None:
        if record.request.warmup:
            return
        tokens = 0
        if record.ticket is not None and record.error is None:
            tokens = len(record.ticket.handle.result(timeout=0).token_ids)
        with done_lock:
            done["requests"] += 1
            done["tokens"] += tokens
            counts = (done["requests"], done["tokens"])
        if hooks.on_request_done:
            hooks.on_request_done(*counts)

    measured_total = sum(not request.warmup for request in requests)
    interrupted = False
    engine.start()
    for collector in collectors:
        collector.start()
    wall_start = time.perf_counter_ns()
    if hooks.on_collectors:
        hooks.on_collectors(collectors)
    if hooks.on_start:
        hooks.on_start(measured_total)
    try:
        load = run_load(requests, submit, mode=scenario.mode, clients=scenario.clients,
                        duration_s=scenario.duration_s, stop_event=stop_event, on_done=on_done)  # fmt: skip
    except KeyboardInterrupt:
        interrupted = True
        load = None
    finally:
        # Ctrl-C: no new submissions (stop_event), abort what is in flight, still record what finished.
        engine.shutdown(abort=interrupted or stop_event.is_set())
        wall_end = time.perf_counter_ns()
        for collector in reversed(collectors):
            collector.stop()
        if injections:
            from profiler.checks.injections import close_injections

            close_injections(built.components)
    interrupted = interrupted or bool(load and load.stopped_early)

    outputs = {index: ticket.handle.result(timeout=5.0) for index, ticket in tickets.items()}
    timings, request_rows = _request_tables(requests, outputs)
    measure_start = load.start_ns if load else wall_start
    measure_end = max([row["finish_ns"] for row in request_rows if row["finish_ns"]] or [wall_end])
    duration_s = max(1e-9, (measure_end - measure_start) / 1e9)
    metrics = compute_metrics(timings, duration_s=duration_s, slos=scenario.slo.as_dict())
    metrics["duration_s"] = duration_s
    metrics["slo"] = scenario.slo.as_dict()  # goodput's definition travels with its value
    if load is not None:
        metrics["loadgen_schedule_lag_ms"] = load.schedule_lag_ms()

    steps = _step_table(engine, tracer)
    collector_results = {collector.name: collector.result() for collector in collectors}
    statuses = {name: {"status": res.get("status", "ok"), "reason": res.get("reason")} for name, res in collector_results.items()}
    breakdown = verdict = overhead = None
    if tracer is not None:
        from profiler.analysis.breakdown import build_breakdown
        from profiler.analysis.diagnose import diagnose
        from profiler.overhead.costs import overhead_section

        # C twins' spans are native code, not interpreter time: the breakdown counts them as "other".
        native_components = [NATIVE_COMPONENT_NAMES[name] for name in built.native_active if name in NATIVE_COMPONENT_NAMES]
        breakdown = build_breakdown(collector_results, engine_thread_name=ENGINE_THREAD_NAME, wall_ns=wall_end - wall_start,
                                    native_components=native_components)  # fmt: skip
        verdict = diagnose(breakdown, native_speedups=native_speedups, measured_gains=measured_gains, collectors=statuses)
        # The collectors' self-measured costs; benchmarks/bench_overhead.py measures the real A/B ratio.
        overhead = overhead_section(collector_results, wall_ns=wall_end - wall_start)

    stats = engine.stats()
    engine_section = {**stats, **engine_timeline_summary(steps.to_dict("records"))}
    result = RunResult(
        config={
            "model": options.model, "model_source": loaded.source, "dtype": options.dtype,
            "native": sorted(built.native_active), "native_requested": sorted(options.native),
            "scenario": scenario.name, "seed": options.seed, "requests": measured_total,
            "duration_s": scenario.duration_s, "profile": profile,
            "collectors": [collector.name for collector in collectors],
            "engine": built.engine_config_dict(), "injections": sorted((injections or {}).keys()),
            "verify": False,
        },  # fmt: skip
        environment=describe_environment(),
        scenario=scenario.to_dict(),
        metrics=metrics,
        engine=engine_section,
        breakdown=breakdown,
        verdict=verdict,
        overhead=overhead,
        collectors=statuses,
        partial=interrupted,
        partial_reason="interrupted (Ctrl-C): in-flight requests were aborted" if interrupted else None,
    )
    requests_df = pd.DataFrame(request_rows)
    outcome = SessionOutcome(out_dir, result, requests_df, steps, interrupted=interrupted,
                             extras={"collector_results": collector_results, "built": built})  # fmt: skip
    if write:
        write_run(out_dir, result, requests_df, steps)
        _write_samples(out_dir, collector_results, result)
    return outcome


def _request_tables(requests: list[RequestSpec], outputs: dict[int, Any]):  # type: ignore[no-untyped-def]
    from profiler.analysis.metrics import RequestTiming

    timings, rows = [], []
    for request in requests:
        output = outputs.get(request.index)
        if output is None:
            continue
        ok = output.finish_reason in ("stop", "length")
        timing = RequestTiming(
            request_id=output.request_id, arrival_ns=output.arrival_ns, scheduled_ns=output.scheduled_ns,
            first_token_ns=output.first_token_ns, token_ns=list(output.token_ns), finish_ns=output.finish_ns,
            prompt_tokens=len(output.prompt_token_ids), output_tokens=len(output.token_ids), ok=ok,
            warmup=request.warmup,
        )  # fmt: skip
        timings.append(timing)
        ms = 1e-6
        ttft = (output.first_token_ns - output.arrival_ns) * ms if output.first_token_ns else None
        e2e = (output.finish_ns - output.arrival_ns) * ms if output.finish_ns else None
        n = len(output.token_ids)
        rows.append({
            "request_id": output.request_id, "index": request.index, "priority": request.priority,
            "warmup": request.warmup, "ok": ok, "finish_reason": output.finish_reason, "error": output.error,
            "prompt_tokens": len(output.prompt_token_ids), "output_tokens": n, "arrival_ns": output.arrival_ns,
            "scheduled_ns": output.scheduled_ns, "first_token_ns": output.first_token_ns, "finish_ns": output.finish_ns,
            "ttft_ms": ttft, "tpot_ms": (e2e - ttft) / (n - 1) if (ttft is not None and e2e is not None and n > 1) else None,
            "e2e_ms": e2e,
            "queue_ms": (output.scheduled_ns - output.arrival_ns) * ms if output.scheduled_ns else None,
            "num_preemptions": output.num_preemptions, "token_ns": " ".join(str(t) for t in output.token_ns),
        })  # fmt: skip
    return timings, rows


def _step_table(engine, tracer) -> pd.DataFrame:  # type: ignore[no-untyped-def]
    from dataclasses import asdict, is_dataclass

    rows = [asdict(record) if is_dataclass(record) else dict(record) for record in engine.step_records]
    steps = pd.DataFrame(rows)
    if not steps.empty and "duration_ms" not in steps:
        steps["duration_ms"] = (steps["end_ns"] - steps["start_ns"]) / 1e6
    if tracer is not None and not steps.empty:
        phases = tracer.step_phase_table()  # {step index: {phase: ns}}
        for phase in ("queue", "scheduler", "kv_alloc", "model", "sampler", "detokenize"):
            steps[f"{phase}_ms"] = [phases.get(step, {}).get(phase, 0) / 1e6 for step in steps["step"]]
    return steps


def _write_samples(out_dir: Path, collector_results: dict[str, Any], result: RunResult) -> None:
    """Keep py-spy's raw collapsed stacks beside the result: reports turn them into speedscope.json."""
    from profiler.rundir.atomic import write_text_atomic

    sampling = collector_results.get("sampling") or {}
    raw = sampling.get("raw_text")
    if raw:
        write_text_atomic(Path(out_dir) / "samples.txt", raw)
        result.files["samples"] = "samples.txt"
        from profiler.rundir.atomic import write_json_atomic

        write_json_atomic(Path(out_dir) / "result.json", result.to_dict())


def default_run_dir(scenario_name: str, root: Path = Path("runs")) -> Path:
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return root / f"{stamp}-{scenario_name}"
