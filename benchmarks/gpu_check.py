"""A short check of the GPU path on a machine with an NVIDIA GPU: NVML sampling and torch.profiler's CUDA kernel time.

Run: python benchmarks/gpu_check.py  (prints one JSON document). It drives the profiler's collectors
the way a run does (a recording tracer with step/model/sampler spans) around bf16 matmuls on the GPU
with a deliberate host-side gap per step, so the kernel collector must find CUDA kernel time and GPU
idle gaps, and the NVML collector must see utilization. On a CPU-only machine it says so and exits 0.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

from profiler.collectors.gpu import GpuCollector
from profiler.collectors.kernels import KernelCollector
from profiler.collectors.spans import RecordingTracer, SpanCollector
from profiler.rundir.environment import describe_environment


def main() -> int:
    if not torch.cuda.is_available():
        print(json.dumps({"cuda": False, "note": "no CUDA device: nothing to check"}))
        return 0
    tracer = RecordingTracer()
    collectors = [SpanCollector(tracer), KernelCollector(tracer=tracer, first_step=5, steps=5, every=10), GpuCollector(interval_s=0.05)]
    for collector in collectors:
        collector.start()
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    started = time.perf_counter()
    for _ in range(20):
        with tracer.span("step"):
            with tracer.span("model"):
                for _ in range(10):
                    a = (a @ a).clamp_(-1, 1)
                torch.cuda.synchronize()
            with tracer.span("sampler"):
                time.sleep(0.005)  # host-side control work: the GPU waits
    wall_s = time.perf_counter() - started
    for collector in reversed(collectors):
        collector.stop()
    kernels = collectors[1].result()
    print(json.dumps({
        "environment_gpu": describe_environment()["gpu"],
        "wall_s": wall_s,
        "kernels": {key: kernels.get(key) for key in ("status", "reason", "windows", "op_fee_ns", "cuda", "ops_per_step", "by_span")},
        "gpu": collectors[2].result(),
    }, indent=1, default=str))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
