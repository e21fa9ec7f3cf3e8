"""speedscope.json export: py-spy's collapsed stacks as a sampled profile, and the steps' phases as an evented one.

Input: `samples.txt` in the run directory (or the file that result.files["samples"] names), in py-spy's
`record --format raw` collapsed-stack format: one line per distinct stack, `frame;frame;frame count`,
root first, each frame `function (file:line)`. Without it, the file still exists: the evented
profile built from steps.csv is always written.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pandas as pd

from errors import ReportError
from profiler.rundir.atomic import write_text_atomic
from profiler.rundir.results import RunData
from reports.rundata import load_run, phase_columns, run_start_ns

SPEEDSCOPE_NAME = "speedscope.json"
SCHEMA_URL = "https://www.speedscope.app/file-format-schema.json"
_FRAME = re.compile(r"^(?P<name>.*?) \((?P<file>[^()]*?)(?::(?P<line>\d+))?\)$")


class _Frames:
    """speedscope's shared frame table: each distinct (name, file, line) once, referred to by index."""

    def __init__(self) -> None:
        self.frames: list[dict[str, Any]] = []
        self._index: dict[tuple[str, str | None, int | None], int] = {}

    def index(self, name: str, file: str | None = None, line: int | None = None) -> int:
        key = (name, file, line)
        if key not in self._index:
            frame: dict[str, Any] = {"name": name}
            if file:
                frame["file"] = file
            if line is not None:
                frame["line"] = line
            self._index[key] = len(self.frames)
            self.frames.append(frame)
        return self._index[key]


def write_speedscope(run_dir: str | Path | RunData) -> Path:
    """Write speedscope.json (open it at speedscope.app) and return its path."""
    run = load_run(run_dir)
    frames = _Frames()
    profiles = []
    samples_path = run.path / run.result.files.get("samples", "samples.txt")
    if samples_path.exists():
        profiles.append(sampled_profile(samples_path, frames))
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


def parse_frame(text: str) -> tuple[str, str | None, int | None]:
    """`function (file:line)` -> (function, file, line); a bare name has neither file nor line."""
    match = _FRAME.match(text.strip())
    if not match:
        return text.strip(), None, None
    line = match.group("line")
    return match.group("name"), match.group("file") or None, int(line) if line else None


def sampled_profile(path: Path, frames: _Frames) -> dict[str, Any]:
    samples: list[list[int]] = []
    weights: list[int] = []
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ReportError(f"{path}: cannot read the py-spy samples ({exc}); re-record the run or delete the file") from None
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            raise ReportError(
                f"{path}:{number}: expected `frame;frame;... count` (py-spy record --format raw), got {raw[:80]!r}"
            )
        samples.append([frames.index(*parse_frame(frame)) for frame in stack.split(";") if frame.strip()])
        weights.append(int(count))
    return {
        "type": "sampled", "name": "py-spy samples (engine process)", "unit": "none",
        "startValue": 0, "endValue": sum(weights), "samples": samples, "weights": weights,
    }  # fmt: skip


def evented_profile(run: RunData, frames: _Frames) -> dict[str, Any]:
    """Steps and their phases on the engine thread, in milliseconds since the run started."""
    steps = run.steps
    events: list[dict[str, Any]] = []
    start_ns = run_start_ns(run)
    end_value = 0.0
    if not steps.empty:
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
        "type": "evented", "name": "engine thread: steps and phases (spans)", "unit": "milliseconds",
        "startValue": 0, "endValue": end_value, "events": events,
    }  # fmt: skip


def _ms(ns: int, start_ns: int) -> float:
    return round((ns - start_ns) / 1e6, 6)
