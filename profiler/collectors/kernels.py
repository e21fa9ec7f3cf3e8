"""torch.profiler over a short window of engine steps: aten op self time per span, ops per step, CUDA kernel time.

torch.profiler slows a CPU step x1.3-1.7 and records ~5,000 events per step, so it runs only for
`steps` steps starting at `first_step` (after warm-up), switched on and off by the spans tracer's step
callbacks on the engine thread. While it runs, every engine span is also marked as a
`record_function("span:<name>")`, so each aten op's self time is attributed to the span it ran in
(model, sampler...): that is how the breakdown splits a span into kernel time and Python glue.
"""

from __future__ import annotations

import re
import threading
import time
from collections import defaultdict
from typing import Any

from profiler.collectors.base import Collector
from profiler.collectors.spans import RecordingTracer

SPAN_PREFIX = "span:"
OUTSIDE_SPANS = ""
# CPU-side GPU runtime/driver calls: cudaStreamSynchronize, cudaLaunchKernel, cuLaunchKernel, hipMemcpy...
_RUNTIME = re.compile(r"^(?:cuda[A-Z]|cu[A-Z]|hip[A-Z])")


def _interval_union(intervals: list[tuple[float, float]]) -> float:
    """Total length covered by possibly overlapping intervals."""
    if not intervals:
        return 0.0
    ordered = sorted(intervals)
    covered = 0.0
    current_start, current_end = ordered[0]
    for start, end in ordered[1:]:
        if start > current_end:
            covered += current_end - current_start
            current_start, current_end = start, end
        else:
            current_end = max(current_end, end)
    return covered + current_end - current_start


def summarize_events(events: list[Any], steps: int) -> dict[str, Any]:
    """Summarize torch.profiler FunctionEvents (times in us) of a window of `steps` steps."""
    by_span: dict[str, dict[str, float]] = defaultdict(
        lambda: {"aten_self_ns": 0.0, "ops": 0, "device_ns": 0.0, "runtime_ns": 0.0}
    )
    by_op: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    total_self_us = 0.0
    ops = top_level_ops = 0
    gpu_intervals: list[tuple[float, float]] = []
    window_start = window_end = None
    for event in events:
        name = event.name
        start, end = event.time_range.start, event.time_range.end
        device_type = str(getattr(event, "device_type", "CPU"))
        if "CUDA" in device_type:
            gpu_intervals.append((start, end))
            continue
        window_start = start if window_start is None else min(window_start, start)
        window_end = end if window_end is None else max(window_end, end)
        runtime = _RUNTIME.match(name) is not None
        if not (runtime or _is_op(name)):
            continue
        parent = event.cpu_parent
        top_level = parent is None or not _is_op(parent.name)
        span = OUTSIDE_SPANS
        while parent is not None:
            if parent.name.startswith(SPAN_PREFIX):
                span = parent.name[len(SPAN_PREFIX) :]
                break
            parent = parent.cpu_parent
        self_us = event.self_cpu_time_total
        if runtime:
            # CUDA runtime calls (launches, copies, synchronizations) sit under aten ops, outside their
            # self time: waiting for the GPU at a sync is kernel time, not the span's Python.
            by_span[span]["runtime_ns"] += self_us * 1e3
            continue
        device_us = getattr(event, "self_device_time_total", 0.0) or 0.0
        entry = by_span[span]
        entry["aten_self_ns"] += self_us * 1e3
        entry["ops"] += 1
        entry["device_ns"] += device_us * 1e3
        by_op[name][0] += self_us * 1e3
        by_op[name][1] += 1
        total_self_us += self_us
        ops += 1
        top_level_ops += top_level
    top_ops = sorted(by_op.items(), key=lambda item: -item[1][0])[:15]
    cuda = None
    if gpu_intervals:
        busy_us = _interval_union(gpu_intervals)
        span_us = (window_end - window_start) if window_start is not None else 0.0
        cuda = {
            "kernels": len(gpu_intervals),
            "kernel_ns": sum(end - start for start, end in gpu_intervals) * 1e3,
            "busy_ns": busy_us * 1e3,
            "window_ns": span_us * 1e3,
            "idle_gap_ns": max(0.0, span_us - busy_us) * 1e3,
            "gpu_idle_fraction": max(0.0, 1 - busy_us / span_us) if span_us > 0 else None,
        }
    return {
        "aten_self_ns": total_self_us * 1e3,
        "by_span": {span: dict(values) for span, values in by_span.items()},
        "ops_per_step": ops / steps if steps else None,
        "top_level_ops_per_step": top_level_ops / steps if steps else None,
        "top_ops": [
            {"name": name, "self_ns": values[0], "count": int(values[1])} for name, values in top_ops
        ],
        "cuda": cuda,
    }


class KernelCollector(Collector):
    """Runs torch.profiler over steps [first_step, first_step + steps) of the engine thread.

    result() = {window: {first_step, steps, completed}, aten_self_ns, by_span: {span: {aten_self_ns,
    ops, device_ns, runtime_ns}}, ops_per_step, top_level_ops_per_step, top_ops, cuda: null | {kernels, kernel_ns,
    busy_ns, window_ns, idle_gap_ns, gpu_idle_fraction}, overhead: {window_step_ms, before_step_ms,
    slowdown, engine_pause_ns}}
    `engine_pause_ns` is the time the engine thread spent starting/stopping the profiler between
    steps (outside every span); the breakdown moves it from idle to other.
    """

    name = "kernels"

    def __init__(
        self,
        *,
        tracer: RecordingTracer | None = None,
        first_step: int = 20,
        steps: int = 10,
        mark_spans: bool = True,
        warm_up: bool = True,
    ) -> None:
        super().__init__()
        if steps < 1 or first_step < 0:
            raise ValueError("kernel window needs first_step >= 0 and steps >= 1")
        self.first_step = first_step
        self.steps = steps
        self._tracer = tracer
        self._mark_spans = mark_spans and tracer is not None
        self._profile: Any = None
        self._finished: Any = (
            None  # the stopped profile; its events are read after the run, off the engine thread
        )
        self._profiled_steps = 0
        self._step_begin: dict[int, int] = {}
        self._step_ms: dict[int, float] = {}
        self._engine_pause_ns = 0
        self._marks = threading.local()
        self._cuda = False
        self._lock = threading.Lock()  # stop() (session thread) vs the window's end (engine thread)
        try:
            import torch  # noqa: F401
        except ImportError:
            self.skip("torch is not importable")
            return
        if warm_up:
            self._warm_up()

    def _warm_up(self) -> None:
        """Start and stop torch.profiler once now: its first start costs ~0.9 s here (one-time init), which
        would otherwise pause the engine thread in the middle of the run."""
        import torch
        import torch.profiler as torch_profiler

        try:
            with torch_profiler.profile(activities=[torch_profiler.ProfilerActivity.CPU]):
                torch.zeros(1).add_(1)
        except Exception as exc:  # noqa: BLE001
            self.skip(f"torch.profiler does not work here: {type(exc).__name__}: {exc}")

    def _start(self) -> None:
        import torch

        self._cuda = torch.cuda.is_available()
        if self._tracer is not None:
            self._tracer.add_step_listener(self.on_step)

    def on_step(self, step: int, begin: bool) -> None:
        """Step callback (engine thread): open the window at its first step, close it after its last."""
        if self.status != "ok":
            return
        now = time.perf_counter_ns()
        if begin:
            self._step_begin[step] = now
            if step == self.first_step and self._profile is None and self._finished is None:
                self._open_window()
                self._engine_pause_ns += time.perf_counter_ns() - now
                self._step_begin[step] = time.perf_counter_ns()
            return
        began = self._step_begin.pop(step, None)
        if began is not None and self.first_step - self.steps <= step < self.first_step + self.steps:
            self._step_ms[step] = (now - began) / 1e6
        if self._profile is not None and step >= self.first_step:
            self._profiled_steps = step - self.first_step + 1
            if step == self.first_step + self.steps - 1:
                self._close_window()
                self._engine_pause_ns += time.perf_counter_ns() - now

    def _open_window(self) -> None:
        try:
            import torch.profiler as torch_profiler

            activities = [torch_profiler.ProfilerActivity.CPU]
            if self._cuda:
                activities.append(torch_profiler.ProfilerActivity.CUDA)
            profile = torch_profiler.profile(activities=activities, record_shapes=False, with_stack=False)
            profile.__enter__()
            self._profile = profile
            if self._mark_spans and self._tracer is not None:
                self._tracer.set_span_hook(self._mark)
        except Exception as exc:  # noqa: BLE001 - never break the engine thread
            self.fail(f"torch.profiler could not start: {type(exc).__name__}: {exc}")

    def _mark(self, name: str, enter: bool) -> None:
        import torch.profiler as torch_profiler

        stack = getattr(self._marks, "stack", None)
        if stack is None:
            stack = self._marks.stack = []
        if enter:
            scope = torch_profiler.record_function(SPAN_PREFIX + name)
            scope.__enter__()
            stack.append(scope)
        elif stack:
            stack.pop().__exit__(None, None, None)

    def _close_window(self) -> None:
        with self._lock:
            profile = self._profile
            if profile is None:
                return
            self._profile = None
            if self._tracer is not None:
                self._tracer.set_span_hook(None)
            try:
                profile.__exit__(None, None, None)
                self._finished = profile
            except Exception as exc:  # noqa: BLE001
                self.fail(f"torch.profiler could not stop: {type(exc).__name__}: {exc}")

    def _stop(self) -> None:
        # A run shorter than the window still reports what it profiled.
        self._close_window()

    def _result(self) -> dict[str, Any]:
        window = {
            "first_step": self.first_step,
            "steps": self._profiled_steps,
            "completed": self._profiled_steps == self.steps,
        }
        if self._finished is None:
            return {
                "window": window,
                "aten_self_ns": None,
                "by_span": {},
                "ops_per_step": None,
                "top_level_ops_per_step": None,
                "top_ops": [],
                "cuda": None,
                "overhead": {"engine_pause_ns": self._engine_pause_ns},
                "note": f"the run ended before step {self.first_step}: no kernel window",
            }
        summary = summarize_events(list(self._finished.events()), self._profiled_steps)
        inside = [ms for step, ms in self._step_ms.items() if step >= self.first_step]
        before = [ms for step, ms in self._step_ms.items() if step < self.first_step]
        inside_mean = sum(inside) / len(inside) if inside else None
        before_mean = sum(before) / len(before) if before else None
        summary["window"] = window
        summary["overhead"] = {
            "window_step_ms": inside_mean,
            "before_step_ms": before_mean,
            # Steps before the window may differ in shape (prefill vs decode): a rough ratio only.
            "slowdown": inside_mean / before_mean if inside_mean and before_mean else None,
            "engine_pause_ns": self._engine_pause_ns,
        }
        return summary


def _is_op(name: str) -> bool:
    """A dispatched torch op of any namespace: aten::mm, but also mkldnn::_linear_pointwise (the model's
    linears on CPU), quantized::..., and custom ops; span markers are `span:<name>` (one colon)."""
    return "::" in name and not name.startswith(SPAN_PREFIX)
