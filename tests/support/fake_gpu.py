"""A fake GPU stream and its CUDA events on a fake host clock, for the device timer's tests."""

from __future__ import annotations

from typing import Any


class FakeGpu:
    """One stream: work launched at host time h starts when the stream is free and h has come."""

    def __init__(self) -> None:
        self.now = 0  # the host clock, ns
        self.free_at = 0

    def clock(self) -> int:
        return self.now

    def launch(self, duration: int) -> None:
        self.free_at = max(self.now, self.free_at) + duration

    def event(self) -> FakeEvent:
        return FakeEvent(self)


class FakeEvent:
    def __init__(self, gpu: FakeGpu) -> None:
        self.gpu = gpu
        self.at: int | None = None

    def record(self) -> None:
        self.at = max(self.gpu.now, self.gpu.free_at)  # reached when the work queued before it is done

    def query(self) -> bool:
        return self.at is not None and self.at <= self.gpu.now

    def synchronize(self) -> None:
        assert self.at is not None
        self.gpu.now = max(self.gpu.now, self.at)

    def elapsed_time(self, end: FakeEvent) -> float:
        assert self.at is not None and end.at is not None and end.query(), "read before completion"
        return (end.at - self.at) / 1e6


def run_steps(gpu: FakeGpu, tracer: Any, steps: int) -> None:
    """Per step: 10 ns of scheduling, a model span launching 50 ns of kernels in 5 ns of host time, a
    blocking copy of the logits (the host waits for the device), 20 ns of host-side sampling."""
    for _ in range(steps):
        with tracer.span("step"):
            with tracer.span("scheduler"):
                gpu.now += 10
            with tracer.span("model"):
                gpu.launch(50)
                gpu.now += 5
            with tracer.span("d2h"):
                gpu.now = max(gpu.now, gpu.free_at)  # the copy waits for the model's kernels
            with tracer.span("sampler"):
                gpu.now += 20
