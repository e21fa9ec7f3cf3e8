"""Turn what a session saw into the run directory's tables and result: per-request rows, per-step rows, config."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypedDict

import pandas as pd

from ...scenarios.loadgen import RequestSpec
from ...scenarios.spec import ScenarioSpec
from ..analysis.metrics import RequestTiming
from ..rundir.atomic import write_atomic, write_json_atomic, write_text_atomic
from ..rundir.results import (
    GPU_TIMELINE_COLUMNS,
    KERNEL_EVENT_COLUMNS,
    SAMPLE_LABEL_COLUMNS,
    SPAN_COLUMNS,
    RunResult,
)
from ..rundir.schema import Config

if TYPE_CHECKING:
    from ...engine.engine import Engine
    from ...engine.loader import LoadedModel
    from ..collectors.kernels import KernelEventRow, KernelResult
    from ..collectors.registry import CollectorResults
    from ..collectors.sampling import SamplingResult
    from ..collectors.spans import RecordingTracer
    from .builder import BuiltEngine
    from .options import EngineOptions

# The engine's phase spans, one `<phase>_ms` column each in steps.csv.
STEP_PHASES = ("queue", "scheduler", "kv_alloc", "prepare", "model", "sampler", "detokenizer")


class FinishedOutput(Protocol):
    """A request's final output as the tables read it: engine.sequence.RequestOutput, or session.drive.RunOutput."""

    @property
    def request_id(self) -> int: ...
    @property
    def finish_reason(self) -> str: ...
    @property
    def error(self) -> str | None: ...
    @property
    def arrival_ns(self) -> int: ...
    @property
    def scheduled_ns(self) -> int | None: ...
    @property
    def first_token_ns(self) -> int | None: ...
    @property
    def finish_ns(self) -> int | None: ...
    @property
    def token_ns(self) -> Sequence[int]: ...
    @property
    def prompt_tokens(self) -> int: ...
    @property
    def output_tokens(self) -> int: ...
    @property
    def num_preemptions(self) -> int: ...


class RequestRow(TypedDict):
    """One row of requests.csv: a request the engine served or refused, its timestamps (ns) and latencies (ms)."""

    request_id: int | None  # None: refused before the engine gave it an id
    index: int
    priority: int
    warmup: bool
    ok: bool
    finish_reason: str | None  # None: a server's request that ended well without saying why
    error: str | None
    prompt_tokens: int
    output_tokens: int
    arrival_ns: int
    scheduled_ns: int | None
    first_token_ns: int | None
    finish_ns: int | None
    ttft_ms: float | None
    tpot_ms: float | None
    e2e_ms: float | None
    queue_ms: float | None
    num_preemptions: int | None  # None: a server's run, which cannot see them
    token_ns: str  # every output token's time, space-separated


def request_tables(
    requests: list[RequestSpec],
    outputs: Mapping[int, FinishedOutput],
    rejected: dict[int, tuple[int, str]] | None = None,
) -> tuple[list[RequestTiming], list[RequestRow]]:
    """The metrics' per-request timings and requests.csv's rows: every request the engine served or refused
    (`rejected`: index -> (when, why)); only requests never submitted (a stopped load) have no row."""
    timings: list[RequestTiming] = []
    rows: list[RequestRow] = []
    for request in requests:
        output = outputs.get(request.index)
        if output is None:
            if rejected and request.index in rejected:
                when, why = rejected[request.index]
                timings.append(
                    RequestTiming(
                        request_id=-1,
                        arrival_ns=when,
                        scheduled_ns=None,
                        first_token_ns=None,
                        finish_ns=None,
                        ok=False,
                        warmup=request.warmup,
                    )
                )
                rows.append(_rejected_row(request, when, why))
            continue
        ok = output.finish_reason in ("stop", "length")
        timings.append(
            RequestTiming(
                request_id=output.request_id,
                arrival_ns=output.arrival_ns,
                scheduled_ns=output.scheduled_ns,
                first_token_ns=output.first_token_ns,
                token_ns=list(output.token_ns),
                finish_ns=output.finish_ns,
                prompt_tokens=output.prompt_tokens,
                output_tokens=output.output_tokens,
                ok=ok,
                warmup=request.warmup,
            )
        )
        rows.append(_request_row(request, output, ok))
    return timings, rows


def _request_row(request: RequestSpec, output: FinishedOutput, ok: bool) -> RequestRow:
    ms = 1e-6
    ttft = (output.first_token_ns - output.arrival_ns) * ms if output.first_token_ns else None
    e2e = (output.finish_ns - output.arrival_ns) * ms if output.finish_ns else None
    n = output.output_tokens
    return {
        "request_id": output.request_id,
        "index": request.index,
        "priority": request.priority,
        "warmup": request.warmup,
        "ok": ok,
        "finish_reason": output.finish_reason,
        "error": output.error,
        "prompt_tokens": output.prompt_tokens,
        "output_tokens": n,
        "arrival_ns": output.arrival_ns,
        "scheduled_ns": output.scheduled_ns,
        "first_token_ns": output.first_token_ns,
        "finish_ns": output.finish_ns,
        "ttft_ms": ttft,
        "tpot_ms": (e2e - ttft) / (n - 1) if (ttft is not None and e2e is not None and n > 1) else None,
        "e2e_ms": e2e,
        "queue_ms": (output.scheduled_ns - output.arrival_ns) * ms if output.scheduled_ns else None,
        "num_preemptions": output.num_preemptions,
        "token_ns": " ".join(str(t) for t in output.token_ns),
    }


def _rejected_row(request: RequestSpec, when_ns: int, why: str) -> RequestRow:
    return {
        "request_id": None,
        "index": request.index,
        "priority": request.priority,
        "warmup": request.warmup,
        "ok": False,
        "finish_reason": "rejected",
        "error": why,
        "prompt_tokens": request.prompt_tokens,
        "output_tokens": 0,
        "arrival_ns": when_ns,
        "scheduled_ns": None,
        "first_token_ns": None,
        "finish_ns": None,
        "ttft_ms": None,
        "tpot_ms": None,
        "e2e_ms": None,
        "queue_ms": None,
        "num_preemptions": 0,
        "token_ns": "",
    }


def step_table(engine: Engine, tracer: RecordingTracer | None) -> pd.DataFrame:
    """steps.csv: the engine's step records, plus each phase's span time in that step when traced."""
    rows = [asdict(record) if is_dataclass(record) else dict(record) for record in engine.step_records]
    steps = pd.DataFrame(rows)
    if not steps.empty and "duration_ms" not in steps:
        steps["duration_ms"] = (steps["end_ns"] - steps["start_ns"]) / 1e6
    if tracer is not None and not steps.empty:
        phases = tracer.step_phase_table()  # {step index: {phase: ns}}
        for phase in STEP_PHASES:
            steps[f"{phase}_ms"] = [phases.get(step, {}).get(phase, 0) / 1e6 for step in steps["step"]]
    return steps


def run_config(
    options: EngineOptions,
    loaded: LoadedModel,
    built: BuiltEngine,
    scenario: ScenarioSpec,
    *,
    profile: str,
    requests: int,
    collectors: list[str],
    duration_s: float | None,
    injections: list[str] | None = None,
    verify: bool | None = None,
) -> Config:
    """result.json's `config`: what was run, with which twins really on and which asked for (`injections` and
    `verify` only where given)."""
    config: Config = {
        "model": options.model,
        "model_source": loaded.source,
        "dtype": options.dtype,
        "device": options.device,
        "graphs": options.graphs,
        "native": sorted(built.native_active),
        "native_requested": sorted(options.native),
        "scenario": scenario.name,
        "seed": options.seed,
        "requests": requests,
        "duration_s": duration_s,
        "profile": profile,
        "collectors": collectors,
        "engine": built.engine_config_dict(),
    }
    if injections is not None:
        config["injections"] = injections
    if verify is not None:
        config["verify"] = verify
    return config


def write_samples(out_dir: Path, collector_results: CollectorResults, result: RunResult) -> None:
    """Keep py-spy's raw collapsed stacks beside the result (reports turn them into speedscope.json and
    the flame graph), and each stack's classification (sample_labels.csv): reports may not classify."""
    sampling: SamplingResult = collector_results.get("sampling") or {}
    raw = sampling.get("raw_text")
    if raw:
        write_text_atomic(Path(out_dir) / "samples.txt", raw)
        result.files["samples"] = "samples.txt"
        labels = sample_labels(raw, engine_thread_id=sampling.get("engine_thread_id"))
        write_atomic(Path(out_dir) / "sample_labels.csv", lambda handle: labels.to_csv(handle, index=False))
        result.files["sample_labels"] = "sample_labels.csv"
        write_json_atomic(Path(out_dir) / "result.json", result.to_dict())


def sample_labels(raw: str, *, engine_thread_id: int | None = None) -> pd.DataFrame:
    """sample_labels.csv: per line of samples.txt (1-based) its thread, whether that is the engine
    thread, and the category, component and dispatch flag the breakdown gave its samples.

    The sampling collector classifies with classify()'s defaults (collectors/registry.py passes them),
    so the labels here are the ones its thread totals were counted from."""
    from ...engine.engine import ENGINE_THREAD_NAME
    from ..analysis.classify import classify, parse_line

    rows = []
    for number, line in enumerate(raw.splitlines(), start=1):
        stack = parse_line(line)
        if stack is None or not stack.frames:
            continue
        label = classify(stack)
        engine = (
            stack.thread_id == engine_thread_id
            if engine_thread_id
            else stack.thread_name == ENGINE_THREAD_NAME
        )
        rows.append(
            {
                "line": number,
                "thread_id": stack.thread_id,
                "thread_name": stack.thread_name or "",
                "engine_thread": bool(engine),
                "category": label.category,
                "component": label.component or "",
                "dispatch": label.dispatch,
                "samples": stack.count,
            }
        )
    return pd.DataFrame(rows, columns=list(SAMPLE_LABEL_COLUMNS))


# A deep run's windows hold ~5,000 ops a step; beyond this many the trace keeps whole windows, evenly spread.
MAX_KERNEL_EVENTS = 250_000


def write_trace_tables(
    out_dir: Path,
    tracer: RecordingTracer | None,
    collector_results: CollectorResults,
    result: RunResult,
    *,
    gpu_timeline: list[tuple[int, str, int, int]] | None = None,
) -> None:
    """spans.csv (the engine thread's spans at their real times), after a deep run kernel_events.csv
    (torch.profiler's ops on the engine thread) and on a GPU gpu_timeline.csv (the device's work per span,
    from CUDA events), so trace.json places them where they happened."""
    written = False
    if gpu_timeline:
        table = pd.DataFrame(gpu_timeline, columns=list(GPU_TIMELINE_COLUMNS))
        write_atomic(Path(out_dir) / "gpu_timeline.csv", lambda handle: table.to_csv(handle, index=False))
        result.files["gpu_timeline"] = "gpu_timeline.csv"
        written = True
    spans = span_table(tracer)
    if not spans.empty:
        write_atomic(Path(out_dir) / "spans.csv", lambda handle: spans.to_csv(handle, index=False))
        result.files["spans"] = "spans.csv"
        written = True
    kernel_result: KernelResult = collector_results.get("kernels") or {}
    kernels = kernel_event_table(kernel_result.get("timeline") or [])
    if not kernels.empty:
        write_atomic(Path(out_dir) / "kernel_events.csv", lambda handle: kernels.to_csv(handle, index=False))
        result.files["kernel_events"] = "kernel_events.csv"
        written = True
    if written:
        write_json_atomic(Path(out_dir) / "result.json", result.to_dict())


def span_table(tracer: RecordingTracer | None) -> pd.DataFrame:
    """spans.csv: every span of the engine thread (step, name, start_ns, end_ns, depth), in start order."""
    from ...engine.engine import ENGINE_THREAD_NAME

    rows = []
    for state in tracer.thread_states() if tracer is not None else []:
        if state.thread.name != ENGINE_THREAD_NAME:
            continue
        for name, start, end, _self, _cpu, depth, step in state.events.records():
            rows.append((step, name, start, end, depth))
    table = pd.DataFrame(rows, columns=list(SPAN_COLUMNS))
    return table.sort_values(["start_ns", "depth"], kind="stable").reset_index(drop=True)


def kernel_event_table(timeline: list[KernelEventRow], limit: int = MAX_KERNEL_EVENTS) -> pd.DataFrame:
    """kernel_events.csv from the kernel collector's timeline; over `limit` rows, every k-th window is kept."""
    table = pd.DataFrame(timeline, columns=list(KERNEL_EVENT_COLUMNS))
    if len(table) > limit:
        windows = sorted(table["window"].unique())
        keep_every = -(-len(table) // limit)
        table = table[table["window"].isin(windows[::keep_every])]
    return table.sort_values(["start_ns", "depth"], kind="stable").reset_index(drop=True)
