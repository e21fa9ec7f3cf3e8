"""result.json's `gpu_time`: the device timer's event pairs, the engine's steps and spans and the requests in flight, split by analysis.gpu_idle."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..analysis.breakdown import SPAN_COMPONENTS
from ..analysis.gpu_idle import device_intervals, gpu_idle_split
from ..collectors.spans import STEP_SPAN
from ..rundir.schema import GpuTime, Nvml

if TYPE_CHECKING:
    from ..collectors.device_time import DeviceTimeCollector
    from ..collectors.gpu import GpuResult
    from ..collectors.kernels import KernelResult
    from ..collectors.spans import RecordingTracer
    from .record import RequestRow


def gpu_time_section(
    device_timer: DeviceTimeCollector | None,
    tracer: RecordingTracer | None,
    request_rows: Sequence[RequestRow],
    window: tuple[int, int],
    *,
    engine_thread_name: str,
    kernels: KernelResult | None = None,
    nvml: GpuResult | None = None,
) -> GpuTime | None:
    """The GPU idle split of a run on a GPU, or None when the device timer did not run (a CPU run)."""
    if device_timer is None or device_timer.status != "ok":
        return None
    assert tracer is not None  # the device timer hooks the tracer's spans: it runs on traced runs only
    steps: list[tuple[int, int]] = []
    spans: dict[str, list[tuple[int, int]]] = {}
    for state in tracer.thread_states():
        if state.thread.name != engine_thread_name:
            continue
        for name, start, end, *_rest in state.events.records():
            if name == STEP_SPAN:
                steps.append((start, end))
            elif name in SPAN_COMPONENTS:
                spans.setdefault(SPAN_COMPONENTS[name], []).append((start, end))
    in_flight = [
        (row["arrival_ns"], finish)
        for row in request_rows
        if row["arrival_ns"] is not None and (finish := row["finish_ns"]) is not None
    ]
    split = gpu_idle_split(
        window=window,
        device=device_intervals(device_timer.pairs()),
        steps=steps,
        in_flight=in_flight,
        spans=spans,
    )
    kernels = kernels or {}
    cuda, profiled = kernels.get("cuda"), kernels.get("profiled_steps") or 0
    return {
        **device_timer.figures(),
        **split,
        # From the torch.profiler windows: gaps between kernels inside the spans the events count as busy.
        "window_gpu_idle_fraction": cuda.get("gpu_idle_fraction") if cuda else None,
        "kernels_per_step": cuda["kernels"] / profiled if cuda and cuda.get("kernels") and profiled else None,
        "launches_per_step": kernels.get("launches_per_step"),
        "mean_kernel_ns": cuda.get("mean_kernel_ns") if cuda else None,
        "top_kernels": (cuda.get("top_kernels") if cuda else None) or [],
        "nvml": nvml_figures(nvml),
    }


def nvml_figures(nvml: GpuResult | None) -> Nvml:
    """The NVML collector's figures as result.json keeps them: this process's memory and SM time beside
    the whole device's, or the status and reason when it did not run."""
    if not nvml or nvml.get("status", "ok") != "ok":
        return {"status": (nvml or {}).get("status", "off"), "reason": (nvml or {}).get("reason")}
    figures = nvml.copy()  # the collector's keys are Nvml's, and its own cost
    figures.pop("overhead", None)
    return figures
