"""Turn what a session saw into the run directory's tables and result: per-request rows, per-step rows, config."""

from __future__ import annotations

from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from profiler.analysis.metrics import RequestTiming
from profiler.rundir.atomic import write_json_atomic, write_text_atomic
from profiler.rundir.results import RunResult
from scenarios.loadgen import RequestSpec
from scenarios.spec import ScenarioSpec

# The engine's phase spans, one `<phase>_ms` column each in steps.csv.
STEP_PHASES = ("queue", "scheduler", "kv_alloc", "prepare", "model", "sampler", "detokenize")


def request_tables(requests: list[RequestSpec], outputs: dict[int, Any]) -> tuple[list[RequestTiming], list[dict[str, Any]]]:
    """The metrics' per-request timings and requests.csv's rows, for every request that has an output."""
    timings, rows = [], []
    for request in requests:
        output = outputs.get(request.index)
        if output is None:
            continue
        ok = output.finish_reason in ("stop", "length")
        timings.append(RequestTiming(
            request_id=output.request_id, arrival_ns=output.arrival_ns, scheduled_ns=output.scheduled_ns,
            first_token_ns=output.first_token_ns, token_ns=list(output.token_ns), finish_ns=output.finish_ns,
            prompt_tokens=len(output.prompt_token_ids), output_tokens=len(output.token_ids), ok=ok,
            warmup=request.warmup,
        ))  # fmt: skip
        rows.append(_request_row(request, output, ok))
    return timings, rows


def _request_row(request: RequestSpec, output: Any, ok: bool) -> dict[str, Any]:
    ms = 1e-6
    ttft = (output.first_token_ns - output.arrival_ns) * ms if output.first_token_ns else None
    e2e = (output.finish_ns - output.arrival_ns) * ms if output.finish_ns else None
    n = len(output.token_ids)
    return {
        "request_id": output.request_id, "index": request.index, "priority": request.priority,
        "warmup": request.warmup, "ok": ok, "finish_reason": output.finish_reason, "error": output.error,
        "prompt_tokens": len(output.prompt_token_ids), "output_tokens": n, "arrival_ns": output.arrival_ns,
        "scheduled_ns": output.scheduled_ns, "first_token_ns": output.first_token_ns, "finish_ns": output.finish_ns,
        "ttft_ms": ttft, "tpot_ms": (e2e - ttft) / (n - 1) if (ttft is not None and e2e is not None and n > 1) else None,
        "e2e_ms": e2e,
        "queue_ms": (output.scheduled_ns - output.arrival_ns) * ms if output.scheduled_ns else None,
        "num_preemptions": output.num_preemptions, "token_ns": " ".join(str(t) for t in output.token_ns),
    }  # fmt: skip


def step_table(engine: Any, tracer: Any) -> pd.DataFrame:
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
    options: Any, loaded: Any, built: Any, scenario: ScenarioSpec, *, profile: str, requests: int,
    collectors: list[str], duration_s: float | None, **extra: Any,
) -> dict[str, Any]:  # fmt: skip
    """result.json's `config`: what was run, with which twins really on and which asked for."""
    return {
        "model": options.model, "model_source": loaded.source, "dtype": options.dtype,
        "native": sorted(built.native_active), "native_requested": sorted(options.native),
        "scenario": scenario.name, "seed": options.seed, "requests": requests, "duration_s": duration_s,
        "profile": profile, "collectors": collectors, "engine": built.engine_config_dict(), **extra,
    }  # fmt: skip


def write_samples(out_dir: Path, collector_results: dict[str, Any], result: RunResult) -> None:
    """Keep py-spy's raw collapsed stacks beside the result: reports turn them into speedscope.json."""
    raw = (collector_results.get("sampling") or {}).get("raw_text")
    if raw:
        write_text_atomic(Path(out_dir) / "samples.txt", raw)
        result.files["samples"] = "samples.txt"
        write_json_atomic(Path(out_dir) / "result.json", result.to_dict())
