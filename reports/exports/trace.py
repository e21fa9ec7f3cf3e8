"""Chrome Trace Event export (trace.json) of a run: engine steps and phases, counters, request lifetimes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from profiler.rundir.atomic import write_text_atomic
from profiler.rundir.results import RunData
from reports.rundata import load_run, phase_columns, run_start_ns

TRACE_NAME = "trace.json"
PID = 1
ENGINE_TID = 1
REQUESTS_TID = 2


def write_chrome_trace(run_dir: str | Path | RunData) -> Path:
    """Write trace.json (open it in ui.perfetto.dev or chrome://tracing) and return its path."""
    run = load_run(run_dir)
    trace = {
        "traceEvents": chrome_trace_events(run),
        "displayTimeUnit": "ms",
        "metadata": {
            "source": "infer-prof",
            "model": run.result.config.get("model"),
            "scenario": run.result.config.get("scenario"),
            # steps.csv holds each phase's total per step; their order inside the step is the engine's.
            "phase_placement": "phases are laid end to end from the step start in engine order",
        },
    }
    return write_text_atomic(run.path / TRACE_NAME, json.dumps(trace, separators=(",", ":")))


def _us(ns: int, start_ns: int) -> float:
    # Microseconds with nanosecond precision; integers first so parents and children round alike.
    return round((ns - start_ns) / 1000, 3)


def chrome_trace_events(run: RunData) -> list[dict[str, Any]]:
    """All events of the trace, metadata first, then sorted by timestamp."""
    start_ns = run_start_ns(run)
    metadata = [
        {"ph": "M", "name": "process_name", "pid": PID, "tid": 0,
         "args": {"name": f"infer-prof engine ({run.result.config.get('model', 'unknown model')})"}},
        {"ph": "M", "name": "thread_name", "pid": PID, "tid": ENGINE_TID, "args": {"name": "engine loop"}},
        {"ph": "M", "name": "thread_name", "pid": PID, "tid": REQUESTS_TID, "args": {"name": "requests"}},
        {"ph": "M", "name": "thread_sort_index", "pid": PID, "tid": ENGINE_TID, "args": {"sort_index": 0}},
    ]  # fmt: skip
    events = _step_events(run.steps, start_ns) + _request_events(run.requests, start_ns)
    # Longer slices first at equal timestamps, so a parent precedes the children that start with it.
    events.sort(key=lambda event: (event["ts"], -event.get("dur", 0.0)))
    return metadata + events


def _step_events(steps: pd.DataFrame, start_ns: int) -> list[dict[str, Any]]:
    if steps.empty:
        return []
    phases = phase_columns(steps)
    events: list[dict[str, Any]] = []
    for row in steps.to_dict("records"):
        step_start, step_end = int(row["start_ns"]), int(row["end_ns"])
        ts = _us(step_start, start_ns)
        events.append({
            "ph": "X", "name": "step", "cat": "engine", "pid": PID, "tid": ENGINE_TID,
            "ts": ts, "dur": round(_us(step_end, start_ns) - ts, 3),
            "args": {"step": int(row["step"]), "batch_size": int(row["batch_size"]),
                     "prefill_tokens": int(row["prefill_tokens"]), "decode_tokens": int(row["decode_tokens"])},
        })  # fmt: skip
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
            events.append({"ph": "X", "name": column.removesuffix("_ms"), "cat": "phase", "pid": PID,
                           "tid": ENGINE_TID, "ts": phase_ts, "dur": round(_us(phase_end, start_ns) - phase_ts, 3)})  # fmt: skip
            cursor = phase_end
        counters = {
            "batch_size": {"running": int(row["batch_size"])},
            "kv_utilization": {"percent": round(float(row["kv_utilization"]) * 100, 3)},
            "queue": {"waiting": int(row["waiting"]), "running": int(row["running"])},
        }
        for name, args in counters.items():
            events.append({"ph": "C", "name": name, "pid": PID, "tid": ENGINE_TID, "ts": ts, "args": args})
    return events


def _request_events(requests: pd.DataFrame, start_ns: int) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    for row in requests.to_dict("records"):
        arrival = _int(row.get("arrival_ns"))
        if arrival is None:
            continue
        scheduled, first_token, finish = (
            _int(row.get(name)) for name in ("scheduled_ns", "first_token_ns", "finish_ns")
        )
        known = [t for t in (arrival, scheduled, first_token, finish) if t is not None]
        end = finish if finish is not None else max(known)
        common = {"cat": "request", "id": f"0x{int(row.get('index', 0)):x}", "pid": PID, "tid": REQUESTS_TID}
        name = str(row.get("request_id") or f"request {row.get('index')}")
        events.append({**common, "ph": "b", "name": name, "ts": _us(arrival, start_ns), "args": {
            "prompt_tokens": _int(row.get("prompt_tokens")), "priority": _int(row.get("priority")),
        }})  # fmt: skip
        if scheduled is not None:
            # The queued interval nests inside the request's slice (same id, same category).
            events.append({**common, "ph": "b", "name": "queued", "ts": _us(arrival, start_ns)})
            events.append(
                {**common, "ph": "e", "name": "queued", "ts": _us(max(scheduled, arrival), start_ns)}
            )
        if first_token is not None:
            events.append({**common, "ph": "n", "name": "first token", "ts": _us(first_token, start_ns)})
        events.append({**common, "ph": "e", "name": name, "ts": _us(max(end, arrival), start_ns), "args": {
            "output_tokens": _int(row.get("output_tokens")), "finish_reason": _text(row.get("finish_reason")),
            "finished": finish is not None,
        }})  # fmt: skip
    return events


def _int(value: Any) -> int | None:
    return None if value is None or pd.isna(value) else int(value)


def _text(value: Any) -> str | None:
    return None if value is None or (isinstance(value, float) and pd.isna(value)) else str(value)
