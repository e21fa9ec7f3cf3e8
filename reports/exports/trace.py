"""Chrome Trace Event export (trace.json) of a run: engine steps and phases at their real times, torch ops of
the deep profile's windows on the engine thread, counters, request lifetimes, and on a GPU the device's
work and idle gaps per step."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypedDict

import pandas as pd

from ...errors import ReportError
from ...profiler.rundir.atomic import write_text_atomic
from ...profiler.rundir.results import (
    GPU_TIMELINE_COLUMNS,
    KERNEL_EVENT_COLUMNS,
    SPAN_COLUMNS,
    RunData,
    current_span_names,
)
from ...profiler.rundir.validate import whole_numbers
from ..rundata import load_run, phase_columns, run_start_ns

TRACE_NAME = "trace.json"
PID = 1
ENGINE_TID = 1
REQUESTS_TID = 2
GPU_TID = 3


def write_chrome_trace(run_dir: str | Path | RunData) -> Path:
    """Write trace.json (open it in ui.perfetto.dev or chrome://tracing) and return its path."""
    run = load_run(run_dir)
    spans, kernels = read_span_tables(run)
    gpu = read_gpu_timeline(run)
    trace = {
        "traceEvents": chrome_trace_events(run, spans, kernels) + gpu_events(run, gpu),
        "displayTimeUnit": "ms",
        "metadata": {
            "source": "infer-prof",
            "model": run.result.config.get("model"),
            "scenario": run.result.config.get("scenario"),
            "phase_placement": (
                "spans at their recorded start and end (spans.csv)"
                if spans is not None
                # steps.csv holds each phase's total per step; their order inside the step is the engine's.
                else "phases laid end to end from the step start in engine order (this run has no spans.csv)"
            ),
            "torch_ops": (
                f"{len(kernels):,} torch.profiler ops of the deep profile's windows, on the engine thread, put on the "
                "spans' clock by each window's step markers and clamped inside the span they ran in"
                if kernels is not None
                else "none (torch.profiler ran only with --profile deep)"
            ),
        },
    }
    return write_text_atomic(run.path / TRACE_NAME, json.dumps(trace, separators=(",", ":")))


TraceArg = str | int | float | bool | None  # an event's argument, shown in the viewer's details pane


class TraceEvent(TypedDict, total=False):
    """One event of the Chrome trace (the Trace Event Format's fields this export writes)."""

    name: str
    cat: str
    ph: str  # "X" a slice, "M" metadata, "C" a counter, "i" an instant, "b"/"e" an async pair
    ts: float  # microseconds from the run's start
    dur: float
    pid: int
    tid: int | str
    id: int | str
    s: str
    args: Mapping[str, TraceArg]


def read_span_tables(run: RunData) -> tuple[pd.DataFrame | None, pd.DataFrame | None]:
    """spans.csv and kernel_events.csv of the run (None for a file it did not write)."""
    return _read_table(run, "spans", SPAN_COLUMNS), _read_table(run, "kernel_events", KERNEL_EVENT_COLUMNS)


def read_gpu_timeline(run: RunData) -> pd.DataFrame | None:
    """gpu_timeline.csv (device work per span from CUDA events), or None on a CPU run."""
    return _read_table(run, "gpu_timeline", GPU_TIMELINE_COLUMNS)


def _read_table(run: RunData, key: str, columns: tuple[str, ...]) -> pd.DataFrame | None:
    """One of the run's interval tables, checked (ReportError naming the file and row), or None if absent or empty."""
    path = run.path / run.result.files.get(key, f"{key}.csv")
    if not path.exists():
        return None
    try:
        table = pd.read_csv(path)
    except (OSError, ValueError) as exc:
        raise ReportError(
            f"{path}: not a readable {key}.csv ({exc}); re-record the run or delete the file"
        ) from None
    missing = set(columns) - set(table.columns)
    if missing:
        raise ReportError(
            f"{path}: missing column(s) {', '.join(sorted(missing))}; re-record the run or delete the file"
        )
    numbers = tuple(
        column for column in columns if column.endswith("_ns") or column in ("step", "depth", "window")
    )
    table = whole_numbers(table, numbers, path, non_negative=("depth", "window", "start_ns", "end_ns"))
    if (table["end_ns"] < table["start_ns"]).any():
        row = int(table.index[table["end_ns"] < table["start_ns"]][0]) + 2
        raise ReportError(f"{path}: row {row} ends before it starts; re-record the run or delete the file")
    return current_span_names(table) if not table.empty else None


def gpu_events(run: RunData, gpu: pd.DataFrame | None) -> list[TraceEvent]:
    """The GPU lane: each span's device work, and inside each step the gaps the device had nothing queued."""
    if gpu is None:
        return []
    start_ns = run_start_ns(run)
    events: list[TraceEvent] = [
        {"ph": "M", "name": "thread_name", "pid": PID, "tid": GPU_TID, "args": {"name": "GPU (CUDA events)"}},
        {"ph": "M", "name": "thread_sort_index", "pid": PID, "tid": GPU_TID, "args": {"sort_index": 1}},
    ]
    by_step = {int(step): group.sort_values("start_ns") for step, group in gpu.groupby("step")}
    steps = (
        run.steps
        if not run.steps.empty and {"step", "start_ns", "end_ns"} <= set(run.steps.columns)
        else None
    )
    windows = (
        {int(row.step): (int(row.start_ns), int(row.end_ns)) for row in steps.itertuples()}
        if steps is not None
        else {}
    )
    for step, group in by_step.items():
        cursor = windows.get(step, (int(group["start_ns"].iloc[0]), 0))[0]
        for row in group.itertuples():
            if row.start_ns > cursor:
                events.append(
                    _slice(
                        "idle: waiting for the host", "gpu_idle", cursor, int(row.start_ns), start_ns, step
                    )
                )
            events.append(
                _slice(f"{row.span} (device)", "gpu", int(row.start_ns), int(row.end_ns), start_ns, step)
            )
            cursor = max(cursor, int(row.end_ns))
        end = windows.get(step, (0, cursor))[1]
        if end > cursor:
            events.append(_slice("idle: waiting for the host", "gpu_idle", cursor, end, start_ns, step))
    return events


def _slice(name: str, category: str, begin_ns: int, end_ns: int, start_ns: int, step: int) -> TraceEvent:
    ts = _us(begin_ns, start_ns)
    return {
        "ph": "X",
        "name": name,
        "cat": category,
        "pid": PID,
        "tid": GPU_TID,
        "ts": ts,
        "dur": round(_us(end_ns, start_ns) - ts, 3),
        "args": {"step": step},
    }


def _us(ns: int, start_ns: int) -> float:
    # Microseconds with nanosecond precision; integers first so parents and children round alike.
    return round((ns - start_ns) / 1000, 3)


def chrome_trace_events(
    run: RunData, spans: pd.DataFrame | None = None, kernels: pd.DataFrame | None = None
) -> list[TraceEvent]:
    """All events of the trace, metadata first, then sorted by timestamp."""
    start_ns = run_start_ns(run)
    metadata: list[TraceEvent] = [
        {
            "ph": "M",
            "name": "process_name",
            "pid": PID,
            "tid": 0,
            "args": {"name": f"infer-prof engine ({run.result.config.get('model', 'unknown model')})"},
        },
        {"ph": "M", "name": "thread_name", "pid": PID, "tid": ENGINE_TID, "args": {"name": "engine loop"}},
        {"ph": "M", "name": "thread_name", "pid": PID, "tid": REQUESTS_TID, "args": {"name": "requests"}},
        {"ph": "M", "name": "thread_sort_index", "pid": PID, "tid": ENGINE_TID, "args": {"sort_index": 0}},
    ]
    if spans is not None:
        engine = _span_events(spans, run.steps, start_ns) + _op_events(kernels, start_ns)
        engine = nest_on_track(engine) + _counter_events(run.steps, start_ns)
    else:
        engine = _step_events(run.steps, start_ns)
    events = engine + _request_events(run.requests, start_ns)
    # Longer slices first at equal timestamps, so a parent precedes the children that start with it.
    events.sort(key=lambda event: (event["ts"], -event.get("dur", 0.0)))
    return metadata + events


def _step_args(row: dict[str, Any]) -> dict[str, int]:
    return {
        "step": int(row["step"]),
        "batch_size": int(row["batch_size"]),
        "prefill_tokens": int(row["prefill_tokens"]),
        "decode_tokens": int(row["decode_tokens"]),
    }


def _span_events(spans: pd.DataFrame, steps: pd.DataFrame, start_ns: int) -> list[TraceEvent]:
    """Every recorded span of the engine thread where it ran: steps (with their steps.csv figures) and phases."""
    args_by_step = (
        {int(row["step"]): _step_args(row) for row in steps.to_dict("records")} if not steps.empty else {}
    )
    events: list[TraceEvent] = []
    for step, name, begin, end in zip(spans["step"], spans["name"], spans["start_ns"], spans["end_ns"]):
        ts = _us(int(begin), start_ns)
        event: TraceEvent = {
            "ph": "X",
            "name": str(name),
            "cat": "engine" if name == "step" else "phase",
            "pid": PID,
            "tid": ENGINE_TID,
            "ts": ts,
            "dur": round(_us(int(end), start_ns) - ts, 3),
        }
        if name == "step" and int(step) in args_by_step:
            event["args"] = dict(args_by_step[int(step)])
        events.append(event)
    return events


def _op_events(kernels: pd.DataFrame | None, start_ns: int) -> list[TraceEvent]:
    if kernels is None:
        return []
    events: list[TraceEvent] = []
    for window, name, begin, end, span in zip(
        kernels["window"], kernels["name"], kernels["start_ns"], kernels["end_ns"], kernels["span"].fillna("")
    ):
        ts = _us(int(begin), start_ns)
        events.append(
            {
                "ph": "X",
                "name": str(name),
                "cat": "aten",
                "pid": PID,
                "tid": ENGINE_TID,
                "ts": ts,
                "dur": max(0.0, round(_us(int(end), start_ns) - ts, 3)),
                "args": {"window": int(window), "span": str(span)},
            }
        )
    return events


def nest_on_track(events: list[TraceEvent]) -> list[TraceEvent]:
    """Clamp X events of one track so that each lies inside the one it started in.

    Spans nest exactly (one thread's stack); torch ops are placed on the spans' clock to within a few
    microseconds, so an op that ends just past its span is cut at the span's end rather than break
    the nesting Perfetto draws a track by.
    """
    ordered = sorted(events, key=lambda event: (event["ts"], -event["dur"]))
    stack: list[tuple[float, float]] = []
    for event in ordered:
        start, end = event["ts"], round(event["ts"] + event["dur"], 3)
        while stack and start >= stack[-1][1]:
            stack.pop()
        if stack:
            end = min(end, stack[-1][1])
        event["dur"] = max(0.0, round(end - start, 3))
        stack.append((start, start + event["dur"]))
    return ordered


def _counter_events(steps: pd.DataFrame, start_ns: int) -> list[TraceEvent]:
    events: list[TraceEvent] = []
    for row in steps.to_dict("records") if not steps.empty else []:
        ts = _us(int(row["start_ns"]), start_ns)
        counters: dict[str, dict[str, TraceArg]] = {
            "batch_size": {"running": int(row["batch_size"])},
            "kv_utilization": {"percent": round(float(row["kv_utilization"]) * 100, 3)},
            "queue": {"waiting": int(row["waiting"]), "running": int(row["running"])},
        }
        for name, args in counters.items():
            events.append({"ph": "C", "name": name, "pid": PID, "tid": ENGINE_TID, "ts": ts, "args": args})
    return events


def _step_events(steps: pd.DataFrame, start_ns: int) -> list[TraceEvent]:
    """Without spans.csv (older runs): steps from steps.csv, their phases laid end to end from the step start."""
    if steps.empty:
        return []
    phases = phase_columns(steps)
    events: list[TraceEvent] = []
    for row in steps.to_dict("records"):
        step_start, step_end = int(row["start_ns"]), int(row["end_ns"])
        ts = _us(step_start, start_ns)
        events.append(
            {
                "ph": "X",
                "name": "step",
                "cat": "engine",
                "pid": PID,
                "tid": ENGINE_TID,
                "ts": ts,
                "dur": round(_us(step_end, start_ns) - ts, 3),
                "args": _step_args(row),
            }
        )
        cursor = step_start
        for column in phases:
            value = row.get(column)
            if value is None or pd.isna(value) or value <= 0:
                continue
            # Clamp to the step: rounding in the recorder must never push a child past its parent.
            phase_end = min(step_end, cursor + round(float(value) * 1e6))
            if phase_end <= cursor:
                continue
            phase_ts = _us(cursor, start_ns)
            events.append(
                {
                    "ph": "X",
                    "name": column.removesuffix("_ms"),
                    "cat": "phase",
                    "pid": PID,
                    "tid": ENGINE_TID,
                    "ts": phase_ts,
                    "dur": round(_us(phase_end, start_ns) - phase_ts, 3),
                }
            )
            cursor = phase_end
    return events + _counter_events(steps, start_ns)


def _request_events(requests: pd.DataFrame, start_ns: int) -> list[TraceEvent]:
    events: list[TraceEvent] = []
    for row in requests.to_dict("records"):
        arrival = _int(row.get("arrival_ns"))
        if arrival is None:
            continue
        scheduled, first_token, finish = (
            _int(row.get(name)) for name in ("scheduled_ns", "first_token_ns", "finish_ns")
        )
        known = [t for t in (arrival, scheduled, first_token, finish) if t is not None]
        end = finish if finish is not None else max(known)
        common: TraceEvent = {
            "cat": "request",
            "id": f"0x{int(row.get('index', 0)):x}",
            "pid": PID,
            "tid": REQUESTS_TID,
        }
        name = str(row.get("request_id") or f"request {row.get('index')}")
        events.append(
            {
                **common,
                "ph": "b",
                "name": name,
                "ts": _us(arrival, start_ns),
                "args": {
                    "prompt_tokens": _int(row.get("prompt_tokens")),
                    "priority": _int(row.get("priority")),
                },
            }
        )
        if scheduled is not None:
            # The queued interval nests inside the request's slice (same id, same category).
            events.append({**common, "ph": "b", "name": "queued", "ts": _us(arrival, start_ns)})
            events.append(
                {**common, "ph": "e", "name": "queued", "ts": _us(max(scheduled, arrival), start_ns)}
            )
        if first_token is not None:
            events.append({**common, "ph": "n", "name": "first token", "ts": _us(first_token, start_ns)})
        events.append(
            {
                **common,
                "ph": "e",
                "name": name,
                "ts": _us(max(end, arrival), start_ns),
                "args": {
                    "output_tokens": _int(row.get("output_tokens")),
                    "finish_reason": _text(row.get("finish_reason")),
                    "finished": finish is not None,
                },
            }
        )
    return events


def _int(value: Any) -> int | None:
    return None if value is None or pd.isna(value) else int(value)


def _text(value: Any) -> str | None:
    return None if value is None or (isinstance(value, float) and pd.isna(value)) else str(value)
