"""The one result schema: what `infer-prof run` records and what reports, compare and budget read.

A run directory holds:

    result.json    RunResult below (schema_version, config, environment, scenario, metrics,
                   engine, counters, breakdown, verdict, target, overhead, collectors, files)
    requests.csv   one row per request (REQUEST_COLUMNS); token_ns is a space-separated list
    steps.csv      one row per engine step (STEP_COLUMNS, plus `<phase>_ms` span columns)
    samples.txt    py-spy's raw collapsed stacks (`record --format raw --threads`), when py-spy ran
    sample_labels.csv  one row per stack line of samples.txt (SAMPLE_LABEL_COLUMNS): `line` (1-based),
                   thread_id, thread_name, engine_thread (bool), category, component ("" for none),
                   dispatch (bool), samples: the classification the breakdown counted that stack as
    spans.csv      the engine thread's spans as they ran (SPAN_COLUMNS): step (-1 outside a step),
                   name, start_ns, end_ns, depth (0 = step); when spans were traced
    kernel_events.csv  torch.profiler's ops on the engine thread during --profile deep's windows
                   (KERNEL_EVENT_COLUMNS): window, step, name, start_ns, end_ns (the spans' clock,
                   aligned on each window's step markers), depth (0 = an op called from Python), span

Every file is written atomically, result.json last, so a directory with a result.json is complete.

Section shapes (fractions are of the engine thread's wall time unless said otherwise):

    config       {model, model_source, dtype, native: [..], native_requested: [..], scenario, seed,
                  requests, duration_s, engine: {block_size, num_kv_blocks, max_num_seqs,
                  max_batched_tokens, policy, max_model_len, ...}, collectors: [..],
                  profile: "default"|"deep"|"off"|"counters", injections: [..] (test instruments)}
    environment  {python, platform, cpu_model, cpu_count, torch_version, torch_threads,
                  gpu: null | {name, driver, memory_mib}, git_revision, infer_prof_version}
    metrics      {completed, failed, request_throughput, output_token_throughput,
                  total_token_throughput, goodput, slo, ttft_ms, tpot_ms, itl_ms, e2e_ms, queue_ms,
                  duration_s}   latency metrics are {mean, p50, p90, p99} in ms (null when empty)
    engine       {steps, preemptions, blocks_total, blocks_free_at_end, batch_size: {mean, max},
                  kv_utilization: {mean, max}, fragmentation_slots: {mean, max},
                  heap_trims: {available, interval_s, trims, total_ms} (profiler/session/heap.py)}
    counters     {name: number} noise-free counts from a counting run (config.profile "counters"):
                  steps, generated_tokens, python_calls_per_token, python_calls_per_step,
                  torch_ops_per_step, allocations_per_step, native_calls_per_step,
                  bytes_copied_per_step (see profiler/collectors/counters.py)
    breakdown    {wall_s, methods: {spans: SPLIT, samples: SPLIT | null}, disagreement:
                  {category: percentage points}, component_disagreement: {component: pp},
                  client_threads: SPLIT | null, notes: [str]}
                  SPLIT = {categories: {interpreter, lock, allocation, kernel, idle, other},
                           components: {scheduler, sampler, kv_alloc, prepare, tokenizer, detokenizer,
                                        model_glue, model_kernels, queue}, dispatch: fraction,
                           plus method details: samples, resolution ("python" | "native"),
                           python_leaf, lock_by_component, gil_by_component (samples with native
                           stacks: the lock samples that wait for the GIL), allocation_by_component,
                           kernel_fraction_by_span, fee_fraction_by_span, steps}
                  spans `dispatch` is torch's fee inside ops (deep profile only; null otherwise)
                  a samples SPLIT without native stacks has null interpreter/kernel/allocation
                  (py-spy cannot tell them apart) and one merged `model` component
    verdict      {category, component, share, interpreter_share, rule, reasons: [str],
                  predictions: {component: {share, native_speedup, native_speedup_low | null,
                                            native_speedup_high | null, speedup_source: "replay" |
                                            "microbenchmark" | null, predicted_gain,
                                            predicted_gain_low | null, predicted_gain_high | null,
                                            measured_gain | null}}, blind_spots: [str],
                  source: "spans" | "samples", verify (after --verify): {method, python_runs,
                  python_spread, components: {component: {share, native_speedup, predicted_gain,
                  measured_gain, mix_matched_gain, agreement, batch_size_mean, void, run_dir, ...;
                  method "in-run" (the sampler: measured at the same kinds of step): measured_low/high,
                  predicted_within, half_width, band (+-20% of predicted_gain), resolves (half_width <=
                  band: the interval can judge the prediction), busy_gain/low/high, mix_coverage,
                  parts: {phase: part of the gain}, own_gain/low/high (the twin's own phase's part
                  with its interval), own_agreement, own_within, pairs, units (resampled: unit_blocks
                  blocks of block_steps steps each), steps, switches, turns}},
                  skipped: {component: why}}}
    replay       {steps_recorded, steps_in_run, repeats, components: {component: {speedup, low, high,
                  steps, python_us_per_step, native_us_per_step, twins_agree, rows (sampler)}},
                  skipped: {component: why}} (profiler/replay/replay.py); null when not replayed
                  `api` is the HTTP layer of `infer-prof serve` (parsing, validation, encoding, the
                  hand-off on the engine thread); 0 in an in-process run
    health       the run's own conditions (profiler/analysis/health.py, health_section): {engine_thread:
                  {cpu_s, wait_s, core_share}, machine: {cpus, others_cores, others_runnable_mean,
                  steal_fraction}, load: {mode, offered_rps, delivered_rps, delivered_ratio, queue_share},
                  contended, saturated, at_capacity, void: null | reason, lines: [str], thresholds}
    overhead     {throughput_ratio, method, collectors: {name: fraction}} (profiling cost)
    target       null for an in-process run; for `run --target URL`: {url, server: {name, version,
                  model, source}, ours: bool, pid: int | null, split: {available: bool, reason: str |
                  null, methods: [..]}, threads: {name: {samples, categories, components, gil_wait}},
                  gil: {engine_thread, api_thread, method, note} | null, client: {cpu_s, wall_s,
                  cpu_fraction_of_one_core, python_threads, schedule_lag_ms, bottleneck: bool, note},
                  http: {requests, errors: {status: count}, endpoint}}
                  metrics are then measured client-side (send -> first content chunk -> last byte)
    collectors   {name: {status: "ok"|"skipped"|"failed", reason: str | null}}
    files        {name: relative path} e.g. requests, steps, samples, sample_labels, spans,
                  kernel_events, trace, speedscope, report_html
"""

from __future__ import annotations

import datetime as _dt
import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import pandas as pd

from errors import ResultError
from profiler.rundir.atomic import write_atomic, write_json_atomic
from profiler.rundir.validate import check_requests, check_result, check_steps, read_table, table_path

SCHEMA_VERSION = 1

REQUEST_COLUMNS = (
    "request_id", "index", "priority", "warmup", "ok", "finish_reason", "error",
    "prompt_tokens", "output_tokens", "arrival_ns", "scheduled_ns", "first_token_ns", "finish_ns",
    "ttft_ms", "tpot_ms", "e2e_ms", "queue_ms", "num_preemptions", "token_ns",
)  # fmt: skip

STEP_COLUMNS = (
    "step", "start_ns", "end_ns", "duration_ms", "batch_size", "prefill_tokens", "decode_tokens",
    "blocks_used", "blocks_free", "kv_utilization", "fragmentation_slots", "preemptions",
    "waiting", "running",
)  # fmt: skip

SAMPLE_LABEL_COLUMNS = ("line", "thread_id", "thread_name", "engine_thread", "category", "component", "dispatch", "samples")
SPAN_COLUMNS = ("step", "name", "start_ns", "end_ns", "depth")
KERNEL_EVENT_COLUMNS = ("window", "step", "name", "start_ns", "end_ns", "depth", "span")
GPU_TIMELINE_COLUMNS = ("step", "span", "start_ns", "end_ns")  # device work per span, on the host clock

# The names of the latency metrics, each a {mean, p50, p90, p99} dict in milliseconds.
LATENCY_METRICS = ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms", "queue_ms")
# Time-split categories and components (see ARCHITECTURE.md, "The profiler").
# `waiting` is a client or load-generator thread waiting for the engine (its next token): not contention.
CATEGORIES = ("interpreter", "lock", "allocation", "kernel", "idle", "waiting", "other")
COMPONENTS = ("scheduler", "sampler", "kv_alloc", "prepare", "tokenizer", "detokenizer", "model_glue", "model_kernels",
              "d2h", "queue", "api")  # fmt: skip


@dataclass
class RunResult:
    """Everything one run recorded; sections are plain JSON-ready dicts so the schema can grow."""

    config: dict[str, Any]
    environment: dict[str, Any]
    scenario: dict[str, Any]
    metrics: dict[str, Any]
    engine: dict[str, Any] = field(default_factory=dict)
    counters: dict[str, Any] = field(default_factory=dict)
    breakdown: dict[str, Any] | None = None
    verdict: dict[str, Any] | None = None
    target: dict[str, Any] | None = None  # a `run --target` run's server (None: the in-process engine)
    overhead: dict[str, Any] | None = None
    gpu_time: dict[str, Any] | None = None  # a GPU run's device-busy time and idle split (None on the CPU)
    replay: dict[str, Any] | None = None  # the C twins timed on this run's recorded work (None: not replayed)
    health: dict[str, Any] | None = None  # the run's own conditions (profiler.analysis.health; None: not measured)
    collectors: dict[str, Any] = field(default_factory=dict)  # name -> {"status": ..., "reason": ...}
    files: dict[str, str] = field(default_factory=dict)
    partial: bool = False
    partial_reason: str | None = None
    created_at: str = field(default_factory=lambda: _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"))
    schema_version: int = SCHEMA_VERSION

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        # schema_version first: the first thing a reader of the file should see.
        return {"schema_version": data.pop("schema_version"), **data}

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, source: str = "result.json") -> "RunResult":
        version = data.get("schema_version")
        if version != SCHEMA_VERSION:
            raise ResultError(
                f"{source}: schema_version {version!r} is not supported (this infer-prof reads {SCHEMA_VERSION}); "
                "re-record the run with this version"
            )
        known = {f.name for f in fields(cls)}
        missing = [name for name in ("config", "environment", "scenario", "metrics") if name not in data]
        if missing:
            raise ResultError(f"{source}: missing section(s) {', '.join(missing)}")
        check_result(data, source)
        return cls(**{key: value for key, value in data.items() if key in known})

    def get(self, dotted: str) -> Any:
        """Look up a dotted path such as `metrics.ttft_ms.p99` (KeyError names the missing part)."""
        node: Any = self.to_dict()
        walked = []
        for part in dotted.split("."):
            walked.append(part)
            if isinstance(node, dict) and part in node:
                node = node[part]
            else:
                raise KeyError(".".join(walked))
        return node


@dataclass
class RunData:
    """A run directory loaded back: the result plus its per-request and per-step tables."""

    path: Path
    result: RunResult
    requests: pd.DataFrame
    steps: pd.DataFrame


def write_run(run_dir: str | Path, result: RunResult, requests: pd.DataFrame, steps: pd.DataFrame) -> Path:
    """Write the tables, then result.json last (atomically each), and return the directory."""
    run_path = Path(run_dir)
    run_path.mkdir(parents=True, exist_ok=True)
    write_atomic(run_path / "requests.csv", lambda handle: requests.to_csv(handle, index=False))
    write_atomic(run_path / "steps.csv", lambda handle: steps.to_csv(handle, index=False))
    result.files.setdefault("requests", "requests.csv")
    result.files.setdefault("steps", "steps.csv")
    write_json_atomic(run_path / "result.json", result.to_dict())
    return run_path


def read_result(run_dir: str | Path) -> RunResult:
    """Read only result.json of a run directory (or a result.json path); ResultError for anything damaged."""
    path = Path(run_dir)
    result_path = path if path.is_file() else path / "result.json"
    if not result_path.exists():
        raise ResultError(f"{path}: no result.json here; pass a directory written by `infer-prof run`")
    try:
        data = json.loads(result_path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ResultError(f"{result_path}: not valid JSON ({exc}); re-record the run") from None
    except OSError as exc:
        raise ResultError(f"{result_path}: cannot be read ({exc.strerror or exc}); pass a run directory") from None
    if not isinstance(data, dict):
        raise ResultError(f"{result_path}: expected a JSON object; re-record the run")
    result = RunResult.from_dict(data, source=str(result_path))
    for name, relative in result.files.items():
        table_path(result_path.parent, name, relative)
    return result


def read_run(run_dir: str | Path) -> RunData:
    """Read a whole run directory: result.json, requests.csv and steps.csv, each checked cell by cell."""
    path = Path(run_dir)
    result = read_result(path)
    tables = {}
    for name, columns, check in (("requests", REQUEST_COLUMNS, check_requests), ("steps", STEP_COLUMNS, check_steps)):
        file = table_path(path, name, result.files.get(name, f"{name}.csv"))
        if file.is_file():
            tables[name] = check(read_table(file, columns), file)
        elif file.exists() and not file.is_file():
            raise ResultError(f"{file}: is not a file; re-record the run")
        else:
            tables[name] = pd.DataFrame(columns=list(columns))
    return RunData(path=path, result=result, requests=tables["requests"], steps=tables["steps"])


def mark_partial(run_dir: str | Path, reason: str) -> RunResult:
    """Rewrite a run's result.json as partial, with the reason (e.g. its reports were not all written)."""
    result = read_result(run_dir)
    result.partial = True
    result.partial_reason = reason if not result.partial_reason else f"{result.partial_reason}; {reason}"
    write_json_atomic(Path(run_dir) / "result.json", result.to_dict())
    return result
