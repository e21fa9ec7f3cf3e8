"""GPU utilization and memory sampled through NVML on a background thread, when an NVIDIA GPU exists."""

from __future__ import annotations

import contextlib
import statistics
import threading
import time
from typing import Any

from profiler.collectors.base import Collector


def _nvml() -> Any:
    import pynvml  # nvidia-ml-py; imported lazily so a machine without it still profiles

    return pynvml


def _stats(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    return {"mean": statistics.fmean(values), "p50": statistics.median(values), "max": max(values)}


class GpuCollector(Collector):
    """Samples one GPU's utilization (% of time a kernel ran) and memory use every `interval_s`.

    result() = {device, driver, samples, interval_s, utilization_pct: {mean, p50, max},
    memory_utilization_pct: {..}, memory_used_mib: {..}, memory_total_mib, overhead: {sampler_cpu_s}}
    On a machine without an NVIDIA GPU or driver the status is "skipped" with the reason; never raises.
    """

    name = "gpu"

    def __init__(self, *, device_index: int = 0, interval_s: float = 0.1) -> None:
        super().__init__()
        self.device_index = device_index
        self.interval_s = interval_s
        self._thread: threading.Thread | None = None
        self._stop_event = threading.Event()
        self._samples: list[tuple[float, float, float]] = []  # (gpu %, memory %, used MiB)
        self._device: dict[str, Any] = {}
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
        except Exception as exc:  # noqa: BLE001 - NVMLError_LibraryNotFound, DriverNotLoaded, ...
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
        except Exception as exc:  # noqa: BLE001
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
            self._stop_event.wait(self.interval_s)
        self._sampler_cpu_ns = time.thread_time_ns() - cpu_start

    def _stop(self) -> None:
        self._stop_event.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        with contextlib.suppress(Exception):
            _nvml().nvmlShutdown()

    def _result(self) -> dict[str, Any]:
        return {
            **self._device,
            "samples": len(self._samples),
            "interval_s": self.interval_s,
            "utilization_pct": _stats([sample[0] for sample in self._samples]),
            "memory_utilization_pct": _stats([sample[1] for sample in self._samples]),
            "memory_used_mib": _stats([sample[2] for sample in self._samples]),
            "overhead": {"sampler_cpu_s": self._sampler_cpu_ns / 1e9},
        }
