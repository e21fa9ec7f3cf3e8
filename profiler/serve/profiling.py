"""Profile windows of a running server: a fresh recording tracer in the engine and the API layer, read back as JSON.

Between windows the engine and the API layer use engine.trace.NULL_TRACER (the server costs what an
unprofiled one does). `run --target` opens a window before its load and closes it after: the spans
and GC pauses of that window, the engine steps it covered and the server's configuration come back
in one JSON object, which the client turns into the run's spans split.
"""

from __future__ import annotations

import bisect
import threading
import time
from dataclasses import asdict
from typing import TYPE_CHECKING, TypedDict

from ...engine.engine import ENGINE_THREAD_NAME
from ...engine.trace import NULL_TRACER, Tracer
from ..collectors.gc import GcCollector
from ..collectors.spans import RecordingTracer, SpanCollector, StepRow

if TYPE_CHECKING:
    from ...engine.engine import Engine
    from ..collectors.registry import CollectorResults

API_THREAD_NAME = "infer-prof-api"  # the event loop's thread: request parsing, validation, encoding

# An engine StepRecord as asdict() gives it: every field a number.
StepFields = dict[str, float]


class ServerWindow(TypedDict):
    """What a closed profile window recorded (POST /infer-prof/profile/stop replies with it)."""

    collector_results: CollectorResults
    steps: list[StepRow]  # the engine's step records, each with its phase times (aligned_steps)
    wall_ns: int | None
    engine_thread_name: str
    api_thread_name: str


class ServerTracing:
    """The tracer the engine and the API layer use now, and the one open window (if any)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.tracer: Tracer = NULL_TRACER
        self._lock = threading.Lock()
        self._window: tuple[SpanCollector, GcCollector] | None = None
        self._first_record = 0

    @property
    def open(self) -> bool:
        return self._window is not None

    def current(self) -> Tracer:
        return self.tracer

    def start(self) -> None:
        """Open a window (closing one a vanished client left open); spans record wall and CPU time."""
        with self._lock:
            self._close()
            # CPU time too: wall minus CPU inside a pure-Python span is time its thread could not run
            # (waiting for the GIL or for a core), the contention this server exists to show.
            tracer = RecordingTracer(cpu_clock=time.thread_time_ns)
            spans, gc = SpanCollector(tracer=tracer), GcCollector(tracer=tracer)
            spans.start()
            gc.start()
            self._window = (spans, gc)
            self._first_record = len(self.engine.step_records)
            self.tracer = tracer
            self.engine.tracer = tracer

    def stop(self) -> ServerWindow | None:
        """Close the window and return what it recorded; None when no window was open."""
        with self._lock:
            if self._window is None:
                return None
            spans, gc = self._window
            self._close()
            results: CollectorResults = {"spans": spans.result(), "gc": gc.result()}
            records = [asdict(record) for record in self.engine.step_records[self._first_record :]]
        return {
            "collector_results": results,
            "steps": aligned_steps(records, results["spans"].get("steps", [])),
            "wall_ns": results["spans"].get("window_ns"),
            "engine_thread_name": ENGINE_THREAD_NAME,
            "api_thread_name": API_THREAD_NAME,
        }

    def _close(self) -> None:
        if self._window is None:
            return
        self.tracer = NULL_TRACER
        self.engine.tracer = NULL_TRACER
        for collector in reversed(self._window):
            collector.stop()
        self._window = None


def aligned_steps(records: list[StepFields], span_rows: list[StepRow]) -> list[StepRow]:
    """The engine's step records with each step's phase times (`<span>_ms`) from the window's span rows.

    The window's tracer numbers steps from 0 while the engine counts from its start, and a step may
    have been running when the window opened, so rows are matched by time: each record's start lies
    just inside the step span that contains it (the engine reads its clock first thing in a step).
    """
    timed = sorted(
        ((start, row) for row in span_rows if (start := row.get("start_ns")) is not None),
        key=lambda pair: pair[0],
    )
    starts = [start for start, _row in timed]
    out: list[StepRow] = []
    for record in records:
        index = bisect.bisect_right(starts, record["start_ns"]) - 1
        row = timed[index][1] if index >= 0 else None
        phases: StepRow = {}
        end = row["end_ns"] if row is not None else None
        if row is not None and end is not None and record["start_ns"] <= end:
            phases = {key: value for key, value in row.items() if key.endswith("_ms")}
        out.append({**record, "duration_ms": (record["end_ns"] - record["start_ns"]) / 1e6, **phases})
    return out
