"""GC pauses through gc.callbacks: when, how long, which generation, and on which thread (and span)."""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable
from typing import TypedDict

from .base import Collector, CollectorResult
from .spans import RecordingTracer


class GcGeneration(TypedDict):
    count: int
    total_ns: int
    collected: int


class GcThread(TypedDict):
    count: int
    total_ns: int


class GcOverhead(TypedDict):
    """The callbacks' own cost: each pair's, timed at start, and all of them together."""

    per_callback_ns: float
    estimated_ns: float


class GcResult(CollectorResult, total=False):
    """GcCollector.result(): the pauses in total, by generation and by thread, and what timing them cost."""

    collections: int
    total_ns: int
    max_ns: int
    by_generation: dict[str, GcGeneration]
    by_thread: dict[str, GcThread]
    overhead: GcOverhead


class GcCollector(Collector[GcResult]):
    """Times every collection; when given the spans tracer, each pause also becomes a child of the open span.

    The pause is reported to the tracer so the span's self time excludes it (allocation, not
    interpreter) and the pause is attributed to the span (component) that triggered it.

    result() = {collections, total_ns, max_ns, by_generation: {gen: {count, total_ns, collected}},
    by_thread: {thread name: {count, total_ns}}, overhead: {per_callback_ns, estimated_ns}}
    """

    name = "gc"

    def __init__(
        self, *, tracer: RecordingTracer | None = None, clock: Callable[[], int] | None = None
    ) -> None:
        super().__init__()
        self._tracer = tracer
        # One clock with the tracer: pauses and spans must be comparable.
        self._clock = clock or (tracer.clock if tracer is not None else time.perf_counter_ns)
        self._open: dict[int, tuple[int, int]] = {}  # thread ident -> (start_ns, generation)
        # (thread ident, thread name, generation, start_ns, end_ns, collected)
        self._pauses: list[tuple[int, str, int, int, int, int]] = []
        self._callback_cost_ns = 0.0

    def _start(self) -> None:
        self._callback_cost_ns = self._measure_callback_cost()
        gc.callbacks.append(self._on_gc)

    def _stop(self) -> None:
        if self._on_gc in gc.callbacks:
            gc.callbacks.remove(self._on_gc)

    def _can_pause(self) -> bool:
        return True

    def _pause(self) -> None:
        self._stop()

    def _resume(self) -> None:
        gc.callbacks.append(self._on_gc)

    def _on_gc(self, phase: str, info: dict[str, int]) -> None:
        now = self._clock()
        ident = threading.get_ident()
        if phase == "start":
            self._open[ident] = (now, info.get("generation", -1))
            return
        opened = self._open.pop(ident, None)
        if opened is None:
            return  # started before this collector did
        start, generation = opened
        self._pauses.append(
            (ident, threading.current_thread().name, generation, start, now, info.get("collected", 0))
        )
        if self._tracer is not None:
            self._tracer.record_pause("gc", start, now)

    def pauses(self) -> list[tuple[int, str, int, int, int, int]]:
        """Every pause: (thread ident, thread name, generation, start_ns, end_ns, collected), for trace export."""
        return list(self._pauses)

    def _result(self) -> GcResult:
        by_generation: dict[str, GcGeneration] = {}
        by_thread: dict[str, GcThread] = {}
        total = 0
        longest = 0
        for _ident, thread_name, generation, start, end, collected in self._pauses:
            duration = end - start
            total += duration
            longest = max(longest, duration)
            gen = by_generation.setdefault(str(generation), {"count": 0, "total_ns": 0, "collected": 0})
            gen["count"] += 1
            gen["total_ns"] += duration
            gen["collected"] += collected
            thread = by_thread.setdefault(thread_name, {"count": 0, "total_ns": 0})
            thread["count"] += 1
            thread["total_ns"] += duration
        count = len(self._pauses)
        return {
            "collections": count,
            "total_ns": total,
            "max_ns": longest,
            "by_generation": by_generation,
            "by_thread": by_thread,
            # Two callbacks per collection; their cost lands inside the measured pauses and the run.
            "overhead": {
                "per_callback_ns": self._callback_cost_ns,
                "estimated_ns": 2 * count * self._callback_cost_ns,
            },
        }

    def _measure_callback_cost(self, repeats: int = 500) -> float:
        """Time the callback pair on a scratch collector (no tracer) so the cost can be reported."""
        scratch = GcCollector(clock=self._clock)
        info = {"generation": 0, "collected": 0, "uncollectable": 0}
        start = time.perf_counter_ns()
        for _ in range(repeats):
            scratch._on_gc("start", info)
            scratch._on_gc("stop", info)
        return (time.perf_counter_ns() - start) / (2 * repeats)
