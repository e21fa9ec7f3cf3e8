"""Which collectors a profile runs, wired together, so the session only starts, stops and reads them."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypedDict, cast

from ...engine.device import device_index, is_cuda
from ...engine.engine import ENGINE_THREAD_NAME
from ...errors import ProfileError
from ..analysis.classify import IDLE_MARKER
from ..rundir.schema import CollectorStatus
from .base import Collector
from .device_time import DEVICE_SPANS, DeviceTimeCollector, DeviceTimeResult
from .gc import GcCollector, GcResult
from .gpu import GpuCollector, GpuResult
from .kernels import KernelCollector, KernelResult
from .sampling import SamplingCollector, SamplingResult
from .spans import RecordingTracer, SpanCollector, SpanResult

PROFILES = ("off", "default", "deep")
# An odd rate so samples do not fall in lockstep with periodic engine work (10 ms ticks, 60 Hz clocks); a
# low one because py-spy's cost grows with its rate (docs/measurements.md, "Figures that stood in code comments").
DEFAULT_RATE_HZ = 3  # a launched server's profile (session.target), where samples are the main measurement
# The built-in engine's spans time its phases exactly; its samples only cross-check them and show the threads
# the spans do not. py-spy's CPU a sample was half the default profile's cost (docs/measurements.md,
# "Crediting blocks by overlap, and a cheaper default profile"), so
# that engine is sampled less. An even rate could fall in step with periodic work; there that would bias
# only the cross-check.
TRACED_RATE_HZ = 2
DEEP_RATE_HZ = 29  # --native pauses the process to unwind every thread: a high rate costs many times more


def spans_record_cpu_time(profile: str) -> bool:
    """Whether spans also record the thread's CPU time: two system calls a span, several times what the rest
    of a C span costs (benchmarks/bench_tracer.py, docs/measurements.md), that nothing the default profile
    reports reads, so deep only."""
    return profile == "deep"


# torch.profiler windows as (first step, steps per window, period in steps). A profiled step runs slower, so
# windows are rare (what one step in a hundred costs, measured in-run: docs/measurements.md).
# Deep spends more for detail: five steps in forty, and their ops in kernel_events.csv.
DEFAULT_KERNEL_WINDOWS = (5, 1, 20)
# The kernel fraction's interval needs several windows (with one it cannot close: analysis.share_interval), so
# a default run opens its first DEFAULT_FIRST_WINDOWS at DEFAULT_FIRST_GAP_S apart, outside the budget; a
# short run then holds enough of them to resolve, at a fixed cost whatever the run's length (docs/measurements.md).
DEFAULT_FIRST_WINDOWS = 6
DEFAULT_FIRST_GAP_S = 0.5
# Each window costs the engine a few ms whatever the step's length (torch.profiler's start and stop), and
# the profiled step runs longer, by more the more ops it holds (an in-run A/B in docs/measurements.md). So
# windows open at least DEFAULT_WINDOW_GAP_S apart, and further apart when the last one cost more than
# DEFAULT_WINDOW_BUDGET of that gap: windows take at most about 0.1% of the engine's time on any model.
DEFAULT_WINDOW_GAP_S = 5.0
DEFAULT_WINDOW_BUDGET = 0.001
DEEP_KERNEL_WINDOWS = (20, 5, 40)
# A run that goes on until its answer is known (`run --until resolved`) needs the kernel fraction resolved, and
# one step's fraction moves a lot from window to window (a step's batch and phase change it): one step in ten,
# at least RESOLVE_WINDOW_GAP_S apart and within RESOLVE_WINDOW_BUDGET of the engine's time, so that tens of
# windows come in a minute; up to RESOLVE_MAX_WINDOWS kept (then thinned as any run's).
RESOLVE_KERNEL_WINDOWS = (5, 1, 10)
RESOLVE_WINDOW_GAP_S = 0.5
RESOLVE_WINDOW_BUDGET = 0.02
RESOLVE_MAX_WINDOWS = 64


class CollectorResults(TypedDict, total=False):
    """{collector name: its result()}: what a profile's collectors measured, by their `name`s."""

    spans: SpanResult
    gc: GcResult
    kernels: KernelResult
    device_time: DeviceTimeResult
    gpu: GpuResult
    sampling: SamplingResult
    processes: dict[int, SamplingResult]  # a server's run: each sampled process's py-spy result, by pid


def default_collectors(
    profile: str,
    *,
    pid: int | None = None,
    engine_thread_id_getter: Callable[[], int | None] | None = None,
    output_dir: str | Path | None = None,
    sampling_rate: int | None = None,
    kernel_windows: tuple[int, int, int] | None = None,
    py_spy: str | None = None,
    idle_marker: str | tuple[str, ...] = IDLE_MARKER,
    tracer: RecordingTracer | None = None,
    engine_thread_name: str = ENGINE_THREAD_NAME,
    device: str = "cpu",
    device_spans: tuple[str, ...] = DEVICE_SPANS,
    resolve: bool = False,
) -> list[Collector]:
    """The collectors of a profile, in start order (stop them in reverse).

    off:     none (the engine keeps engine.trace.NULL_TRACER)
    default: spans (wall clock only), GC, py-spy --nonblocking at 2 Hz, NVML when a GPU exists:
             the cheap ones, always on (py-spy reads every thread's stack per sample, so its rate
             stays low: see DEFAULT_RATE_HZ and TRACED_RATE_HZ; the whole profile's cost is measured by
             benchmarks/bench_overhead.py --in-run, docs/measurements.md), and torch.profiler over
             one step in every 20 (DEFAULT_KERNEL_WINDOWS), the first DEFAULT_FIRST_WINDOWS of them
             DEFAULT_FIRST_GAP_S apart, then at least DEFAULT_WINDOW_GAP_S apart and
             within DEFAULT_WINDOW_BUDGET of the engine's time: the model span's kernel share and
             torch's per-op fee measured in every run, not assumed
    deep:    the same, plus py-spy --native at 29 Hz (pauses the process and unwinds every thread
             per sample, so its cost grows with the threads and the rate: docs/measurements.md) and
             torch.profiler over `kernel_windows` = (first step, steps per window, period in
             steps): short windows spread over the run (collectors.kernels)
    on a GPU (`device` "cuda:N") both profiles add the device timer: CUDA events around the spans of
             device work (`device_spans`), for the GPU idle split.
    resolve: the run goes on until resolved: denser kernel windows (RESOLVE_KERNEL_WINDOWS), unless given.
    tracer: the RecordingTracer already injected into the engine (one is made when None).
    engine_thread_id_getter returns the engine thread's native id (Thread.native_id) once it runs;
    py-spy reports threads by that id, so the engine's samples are found even if renamed. Without
    it, the live thread named `engine_thread_name` is looked up when sampling stops.
    """
    if profile not in PROFILES:
        raise ProfileError(f"--profile={profile!r} is not a profile; use one of {', '.join(PROFILES)}")
    if profile == "off":
        return []
    deep = profile == "deep"
    spans = SpanCollector(cpu_time=spans_record_cpu_time(profile), tracer=tracer)
    collectors: list[Collector] = [spans, GcCollector(tracer=spans.tracer)]
    dense = resolve and not deep and kernel_windows is None
    collectors.append(_kernel_collector(spans.tracer, kernel_windows, deep=deep, dense=dense))
    if is_cuda(device):
        collectors.append(DeviceTimeCollector(tracer=spans.tracer, device=device, spans=device_spans))
    collectors.append(GpuCollector(device_index=device_index(device)))
    thread_id = engine_thread_id_getter or _thread_id_by_name(engine_thread_name)
    collectors.append(_sampler(pid, sampling_rate, py_spy, output_dir, idle_marker, thread_id, deep=deep))
    return collectors


def _sampler(
    pid: int | None,
    sampling_rate: int | None,
    py_spy: str | None,
    output_dir: str | Path | None,
    idle_marker: str | tuple[str, ...],
    engine_thread_id_getter: Callable[[], int | None],
    *,
    deep: bool,
) -> SamplingCollector:
    """py-spy over the process: deep's native stacks at its rate, else Python stacks at the traced rate."""
    return SamplingCollector(
        pid=pid if pid is not None else os.getpid(),
        rate=sampling_rate or (DEEP_RATE_HZ if deep else TRACED_RATE_HZ),
        native_stacks=deep,
        # Deep mode resolves kernels, so its samples must land when they are due: py-spy runs
        # under SCHED_FIFO where allowed (see sampling.PRIORITIES for the measured bias). The
        # cheap default mode, Python stacks only, stays nice so that it costs the engine least.
        priority="realtime" if deep else "low",
        py_spy=py_spy,
        output_dir=output_dir,
        idle_marker=idle_marker,
        engine_thread_id_getter=engine_thread_id_getter,
        ends_with_starter=True,  # session/drive.py starts and stops the collectors on one thread
    )


def _kernel_collector(
    tracer: RecordingTracer, kernel_windows: tuple[int, int, int] | None, *, deep: bool, dense: bool
) -> KernelCollector:
    """The torch.profiler windows of a profile: deep's, a resolving run's (dense) or the default's."""
    first_step, steps, every = kernel_windows or (
        DEEP_KERNEL_WINDOWS if deep else RESOLVE_KERNEL_WINDOWS if dense else DEFAULT_KERNEL_WINDOWS
    )
    # Each kept window holds torch.profiler's events (a few MB) until the run ends: the default keeps fewer.
    return KernelCollector(
        tracer=tracer,
        first_step=first_step,
        steps=steps,
        every=every,
        max_windows=16 if deep else RESOLVE_MAX_WINDOWS if dense else 8,
        # deep is for short runs, priced as such
        min_gap_s=0.0 if deep else RESOLVE_WINDOW_GAP_S if dense else DEFAULT_WINDOW_GAP_S,
        cost_budget=None if deep else RESOLVE_WINDOW_BUDGET if dense else DEFAULT_WINDOW_BUDGET,
        first_windows=0 if deep or dense else DEFAULT_FIRST_WINDOWS,
        first_gap_s=DEFAULT_FIRST_GAP_S,
    )


def _thread_id_by_name(name: str) -> Callable[[], int | None]:
    def native_id() -> int | None:
        return next((thread.native_id for thread in threading.enumerate() if thread.name == name), None)

    return native_id


def find_tracer(collectors: list[Collector]) -> RecordingTracer | None:
    """The tracer to inject into the engine (None: use engine.trace.NULL_TRACER)."""
    for collector in collectors:
        if isinstance(collector, SpanCollector):
            return collector.tracer
    return None


def start_all(collectors: list[Collector]) -> None:
    for collector in collectors:
        collector.start()


def stop_all(collectors: list[Collector]) -> None:
    for collector in reversed(collectors):
        collector.stop()


def results(collectors: list[Collector]) -> CollectorResults:
    """{name: result} for build_breakdown and overhead_section."""
    # Each collector class's `name` is its key in CollectorResults, whose types are the classes' results.
    return cast(CollectorResults, {collector.name: collector.result() for collector in collectors})


def collectors_section(collectors: list[Collector]) -> dict[str, CollectorStatus]:
    """The result's `collectors` section: {name: {status, reason}}."""
    return {collector.name: collector.status_entry() for collector in collectors}
