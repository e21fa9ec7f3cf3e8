"""GPU utilization and memory, of this process and of the whole device, sampled through NVML on a background thread."""

from __future__ import annotations

import contextlib
import os
import statistics
import threading
import time
from typing import Any, TypedDict

from ..rundir.schema import Nvml, NvmlStats
from .base import Collector


class NvmlDevice(TypedDict, total=False):
    """The device as NVML names it, read once at construction."""

    device: str
    driver: str
    memory_total_mib: float


class GpuOverhead(TypedDict):
    sampler_cpu_s: float  # the sampling thread's CPU time


class GpuResult(Nvml, total=False):
    """GpuCollector.result(): result.json's nvml figures and what sampling them cost."""

    overhead: GpuOverhead


def _nvml() -> Any:
    import pynvml  # nvidia-ml-py; imported lazily so a machine without it still profiles

    return pynvml


def _stats(values: list[float]) -> NvmlStats | None:
    if not values:
        return None
    return {"mean": statistics.fmean(values), "p50": statistics.median(values), "max": max(values)}


class GpuCollector(Collector[GpuResult]):
    """Samples one GPU every `interval_s`: this process's memory and SM utilization, and the device's.

    result() = {device, driver, samples, interval_s, process: {pid, samples, memory_used_mib: {mean, p50,
    max}, sm_utilization_pct: {..}}, utilization_pct: {..}, memory_utilization_pct: {..}, memory_used_mib:
    {..}, memory_total_mib, overhead: {sampler_cpu_s}}. The unprefixed figures are the whole device's
    (every process on it); `process` is this one's (nvmlDeviceGetComputeRunningProcesses for memory,
    nvmlDeviceGetProcessUtilization for SM time, None where the driver does not report it).
    On a machine without an NVIDIA GPU or driver the status is "skipped" with the reason; never raises.
    """

    name = "gpu"

    # Once a second: the driver's utilization counters average over their own sample period (1/6 s to
    # 1 s), so faster polls mostly re-read them, and each poll's NVML calls cost CPU time
    # (docs/measurements.md, "The GPU check on an H100").
    def __init__(self, *, device_index: int = 0, interval_s: float = 1.0) -> None:
        super().__init__()
        self.device_index = device_index
        self.interval_s = interval_s
        self._thread: threading.Thread | None = None
        self._stop_event = threading.Event()
        self._samples: list[tuple[float, float, float]] = []  # (gpu %, memory %, used MiB) of the device
        self.pid = os.getpid()
        self._process_memory: list[float] = []  # MiB this process holds on the device
        self._process_sm: list[float] = []  # % of SM time this process's kernels used
        self._last_seen_us = 0
        self._device: NvmlDevice = {}
        self._sampler_cpu_ns = 0
        self._probe()

    def _probe(self) -> None:
        try:
            nvml = _nvml()
        except ImportError:
            self.skip("no NVIDIA GPU/driver: nvidia-ml-py (pynvml) is not installed")
            return
        try:
            nvml.nvmlInit()
        except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
            self.skip(f"no NVIDIA GPU/driver ({exc})")
            return
        try:
            count = nvml.nvmlDeviceGetCount()
            if count <= self.device_index:
                self.skip(f"no NVIDIA GPU/driver: {count} device(s), index {self.device_index} asked for")
                return
            handle = nvml.nvmlDeviceGetHandleByIndex(self.device_index)
            name = nvml.nvmlDeviceGetName(handle)
            driver = nvml.nvmlSystemGetDriverVersion()
            memory = nvml.nvmlDeviceGetMemoryInfo(handle)
            self._device = {
                "device": name.decode() if isinstance(name, bytes) else name,
                "driver": driver.decode() if isinstance(driver, bytes) else driver,
                "memory_total_mib": memory.total / 2**20,
            }
        except Exception as exc:
            self.skip(f"no usable NVIDIA GPU ({type(exc).__name__}: {exc})")
        finally:
            with contextlib.suppress(Exception):
                nvml.nvmlShutdown()

    def _start(self) -> None:
        nvml = _nvml()
        nvml.nvmlInit()
        self._stop_event.clear()
        self._thread = threading.Thread(target=self._run, name="infer-prof-nvml", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        nvml = _nvml()
        handle = nvml.nvmlDeviceGetHandleByIndex(self.device_index)
        cpu_start = time.thread_time_ns()
        while not self._stop_event.is_set():
            # A missed reading is not worth stopping the run.
            with contextlib.suppress(Exception):
                rates = nvml.nvmlDeviceGetUtilizationRates(handle)
                memory = nvml.nvmlDeviceGetMemoryInfo(handle)
                self._samples.append((float(rates.gpu), float(rates.memory), memory.used / 2**20))
            with contextlib.suppress(Exception):
                self._sample_process(nvml, handle)
            self._stop_event.wait(self.interval_s)
        self._sampler_cpu_ns = time.thread_time_ns() - cpu_start

    def _sample_process(self, nvml: Any, handle: Any) -> None:
        for process in nvml.nvmlDeviceGetComputeRunningProcesses(handle):
            used = getattr(process, "usedGpuMemory", None)
            if process.pid == self.pid and used is not None:
                self._process_memory.append(used / 2**20)
        # Utilization samples the driver kept since the last call; raises (NotFound) when there are none.
        samples = nvml.nvmlDeviceGetProcessUtilization(handle, self._last_seen_us)
        for sample in samples:
            self._last_seen_us = max(self._last_seen_us, int(sample.timeStamp))
            if sample.pid == self.pid:
                self._process_sm.append(float(sample.smUtil))

    def _stop(self) -> None:
        self._stop_event.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        with contextlib.suppress(Exception):
            _nvml().nvmlShutdown()

    def _result(self) -> GpuResult:
        return {
            **self._device,
            "samples": len(self._samples),
            "interval_s": self.interval_s,
            "process": {
                "pid": self.pid,
                "samples": len(self._process_memory),
                "memory_used_mib": _stats(self._process_memory),
                "sm_utilization_pct": _stats(self._process_sm),
            },
            "utilization_pct": _stats([sample[0] for sample in self._samples]),
            "memory_utilization_pct": _stats([sample[1] for sample in self._samples]),
            "memory_used_mib": _stats([sample[2] for sample in self._samples]),
            "overhead": {"sampler_cpu_s": self._sampler_cpu_ns / 1e9},
        }
