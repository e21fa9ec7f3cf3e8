"""A GPU run's device time: the one-line summary and the table with NVML's view beside CUDA events'."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from ....profiler.rundir.results import RunResult
from ....profiler.rundir.schema import Nvml, NvmlProcess, NvmlStats
from ...format import fmt_number, fmt_pct
from .table import Table


def gpu_line(result: RunResult) -> str | None:
    """A GPU run's device time in one line: busy, idle waiting for the host (and for what most), idle with no work."""
    gpu = result.gpu_time
    if not gpu:
        return None
    waited = {
        name: share for name, share in (gpu.get("idle_host_by_component") or {}).items() if share is not None
    }
    most = f" (most for the {max(waited, key=lambda name: waited[name]).replace('_', ' ')})" if waited else ""
    return (
        f"GPU: busy {fmt_pct(gpu.get('busy_share'))}, idle waiting for the host {fmt_pct(gpu.get('idle_host_share'))}"
        f"{most}, idle with no work {fmt_pct(gpu.get('idle_no_work_share'))}."
    )


def gpu_table(result: RunResult) -> Table | None:
    """A GPU run's device timeline: busy, idle waiting for the host (by host work), idle with no work."""
    gpu = result.gpu_time
    if not gpu:
        return None
    table = Table("GPU time", ["figure", "value"])
    table.rows += [
        ["device busy (CUDA events)", fmt_pct(gpu.get("busy_share"))],
        ["idle, waiting for the host", fmt_pct(gpu.get("idle_host_share"))],
        ["idle, no work", fmt_pct(gpu.get("idle_no_work_share"))],
    ]
    waited = sorted((gpu.get("idle_host_by_component") or {}).items(), key=lambda item: -(item[1] or 0.0))
    table.sections.append(len(table.rows))
    table.rows += [[f"  of the wait: {name.replace('_', ' ')}", fmt_pct(part)] for name, part in waited]
    table.sections.append(len(table.rows))
    busy_ns = gpu.get("busy_ns_per_step")
    table.rows += [
        ["idle between kernels (profiler windows)", fmt_pct(gpu.get("window_gpu_idle_fraction"))],
        ["kernels per step", fmt_number(gpu.get("kernels_per_step"))],
        ["launches per step", fmt_number(gpu.get("launches_per_step"))],
        [
            "device time per step (ms)",
            fmt_number(busy_ns / 1e6 if isinstance(busy_ns, (int, float)) else busy_ns),
        ],
    ]
    nvml = gpu.get("nvml")
    if nvml:
        table.sections.append(len(table.rows))
        table.rows += nvml_rows(nvml)
    return table


def nvml_rows(nvml: Nvml) -> list[list[str]]:
    """NVML's view beside the events': this process's device memory and SM time, and the whole device's
    utilization (every process on it); a figure the driver did not report reads "not reported"."""
    if nvml.get("status", "ok") != "ok":
        return [["NVML", f"{nvml.get('status')}: {nvml.get('reason') or 'no reason given'}"]]
    process: NvmlProcess = nvml.get("process") or {}

    def stat(stats: NvmlStats | None, key: Literal["mean", "max"], unit: str) -> str:
        value = stats.get(key) if isinstance(stats, Mapping) else None
        return fmt_number(value, unit) if value is not None else "not reported"

    memory = process.get("memory_used_mib")
    return [
        [
            "this process's device memory, mean / max (NVML)",
            f"{stat(memory, 'mean', 'MiB')} / {stat(memory, 'max', 'MiB')}",
        ],
        ["this process's SM time, mean (NVML)", stat(process.get("sm_utilization_pct"), "mean", "%")],
        ["whole device utilization, mean (NVML)", stat(nvml.get("utilization_pct"), "mean", "%")],
    ]
