"""speedscope.json export: py-spy's stacks as one sampled profile per thread group, and the steps' phases as an evented one.

Input: `samples.txt` in the run directory (or the file that result.files["samples"] names), read by
reports.stacks. Without it, the file still exists: the evented profile built from steps.csv is
always written.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TypedDict

import pandas as pd

from ...profiler.rundir.atomic import write_text_atomic
from ...profiler.rundir.results import RunData
from ..rundata import load_run, phase_columns, run_start_ns
from ..stacks import ThreadGroup, parse_frame, read_stacks, thread_groups
from .trace import read_span_tables

__all__ = ["SCHEMA_URL", "SPEEDSCOPE_NAME", "parse_frame", "write_speedscope"]

SPEEDSCOPE_NAME = "speedscope.json"
SCHEMA_URL = "https://www.speedscope.app/file-format-schema.json"


class Frame(TypedDict, total=False):
    """speedscope's frame: a function's name, and where it is when known."""

    name: str
    file: str
    line: int


class Event(TypedDict):
    """speedscope's evented profile: a frame opened ("O") or closed ("C") at a time (ms)."""

    type: str
    frame: int
    at: float


class Profile(TypedDict, total=False):
    """speedscope's profile: "sampled" (samples and weights) or "evented" (events)."""

    type: str
    name: str
    unit: str
    startValue: float
    endValue: float
    samples: list[list[int]]
    weights: list[int]
    events: list[Event]


class _Frames:
    """speedscope's shared frame table: each distinct (name, file, line) once, referred to by index."""

    def __init__(self) -> None:
        self.frames: list[Frame] = []
        self._index: dict[tuple[str, str | None, int | None], int] = {}

    def index(self, name: str, file: str | None = None, line: int | None = None) -> int:
        key = (name, file, line)
        if key not in self._index:
            frame: Frame = {"name": name}
            if file:
                frame["file"] = file
            if line is not None:
                frame["line"] = line
            self._index[key] = len(self.frames)
            self.frames.append(frame)
        return self._index[key]


def write_speedscope(run_dir: str | Path | RunData) -> Path:
    """Write speedscope.json (open it at speedscope.app) and return its path.

    One sampled profile per thread group, the engine thread first (the one speedscope opens), then
    pools of same-named threads merged (30 load-generator clients waiting are one profile, not 30
    that bury the engine), then the evented profile of the steps' phases.
    """
    run = load_run(run_dir)
    frames = _Frames()
    stacks = read_stacks(run)
    profiles = [sampled_profile(group, frames) for group in thread_groups(stacks)] if stacks else []
    profiles.append(evented_profile(run, frames))
    document = {
        "$schema": SCHEMA_URL,
        "shared": {"frames": frames.frames},
        "profiles": profiles,
        "name": f"infer-prof: {run.result.config.get('model', 'run')} {run.result.config.get('scenario', '')}".strip(),
        "activeProfileIndex": 0,
        "exporter": f"infer-prof {run.result.environment.get('infer_prof_version', '')}".strip(),
    }
    return write_text_atomic(run.path / SPEEDSCOPE_NAME, json.dumps(document, separators=(",", ":")))


def sampled_profile(group: ThreadGroup, frames: _Frames) -> Profile:
    """One thread group's stacks (the thread frame left out: the profile's name says the thread)."""
    samples = [[frames.index(*frame) for frame in stack.frames] for stack in group.stacks]
    weights = [stack.count for stack in group.stacks]
    return {
        "type": "sampled",
        "name": f"py-spy samples: {group.label}",
        "unit": "none",
        "startValue": 0,
        "endValue": sum(weights),
        "samples": samples,
        "weights": weights,
    }


def evented_profile(run: RunData, frames: _Frames) -> Profile:
    """Steps and their phases on the engine thread, in milliseconds since the run started: where they ran
    (spans.csv), or, for a run without it, laid end to end from each step's start (steps.csv)."""
    steps = run.steps
    events: list[Event] = []
    start_ns = run_start_ns(run)
    end_value = 0.0
    spans, _ = read_span_tables(run)
    if spans is not None:
        events, end_value = _recorded_span_events(spans, frames, start_ns)
    elif not steps.empty:
        step_frame = frames.index("engine step")
        phase_frames = {column: frames.index(column.removesuffix("_ms")) for column in phase_columns(steps)}
        for row in steps.to_dict("records"):
            step_start, step_end = int(row["start_ns"]), int(row["end_ns"])
            events.append({"type": "O", "frame": step_frame, "at": _ms(step_start, start_ns)})
            cursor = step_start
            for column, frame in phase_frames.items():
                value = row.get(column)
                if value is None or pd.isna(value) or value <= 0:
                    continue
                # Phases laid end to end from the step start, clamped inside it (as in trace.json).
                phase_end = min(step_end, cursor + round(float(value) * 1e6))
                events.append({"type": "O", "frame": frame, "at": _ms(cursor, start_ns)})
                events.append({"type": "C", "frame": frame, "at": _ms(phase_end, start_ns)})
                cursor = phase_end
            events.append({"type": "C", "frame": step_frame, "at": _ms(step_end, start_ns)})
            end_value = max(end_value, _ms(step_end, start_ns))
    return {
        "type": "evented",
        "name": "engine thread: steps and phases (spans)",
        "unit": "milliseconds",
        "startValue": 0,
        "endValue": end_value,
        "events": events,
    }


def _recorded_span_events(spans: pd.DataFrame, frames: _Frames, start_ns: int) -> tuple[list[Event], float]:
    """Open/close events of spans.csv at their recorded times (one thread's spans nest by construction)."""
    events: list[Event] = []
    open_spans: list[tuple[int, int]] = []  # (frame, end_ns)
    end_value = 0.0
    ordered = spans.sort_values(["start_ns", "depth"], kind="stable")
    for name, begin, end in zip(ordered["name"], ordered["start_ns"], ordered["end_ns"]):
        begin, end = int(begin), int(end)
        while open_spans and open_spans[-1][1] <= begin:
            frame, closed = open_spans.pop()
            events.append({"type": "C", "frame": frame, "at": _ms(closed, start_ns)})
        if open_spans:
            end = min(end, open_spans[-1][1])
        frame = frames.index("engine step" if name == "step" else str(name))
        events.append({"type": "O", "frame": frame, "at": _ms(begin, start_ns)})
        open_spans.append((frame, end))
        end_value = max(end_value, _ms(end, start_ns))
    while open_spans:
        frame, closed = open_spans.pop()
        events.append({"type": "C", "frame": frame, "at": _ms(closed, start_ns)})
    return events, end_value


def _ms(ns: int, start_ns: int) -> float:
    return round((ns - start_ns) / 1e6, 6)
