"""A run directory's files, read and written: result.json as RunResult (its sections' types in
profiler.rundir.schema, documented in docs/result-schema.md) and the tables beside it.

A run directory holds:

    result.json    RunResult below (schema_version, config, environment, scenario, metrics,
                   engine, counters, breakdown, verdict, target, overhead, gpu_time, replay,
                   collectors, files)
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

Every file is written atomically. A run writes requests.csv, steps.csv and result.json, then the
samples and spans files, then result.json again with their names in `files`; a directory with a
result.json has its tables.
"""

from __future__ import annotations

import datetime as _dt
import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, cast

import pandas as pd

from ...engine.trace import SPAN_NAMES
from ...errors import MAX_DATA_BYTES, ResultError, read_bounded
from ...scenarios.recorded import ScenarioDict
from .atomic import write_atomic, write_json_atomic
from .components import CATEGORIES as CATEGORIES
from .components import COMPONENTS as COMPONENTS
from .schema import (
    SCHEMA_VERSION,
    Breakdown,
    CollectorStatus,
    Config,
    EngineFigures,
    EngineWhatIf,
    Environment,
    GpuTime,
    Health,
    Metrics,
    Overhead,
    Replay,
    ResultFile,
    Target,
    Verdict,
    check_file,
)
from .validate import (
    NUMERIC_REQUEST_COLUMNS,
    STEP_COLUMNS,
    check_requests,
    check_steps,
    read_table,
    table_path,
)

REQUEST_COLUMNS = (
    "request_id",
    "index",
    "priority",
    "warmup",
    "ok",
    "finish_reason",
    "error",
    *NUMERIC_REQUEST_COLUMNS,
    "token_ns",
)

SAMPLE_LABEL_COLUMNS = (
    "line",
    "thread_id",
    "thread_name",
    "engine_thread",
    "category",
    "component",
    "dispatch",
    "samples",
)
SPAN_COLUMNS = ("step", "name", "start_ns", "end_ns", "depth")
KERNEL_EVENT_COLUMNS = ("window", "step", "name", "start_ns", "end_ns", "depth", "span")
GPU_TIMELINE_COLUMNS = ("step", "span", "start_ns", "end_ns")  # device work per span, on the host clock

# The names of the latency metrics, each a {mean, p50, p90, p99} dict in milliseconds.
LATENCY_METRICS = ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms", "queue_ms")
# CATEGORIES and COMPONENTS, the time split's names, are components.py's, imported above for the result's readers.
# steps.csv's `<phase>_ms` columns in the order a step runs them: the engine's spans but the step itself.
PHASE_ORDER = tuple(name for name in SPAN_NAMES if name != "step")
# Span names of runs recorded before each span took its component's name, old -> new. The readers of steps.csv
# (its `<span>_ms` columns) and of the span tables rename them (current_span_names), so old runs read the same.
LEGACY_SPAN_NAMES = {"tokenize": "tokenizer", "detokenize": "detokenizer"}
# config.engine keys of runs recorded before the engine took the options' names (vLLM's), old -> new.
LEGACY_ENGINE_KEYS = {"max_num_seqs": "max_batch", "num_kv_blocks": "kv_blocks"}


def current_span_names(table: pd.DataFrame) -> pd.DataFrame:
    """`table` with the legacy span names (LEGACY_SPAN_NAMES) renamed: as `<span>_ms` columns (steps.csv) and as
    values of a `name` or `span` column (spans.csv, kernel_events.csv, gpu_timeline.csv)."""
    table = table.rename(columns={f"{old}_ms": f"{new}_ms" for old, new in LEGACY_SPAN_NAMES.items()})
    for column in ("name", "span"):
        if column in table.columns and table[column].isin(list(LEGACY_SPAN_NAMES)).any():
            table[column] = table[column].replace(LEGACY_SPAN_NAMES)
    return table


@dataclass
class RunResult:
    """Everything one run recorded; each section a JSON-ready dict of its schema type (profiler.rundir.schema)."""

    config: Config
    environment: Environment
    scenario: ScenarioDict  # scenarios.spec.ScenarioSpec.to_dict(), or as read back
    metrics: Metrics
    engine: EngineFigures = field(default_factory=lambda: EngineFigures())
    counters: dict[str, float | None] = field(default_factory=dict)
    breakdown: Breakdown | None = None
    verdict: Verdict | None = None
    target: Target | None = None  # a `run --target` run's server (None: the in-process engine)
    health: Health | None = None  # the run's own conditions (profiler.analysis.health; None: not measured)
    overhead: Overhead | None = None
    gpu_time: GpuTime | None = None  # a GPU run's device-busy time and idle split (None on the CPU)
    replay: Replay | None = None  # the C twins timed on this run's recorded work (None: not replayed)
    what_if: EngineWhatIf | None = None  # run --what-if's slowdowns (None: not asked for)
    collectors: dict[str, CollectorStatus] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)
    partial: bool = False
    partial_reason: str | None = None
    created_at: str = field(default_factory=lambda: _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"))
    schema_version: int = SCHEMA_VERSION

    def to_dict(self) -> ResultFile:
        data = asdict(self)
        # schema_version first: the first thing a reader of the file should see. asdict types its copy
        # dict[str, Any]; its keys are this dataclass's fields, which are ResultFile's (a test holds them equal).
        return cast(ResultFile, {"schema_version": data.pop("schema_version"), **data})

    @classmethod
    def from_dict(cls, data: dict[str, object], *, source: str = "result.json") -> RunResult:
        """The result of a JSON object read from `source`; ResultError, one line, unless it is a result.json."""
        check_file(data, source)
        config = data["config"]  # a table: check_file refuses a file without one
        engine = config.get("engine") if isinstance(config, dict) else None
        if (
            isinstance(config, dict)
            and isinstance(engine, dict)
            and LEGACY_ENGINE_KEYS.keys() & engine.keys()
        ):
            renamed = {LEGACY_ENGINE_KEYS.get(key, key): value for key, value in engine.items()}
            data = {**data, "config": {**config, "engine": renamed}}
        known = {f.name for f in fields(cls)}
        # The JSON read's one boundary: check_file has held every known section to ResultFile's types.
        checked = cast(ResultFile, {key: value for key, value in data.items() if key in known})
        return cls(**checked)

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
        data = json.loads(read_bounded(result_path, ResultError, limit=MAX_DATA_BYTES))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ResultError(f"{result_path}: not valid JSON ({exc}); re-record the run") from None
    except OSError as exc:
        raise ResultError(
            f"{result_path}: cannot be read ({exc.strerror or exc}); pass a run directory"
        ) from None
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
    for name, columns, check in (
        ("requests", REQUEST_COLUMNS, check_requests),
        ("steps", STEP_COLUMNS, check_steps),
    ):
        file = table_path(path, name, result.files.get(name, f"{name}.csv"))
        if file.is_file():
            tables[name] = check(current_span_names(read_table(file, columns)), file)
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
