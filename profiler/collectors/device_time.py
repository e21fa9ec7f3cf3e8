"""CUDA events around the spans of device work (the model's forward, the copy to the host): the device's busy time per step, always on and cheap.

The collector hooks the tracer's span enter/exit on the engine thread. Entering a device-work span
records a start event on the model's stream and notes the host clock; leaving it records an end
event. The stream reaches the start event when the work queued before it is done (at once on an idle
stream) and the end event when the span's own work is done: their elapsed time is the span's time
on the device timeline. That is its busy time when the host keeps the stream fed; gaps between
kernels that the host launched too slowly count as busy here (an upper bound; the torch.profiler
windows measure those gaps). A span of mostly host work must not be paired: its end event is
reached when it is recorded, and the pair would time the host. So the sampler is never paired, not
even the Python sampler running its small kernels on a GPU: its span counts as host time. Pairs are read back (elapsed_time) once their end event has completed, at a later span exit,
so reading never blocks the engine, and at stop. Events are pooled: a step costs a few
`Event.record` calls (microseconds of host time), no allocation and no synchronization.

`pairs()` gives (host ns the start was recorded, device ns elapsed) in recording order, which
analysis.gpu_idle places on the host clock. On a CPU engine the collector skips itself.
"""

from __future__ import annotations

from array import array
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypedDict

from ...engine.device import is_cuda
from .base import Collector, CollectorResult

if TYPE_CHECKING:
    from .spans import RecordingTracer

DEVICE_SPANS = ("model", "d2h")
EventFactory = Callable[
    [], Any
]  # () -> an object with record(), query(), synchronize(), elapsed_time(end) in ms


class DeviceFigures(TypedDict, total=False):
    """The device timer's summary (DeviceTimeCollector.figures, which gives every key)."""

    device: str
    pairs: int
    unread_pairs: int
    steps: int
    device_busy_ns: int
    busy_ns_per_step: float | None
    spans: list[str]
    method: str


class DeviceTimeResult(CollectorResult, DeviceFigures, total=False):
    """DeviceTimeCollector.result(): its figures, once it ran."""


class DeviceTimeCollector(Collector[DeviceTimeResult]):
    """Device-busy time per span of device work, from CUDA event pairs; result() summarizes, pairs() feeds the split."""

    name = "device_time"

    def __init__(
        self,
        *,
        tracer: RecordingTracer,
        device: str,
        spans: tuple[str, ...] = DEVICE_SPANS,
        event_factory: EventFactory | None = None,
    ) -> None:
        super().__init__()
        self.spans = frozenset(spans)
        self._tracer = tracer
        self.device = device
        self._event_factory = event_factory
        self._clock = tracer.clock
        self._open: dict[str, tuple[int, Any]] = {}
        self._pending: deque[tuple[int, str, int, Any, Any]] = (
            deque()
        )  # (step, span, host ns, start, end event)
        self._pool: list[Any] = []
        self._records = array("q")  # step, host ns, elapsed ns; three per pair
        self._names: list[str] = []  # the span of each pair
        self._unread = 0  # pairs whose events could not be read (a failed or reset stream)
        if not is_cuda(device):
            self.skip("the engine runs on the CPU: no device timeline to measure")

    # -- collector --------------------------------------------------------------------------------

    def _start(self) -> None:
        if self._event_factory is None:
            import torch

            stream = torch.cuda.current_stream(torch.device(self.device))

            def cuda_event() -> Any:
                return _StreamEvent(torch.cuda.Event(enable_timing=True), stream)

            self._event_factory = cuda_event
        self._tracer.add_span_hook(self._on_span)

    def _stop(self) -> None:
        self._tracer.remove_span_hook(self._on_span)
        self._read(block=True)

    def _result(self) -> DeviceTimeResult:
        return {**self.figures()}

    def figures(self) -> DeviceFigures:
        """The event pairs' figures (result.json's gpu_time carries them): the device, pairs, steps, busy time."""
        records = self._records
        elapsed = records[2::3]
        steps = {step for step in records[0::3] if step >= 0}
        return {
            "device": self.device,
            "pairs": len(elapsed),
            "unread_pairs": self._unread,
            "steps": len(steps),
            "device_busy_ns": int(sum(elapsed)),
            "busy_ns_per_step": (sum(elapsed) / len(steps)) if steps else None,
            "spans": sorted(self.spans),
            "method": "CUDA event pairs around each span of device work (gaps between its kernels count as busy; "
            "the torch.profiler windows measure those)",
        }

    # -- engine thread ----------------------------------------------------------------------------

    def _on_span(self, name: str, enter: bool) -> None:
        if name not in self.spans:
            return
        if enter:
            event = self._take()
            event.record()
            self._open[name] = (self._clock(), event)
            return
        opened = self._open.pop(name, None)
        if opened is None:
            return
        end = self._take()
        end.record()
        self._pending.append((self._tracer.current_step(), name, opened[0], opened[1], end))
        self._read(block=False)

    def _take(self) -> Any:
        return self._pool.pop() if self._pool else self._event_factory()  # type: ignore[misc]

    def _read(self, *, block: bool) -> None:
        """Elapsed times of the pairs whose end event completed (all of them when `block`), in order."""
        pending = self._pending
        while pending:
            step, name, host_ns, start, end = pending[0]
            try:
                if block:
                    end.synchronize()
                elif not end.query():
                    return
                elapsed_ns = int(start.elapsed_time(end) * 1e6)
            except RuntimeError:
                self._unread += 1
            else:
                self._records.extend((step, host_ns, elapsed_ns))
                self._names.append(name)
            pending.popleft()
            self._pool += (start, end)

    # -- readers ----------------------------------------------------------------------------------

    def pairs(self) -> list[tuple[int, int]]:
        """(host ns the start event was recorded, device ns elapsed) of every pair read, in recording order."""
        records = self._records
        return list(zip(records[1::3], records[2::3], strict=True))

    def timeline(self) -> list[tuple[int, str, int, int]]:
        """(step, span, start ns, end ns) of each pair's device work on the host clock (gpu_timeline.csv)."""
        from ..analysis.gpu_idle import device_intervals

        intervals = device_intervals(self.pairs())
        return [
            (step, name, start, end)
            for step, name, (start, end) in zip(self._records[0::3], self._names, intervals, strict=True)
        ]


class _StreamEvent:
    """A CUDA event that records on the model's stream (not the calling thread's current device)."""

    __slots__ = ("event", "stream")

    def __init__(self, event: Any, stream: Any) -> None:
        self.event = event
        self.stream = stream

    def record(self) -> None:
        self.event.record(self.stream)

    def query(self) -> bool:
        return bool(self.event.query())

    def synchronize(self) -> None:
        self.event.synchronize()

    def elapsed_time(self, end: _StreamEvent) -> float:
        return float(self.event.elapsed_time(end.event))
